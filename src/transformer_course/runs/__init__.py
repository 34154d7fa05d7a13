"""Training runs recorded by ``python -m transformer_course.train --out``, drawn in the chapters.

Each JSON file holds the command that made it, the configuration, the machine, the library versions and the
curve of held-out BLEU against training time. They are data, not code: re-running the command on another
machine gives another curve.
"""
