"""``python -m transformer_course.lm_train ...``: the command line of ``transformer_course.training.lm_train``, kept at the
package root so that every stored run's command still runs."""

import sys

from .training.lm_train import main

if __name__ == "__main__":
    sys.exit(main())
