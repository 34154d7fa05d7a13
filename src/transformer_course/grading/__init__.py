"""The grading machinery: the exercise registry, the notebooks' self-checks and the grader, which runs submissions in a
sandbox and compares their outputs (the exercises themselves are in ``transformer_course.exercises``, the release tool
in ``transformer_course.authoring``).

``from transformer_course.grading import check`` is all a notebook needs.

The map. Each folder holds the code that runs in one place:

===========  ============================================  =====================================================
folder       where it runs                                 modules
===========  ============================================  =====================================================
``host/``    the instructor's grading process: trusted     ``cli``, ``grader``, ``sandbox`` (starts the worker),
                                                           ``isolation``, ``limits``, ``submission``, ``cases``,
                                                           ``fallback``, ``witness`` (the second run),
                                                           ``verdicts``, ``report``, ``overview``
``inside/``  the sandbox, in one process with the          ``worker``, a plain script
             student's code: untrusted
``kernel/``  the student's Jupyter kernel                  ``selfcheck`` (``check``), ``attempt``, ``given_names``
``kits/``    what an instructor hands out: a classroom     ``classroom``, ``gradescope``, ``gradescope_kit/``
             repository's CI, a Gradescope autograder
top level    shared by more than one of the above          ``registry``, ``codec``, ``cells``, ``closed_world``,
                                                           ``allowed`` (its lists), ``static_check``, ``given``
===========  ============================================  =====================================================

The trust boundary is the sandbox's edge. The host holds the registry, the reference implementations, the secret
seed of the hidden cases and the comparison. Inside, the student's code holds none of them: the package is not on the
sandbox's file system. Only data crosses. Commands and case inputs go in, answers come out, as JSON that ``codec``
writes and reads. The host decodes every answer strictly and compares it in its own process. The worker crosses as a
file, copied in with the codec beside it; the host never imports it.

The kernel is the student's own process. Its self-check is a help, never a grade: it runs the public cases only, and
the hidden seed never leaves the host. It shares the host's static rules (``static_check``, ``closed_world``), so a
student learns of a refusal before submitting. The kits build what students and Gradescope get; both run the host's
grader there.

The imports keep to this (``tests/test_grading_layout.py`` reads them): ``kernel/`` and ``inside/`` import nothing of
``host/`` or ``kits/``; ``inside/`` imports nothing of the package at all; ``host/`` never imports ``kernel/``;
``kits/`` may use ``host/``. The shared modules import none of the four folders; this file alone reaches
``kernel/``, for ``check``.
"""

__all__ = ["check"]


def __getattr__(name: str):
    # Imported on first use: only a notebook needs it (the grader's processes never do), and importing it pulls in
    # torch and installs the kernel's IPython hook.
    if name == "check":
        from .kernel.selfcheck import check

        return check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
