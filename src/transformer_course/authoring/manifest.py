"""The chapter manifest (``src/transformer_course/chapters.toml``): one entry per chapter, and what is made from it.

``_toc.yml`` and the chapter plan of ``book/preface.md`` are written from the manifest (``make manifest``); the
tests compare them with it, and hold the package's chapter map, the grader's registry and the kits' chapter lists
to it (tests/test_manifest.py). ``authoring.scaffold`` adds a chapter to it.

    python -m transformer_course.authoring.manifest           # write _toc.yml and the preface's chapter plan
    python -m transformer_course.authoring.manifest --check   # exit 1, naming the file, if either differs
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from ..repository import course_root

__all__ = ["Chapter", "Manifest", "Section", "check", "load", "plan_table", "toc_text", "write"]

MANIFEST = "chapters.toml"
PLAN_START = "<!-- the chapter plan: written from src/transformer_course/chapters.toml by `make manifest` -->"
PLAN_END = "<!-- end of the chapter plan -->"


@dataclass(frozen=True)
class Section:
    """A further notebook of a chapter, without exercises."""

    slug: str
    title: str
    builds: str


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str
    title: str
    part: str
    builds: str
    modules: tuple[str, ...]  # its modules in the package, e.g. "models.rnn"
    exercises: str  # its exercise module ("exercises.ch01"), or "" for none
    diagrams: tuple[str, ...]  # modules of transformer_course.diagrams
    runs: tuple[str, ...]  # file-name patterns of its stored runs (runs/NAME.json, without .json)
    sections: tuple[Section, ...]

    @property
    def notebook(self) -> str:
        """The chapter's notebook, e.g. '05_self_attention.ipynb'."""
        return f"{self.number:02d}_{self.slug}.ipynb"

    @property
    def notebooks(self) -> list[str]:
        """Its notebooks, the chapter's own first, then its sections'."""
        return [self.notebook] + [f"{self.number:02d}_{s.slug}.ipynb" for s in self.sections]

    def owns_run(self, stem: str) -> bool:
        return any(fnmatch.fnmatchcase(stem, pattern) for pattern in self.runs)


@dataclass(frozen=True)
class Manifest:
    book: dict  # root, front and back parts of the book (pages that are not chapters)
    chapters: tuple[Chapter, ...]

    def chapter(self, number: int) -> Chapter:
        for chapter in self.chapters:
            if chapter.number == number:
                return chapter
        raise ValueError(f"there is no chapter {number} in {MANIFEST}: the chapters are {self.numbers()}")

    def numbers(self) -> list[int]:
        return [c.number for c in self.chapters]

    def module_chapters(self) -> dict[str, int]:
        """Package module -> the chapter it belongs to (tests/test_package_structure.py's chapter map)."""
        return {module: c.number for c in self.chapters for module in c.modules}

    def shared_run(self, stem: str) -> bool:
        return any(fnmatch.fnmatchcase(stem, pattern) for pattern in self.book.get("shared_runs", ()))


def _chapter(entry: dict) -> Chapter:
    required = {"number", "slug", "title", "part", "builds", "modules", "exercises", "diagrams", "runs", "sections"}
    missing, unknown = required - set(entry), set(entry) - required
    if missing or unknown:
        raise ValueError(
            f"{MANIFEST}: chapter {entry.get('number', '?')} lacks {sorted(missing)} and has unknown {sorted(unknown)}"
        )
    if not (isinstance(entry["number"], int) and entry["number"] > 0 and entry["slug"].isidentifier()):
        raise ValueError(f"{MANIFEST}: a chapter needs a positive number and a slug like 'beam_search', got {entry}")
    sections = tuple(Section(s["slug"], s["title"], s["builds"]) for s in entry["sections"])
    lists = {k: tuple(entry[k]) for k in ("modules", "diagrams", "runs")}
    return Chapter(entry["number"], entry["slug"], entry["title"], entry["part"], entry["builds"],
                   lists["modules"], entry["exercises"], lists["diagrams"], lists["runs"], sections)  # fmt: skip


