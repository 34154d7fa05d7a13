"""Distribution: what an instructor builds and hands out, each running the host's grader where it lands.

``classroom`` writes a student repository whose CI grades every push and reports to GitHub Classroom.
``gradescope`` builds a chapter's Gradescope autograder (a zip); ``gradescope_kit/`` holds the scripts it ships and
``autograde``, which runs for every submission. These may use ``host/``; nothing of ``host/``, ``inside/`` or
``kernel/`` uses them.
"""
