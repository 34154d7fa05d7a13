"""The kernel side: what runs in a student's Jupyter kernel, next to the student's own code.

``selfcheck.check`` (``from transformer_course.grading import check``) runs an exercise's public cases on the
student's answer and prints a verdict; ``attempt`` runs the cases and words the failures. It is a help, never a
grade: the kernel belongs to the student, who could change anything here. The hidden cases' seed and the grader
stay on the host, and this folder imports nothing of ``host/`` or ``kits/``. It shares the host's static rules
(``static_check``, ``closed_world``), so a student learns of a refusal before submitting.
"""
