"""The sandbox side: what runs inside the sandbox, in one process with the student's code, the untrusted side.

``worker.py`` is never imported. ``host/sandbox.py`` copies it into the sandbox's job folder, with the shared
``grading/codec.py`` beside it as ``course_codec.py``, and runs it as a plain script (``python -I``). The package is
not on the sandbox's file system, so the worker imports only the standard library, PyTorch and that codec.

It runs the cells it is sent and answers each command as plain data. The reference implementations, the hidden
cases' seed and the expected values never reach it; the host trusts nothing it sends back.
"""
