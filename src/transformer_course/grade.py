"""``python -m transformer_course.grade SUBMISSION ...``: see transformer_course.grading.host.cli."""

import sys

from .grading.host.cli import main

if __name__ == "__main__":
    sys.exit(main())
