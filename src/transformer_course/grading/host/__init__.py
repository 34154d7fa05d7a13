"""The host side: what runs in the instructor's grading process, the trusted side of the boundary.

It reads a submission as data (``submission``), checks each exercise cell before anything runs (the shared
``static_check``), starts the sandbox (``sandbox``, ``isolation``, ``limits``) and sends the worker commands. It draws
the hidden cases from a secret seed, compares the answers with the reference implementations here (``verdicts``), and
writes the reports (``report``, ``overview``). ``cli`` is the command line; ``grader`` runs one submission.

What crosses to the sandbox is data only, through the shared ``codec``, and the source of the course's given code and
fallbacks (``fallback``) as text. Nothing the worker sends back is trusted: answers are decoded strictly, capped in
size, and compared here. This folder never imports ``kernel/``; it reads ``inside/worker.py`` as bytes, never as code.
"""
