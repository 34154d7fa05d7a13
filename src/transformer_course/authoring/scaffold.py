"""``make new-chapter N=12 SLUG=ghost TITLE="A ghost chapter"``: a new chapter from the chapter template.

It adds the chapter's entry to the manifest (src/transformer_course/chapters.toml), writes _toc.yml and the preface's
chapter plan from it, and creates the chapter's files from ``chapter_template/``: the reference module (by default
``models/SLUG.py``), its test (tests/test_SLUG.py), the exercise module (exercises/chNN.py), the grader tests' wrong
answers (tests/wrong_answers/chNN.py), the solution notebook, executed, with its student copy, and the chapter's
page of known mistakes (book/mistakes/chNN.md). Three existing
files change (the manifest, _toc.yml, book/preface.md); every other file is new, and `make book` builds with it.

    python -m transformer_course.authoring.scaffold 12 ghost "A ghost chapter" [--part PART] [--module models.ghost]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib.resources import files
from pathlib import Path

from ..repository import course_root
from . import manifest as chapter_manifest

__all__ = ["ScaffoldError", "new_chapter", "notebook_from_template"]

TEMPLATE = files("transformer_course.authoring") / "chapter_template"
LAYERS = ("models", "data", "decoding", "evaluation", "measurement", "experiments")


class ScaffoldError(ValueError):
    """A chapter that cannot be made as asked: the message says what is wrong."""


def _fill(text: str, names: dict[str, str]) -> str:
    # $number, $title ... only: the template's math ($$ ... $$, $d_k$) stays as it is
    return re.sub(r"\$(" + "|".join(names) + r")\b", lambda m: names[m.group(1)], text)


def notebook_from_template(names: dict[str, str]) -> dict:
    """The solution notebook of chapter_template/notebook.md: cells split at '%% kind' lines, ids chNN-KK."""
    text = _fill((TEMPLATE / "notebook.md").read_text(), names)
    chunks = re.split(r"^%% ", text.split("-->", 1)[1], flags=re.M)[1:]
    cells = []
    for k, chunk in enumerate(chunks):
        header, _, source = chunk.partition("\n")
        kind, *rest = header.split()
        lines = source.rstrip("\n").splitlines(keepends=True)
        cell: dict = {
            "cell_type": "markdown" if kind == "markdown" else "code",
            "id": f"ch{int(names['number']):02d}-{k:02d}",
        }
        cell["metadata"] = {"exercise": {"id": rest[0], "points": int(rest[1])}} if kind == "exercise" else {}
        if cell["cell_type"] == "code":
            cell.update(execution_count=None, outputs=[])
        cell["source"] = lines
        cells.append(cell)
    metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                "language_info": {"name": "python"}}  # fmt: skip
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def _entry(number: int, slug: str, title: str, part: str, module: str) -> str:
    def q(value: str | list[str]) -> str:
        return json.dumps(value, ensure_ascii=False)

    return (
        f"\n[[chapter]]\nnumber = {number}\nslug = {q(slug)}\ntitle = {q(title)}\npart = {q(part)}\n"
        f'builds = {q("three steps of attention (a template: replace them)")}\nmodules = {q([module])}\n'
        f'exercises = "exercises.ch{number:02d}"\ndiagrams = []\nruns = []\nsections = []\n'
    )


def new_chapter(root: Path, number: int, slug: str, title: str, part: str | None = None,
                module: str | None = None, execute: bool = True) -> list[Path]:  # fmt: skip
    """Make chapter ``number`` in the course at ``root``; returns the files it created."""
    module = module or f"models.{slug}"
    package, _, name = module.partition(".")
    if not slug.isidentifier() or not slug.islower():
        raise ScaffoldError(f"the slug names files and modules: lower case, letters, digits and _, got {slug!r}")
    if package not in LAYERS or not name.isidentifier():
        raise ScaffoldError(f"--module must be LAYER.NAME with LAYER one of {', '.join(LAYERS)}, got {module!r}")
    manifest_path = root / "src" / "transformer_course" / chapter_manifest.MANIFEST
    text = manifest_path.read_text()
    current = chapter_manifest.load(text)
    if number in current.numbers() or not 0 < number < 100:
        raise ScaffoldError(f"chapter {number} exists or is out of range: the chapters are {current.numbers()}")
    notebook = f"{number:02d}_{slug}.ipynb"
    names = {"number": str(number), "title": title, "slug": slug, "module": module, "package": package,
             "name": name, "notebook": notebook}  # fmt: skip
    src = root / "src" / "transformer_course"
    targets = {
        src / package / f"{name}.py": "reference.py.txt",
        src / "exercises" / f"ch{number:02d}.py": "exercises.py.txt",
        root / "tests" / f"test_{slug}.py": "test_reference.py.txt",
        root / "tests" / "wrong_answers" / f"ch{number:02d}.py": "wrong_answers.py.txt",
    }
    solution = root / "solutions" / notebook
    taken = [str(p.relative_to(root)) for p in [*targets, solution] if p.exists()]
    if taken:
        raise ScaffoldError(f"these files exist already, and a new chapter never overwrites one: {taken}")
    # The manifest first: what follows is checked against it.
    new_text = text.rstrip("\n") + "\n" + _entry(number, slug, title, part or title, module)
    chapter_manifest.load(new_text)  # refuse an entry the manifest could not read, before writing anything
    manifest_path.write_text(new_text)
    for path, template in targets.items():
        path.write_text(_fill((TEMPLATE / template).read_text(), names))
    solution.write_text(json.dumps(notebook_from_template(names), indent=1, ensure_ascii=False) + "\n")
    chapter_manifest.write(root, chapter_manifest.load(new_text))
    if execute:  # outputs stored, then the student copy: both in the chapter's own processes, from root's package
        import subprocess

        env_path = str(src.parent)
        for args in (["-m", "transformer_course.authoring.execute", str(solution)],
                     ["-m", "transformer_course.authoring.release", "--root", str(root)],
                     ["-m", "transformer_course.authoring.mistakes", "--chapter", str(number)]):  # fmt: skip
            done = subprocess.run([sys.executable, *args], cwd=root, env=_env(env_path), capture_output=True, text=True)
            if done.returncode:
                raise ScaffoldError(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return [*targets, solution, root / "notebooks" / notebook, root / "book" / "mistakes" / f"ch{number:02d}.md"]
    return [*targets, solution]


def _env(src: str) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_course.authoring.scaffold", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("number", type=int, help="the chapter's number, e.g. 12")
    parser.add_argument("slug", help="its name in file names, e.g. ghost (solutions/12_ghost.ipynb)")
    parser.add_argument("title", help='its title, e.g. "A ghost chapter"')
    parser.add_argument("--part", help="the book's part it joins or opens (default: a part named by its title)")
    parser.add_argument("--module", help="its reference module, LAYER.NAME (default: models.SLUG)")
    parser.add_argument("--root", type=Path, default=None, help="the course folder (default: this repository)")
    parser.add_argument("--no-execute", action="store_true", help="leave the notebook unexecuted, no student copy")
    args = parser.parse_args(argv)
    try:
        made = new_chapter(args.root or course_root(), args.number, args.slug, args.title, args.part, args.module,
                           execute=not args.no_execute)  # fmt: skip
    except ScaffoldError as error:
        print(f"make new-chapter: {error}", file=sys.stderr)
        return 2
    print("changed src/transformer_course/chapters.toml, _toc.yml, book/preface.md; created:")
    for path in made:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
