"""Wrong answers per chapter (chNN.py), written as exercise-cell code, for the grader tests.

Each module defines WRONG_ROUNDS: a list of {exercise id: cell code without its header line}. A round
costs one grading run, and every exercise named in it must lose exactly its own points.
"""
