"""Attention, from RNNs to Transformers: the course's reference package.

One module per idea (``attention`` for chapter 5, ...); ``grading`` holds the exercise registry,
the self-checks, the release tool and the grader.
"""

__version__ = "0.1.0"
