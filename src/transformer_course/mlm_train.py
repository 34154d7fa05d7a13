"""``python -m transformer_course.mlm_train ...``: the command line of ``transformer_course.training.mlm_train``, kept at the
package root so that every stored run's command still runs."""

import sys

from .training.mlm_train import main

if __name__ == "__main__":
    sys.exit(main())
