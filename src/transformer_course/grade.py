"""``python -m transformer_course.grade SUBMISSION ...``: see transformer_course.grading.cli."""

import sys

from .grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