def load(text: str | None = None) -> Manifest:
    """The manifest, from the package's chapters.toml (or ``text``), in chapter order; a malformed one is an error."""
    data = tomllib.loads(text if text is not None else files("transformer_course").joinpath(MANIFEST).read_text())
    chapters = tuple(sorted((_chapter(e) for e in data.get("chapter", [])), key=lambda c: c.number))
    numbers = [c.number for c in chapters]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"{MANIFEST}: chapter numbers must be distinct, got {numbers}")
    return Manifest(data["book"], chapters)


def toc_text(manifest: Manifest) -> str:
    """_toc.yml: the book's front pages, then a part per run of chapters with the same part, then its back pages."""
    lines = [
        "# Table of contents: written from src/transformer_course/chapters.toml by `make manifest`; edit that file.",
        "# Chapters are the solution notebooks: the book shows the worked solutions with their stored outputs;",
        "# students work the generated copies in notebooks/. A chapter's further notebooks are its sections.",
        "format: jb-book",
        f"root: {manifest.book['root']}",
        "parts:",
    ]

    def part(caption: str, entries: list[tuple[str, list[str]]]) -> None:
        lines.extend([f"  - caption: {caption}", "    chapters:"])
        for page, sections in entries:
            lines.append(f"      - file: {page}")
            if sections:  # "glob:PATTERN" stands for every page that matches
                lines.append("        sections:")
                lines.extend(
                    f"          - glob: {s[5:]}" if s.startswith("glob:") else f"          - file: {s}"
                    for s in sections
                )

    for group in manifest.book["front"]:
        part(group["caption"], [(p, group.get("sections", []) if i == 0 else []) for i, p in enumerate(group["pages"])])
    groups: list[tuple[str, list[Chapter]]] = []
    for chapter in manifest.chapters:
        if not groups or groups[-1][0] != chapter.part:
            groups.append((chapter.part, []))
        groups[-1][1].append(chapter)
    for caption, chapters in groups:
        part(
            caption,
            [(f"solutions/{c.notebook[:-6]}", [f"solutions/{n[:-6]}" for n in c.notebooks[1:]]) for c in chapters],
        )
    for group in manifest.book["back"]:
        part(group["caption"], [(p, group.get("sections", []) if i == 0 else []) for i, p in enumerate(group["pages"])])
    return "\n".join(lines) + "\n"


def plan_table(manifest: Manifest) -> str:
    """The preface's chapter plan: a row per notebook, linked, with what the reader builds in it."""
    rows = ["| Chapter | Title | What you build |", "|---|---|---|"]
    for c in manifest.chapters:
        rows.append(f"| {c.number} | {{doc}}`{c.title} <../solutions/{c.notebook[:-6]}>` | {c.builds} |")
        for s, name in zip(c.sections, c.notebooks[1:]):
            rows.append(f"| | {{doc}}`{s.title} <../solutions/{name[:-6]}>` | {s.builds} |")
    return "\n".join(rows)


def _preface_with_plan(text: str, manifest: Manifest) -> str:
    if PLAN_START not in text or PLAN_END not in text:
        raise ValueError(f"book/preface.md lacks the chapter plan's markers: {PLAN_START} ... {PLAN_END}")
    before, rest = text.split(PLAN_START, 1)
    _, after = rest.split(PLAN_END, 1)
    return f"{before}{PLAN_START}\n{plan_table(manifest)}\n{PLAN_END}{after}"


def _targets(root: Path, manifest: Manifest) -> dict[Path, str]:
    preface = root / "book" / "preface.md"
    return {root / "_toc.yml": toc_text(manifest), preface: _preface_with_plan(preface.read_text(), manifest)}


def check(root: Path | None = None, manifest: Manifest | None = None) -> list[str]:
    """The files that differ from what the manifest makes (empty when all agree)."""
    root = root or course_root()
    targets = _targets(root, manifest or load())
    return [str(p.relative_to(root)) for p, text in targets.items() if not p.is_file() or p.read_text() != text]


def write(root: Path | None = None, manifest: Manifest | None = None) -> list[str]:
    """Write _toc.yml and the preface's chapter plan from the manifest; returns the files that changed."""
    root = root or course_root()
    changed = []
    for path, text in _targets(root, manifest or load()).items():
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(str(path.relative_to(root)))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_course.authoring.manifest", description=__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    if args.check:
        stale = check()
        for name in stale:
            print(f"{name} differs from what {MANIFEST} makes: run `make manifest`", file=sys.stderr)
        return 1 if stale else 0
    for name in write():
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
