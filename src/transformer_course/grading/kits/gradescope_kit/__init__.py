"""The Gradescope kit's own files: setup.sh and run_autograder (templates that ``grading.kits.gradescope`` fills in),
and the module that grades a submission on Gradescope (``autograde``)."""
