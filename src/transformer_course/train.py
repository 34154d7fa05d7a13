"""``python -m transformer_course.train ...``: the command line of ``transformer_course.training.train``, kept at the
package root so that every stored run's command still runs."""

import sys

from .training.train import main

if __name__ == "__main__":
    sys.exit(main())
