"""Tools for the course's authors, not used by the grader: the release tool that writes the student notebooks
from the solutions (``release``), and the in-place executor that stores a solution notebook's outputs
(``execute``)."""
