import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def course_root() -> Path:
    # COURSE_TEST_ROOT lets the grader tests run against another copy of the course (a scratch chapter).
    return Path(os.environ.get("COURSE_TEST_ROOT", ROOT))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
