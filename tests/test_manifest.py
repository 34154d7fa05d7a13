"""The chapter manifest (src/transformer_course/chapters.toml) is the one list of chapters: the table of contents,
the preface's chapter plan, the notebooks, the grader's registry, the kits' chapter lists, the stored runs and the
diagrams all agree with it."""

import fnmatch
from importlib.resources import files
from pathlib import Path

import pytest

from transformer_course.authoring import manifest as m
from transformer_course.grading import registry
from transformer_course.grading.kits import classroom, gradescope

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = m.load()


def test_the_manifest_holds_every_chapter_in_order():
    assert MANIFEST.numbers() == sorted(set(MANIFEST.numbers())) and MANIFEST.numbers()[:10] == list(range(1, 11))
    assert MANIFEST.chapter(9).notebooks == ["09_beam_search.ipynb", "09_evaluation.ipynb"]


def test_the_table_of_contents_and_the_chapter_plan_are_written_from_it():
    assert m.check(ROOT) == [], "run `make manifest`"
    toc = (ROOT / "_toc.yml").read_text()
    plan = (ROOT / "book" / "preface.md").read_text()
    for chapter in MANIFEST.chapters:
        for notebook in chapter.notebooks:
            assert f"file: solutions/{notebook[:-6]}\n" in toc and f"<../solutions/{notebook[:-6]}>`" in plan


def test_the_check_finds_a_stale_file(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "preface.md").write_text(f"# Preface\n\n{m.PLAN_START}\nold\n{m.PLAN_END}\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\n")
    assert m.check(tmp_path) == ["_toc.yml", "book/preface.md"]
    assert m.write(tmp_path) == ["_toc.yml", "book/preface.md"] and m.check(tmp_path) == []
    assert "| 10 | {doc}`Language models" in (tmp_path / "book" / "preface.md").read_text()


def test_every_notebook_of_the_course_is_a_chapter_or_a_section_of_one():
    listed = {name for c in MANIFEST.chapters for name in c.notebooks}
    for folder in ("solutions", "notebooks"):
        assert {p.name for p in (ROOT / folder).glob("*.ipynb")} == listed, folder


def test_the_graders_registry_and_the_kits_list_the_manifests_chapters():
    graded = {c.number: f"transformer_course.{c.exercises}" for c in MANIFEST.chapters if c.exercises}
    assert registry.CHAPTER_MODULES == graded
    for number in graded:
        assert registry.chapter_notebook(number) == MANIFEST.chapter(number).notebook
        config = gradescope.kit_config(number, "auto", 600, 60, "0")
        assert config["notebook"] == MANIFEST.chapter(number).notebook
    # The classroom's result has a test per exercise of every chapter the manifest grades, and no others.
    result = classroom.classroom_result(ROOT / "no-results-here")
    chapters = {int(t["name"].split()[1].split(".")[0]) for t in result["tests"]}
    assert chapters == set(graded)


def test_every_module_and_diagram_it_names_exists():
    package = ROOT / "src" / "transformer_course"
    for chapter in MANIFEST.chapters:
        for module in chapter.modules + ((chapter.exercises,) if chapter.exercises else ()):
            assert (package / (module.replace(".", "/") + ".py")).is_file(), f"chapter {chapter.number}: {module}"
        for diagram in chapter.diagrams:
            assert (package / "diagrams" / f"{diagram}.py").is_file(), f"chapter {chapter.number}: {diagram}"
    drawn = {d for c in MANIFEST.chapters for d in c.diagrams}
    public = {p.stem for p in (package / "diagrams").glob("*.py") if not p.stem.startswith("_")}
    assert public == drawn, f"diagram modules no chapter names: {sorted(public - drawn)}"


def test_every_stored_run_belongs_to_one_chapter_or_is_shared():
    stems = [
        p.name.removesuffix(".json")
        for p in files("transformer_course.runs").iterdir()
        if p.name.endswith((".json", ".log"))  # not __init__.py, nor a __pycache__ folder
    ]
    assert len(stems) > 40
    for stem in stems:
        owners = [c.number for c in MANIFEST.chapters if c.owns_run(stem)]
        assert len(owners) + MANIFEST.shared_run(stem) == 1, f"runs/{stem}: chapters {owners}"
    for chapter in MANIFEST.chapters:
        for pattern in chapter.runs:
            assert any(fnmatch.fnmatchcase(s, pattern) for s in stems), (
                f"chapter {chapter.number}: no run matches {pattern}"
            )


def test_a_malformed_entry_gets_a_clear_error():
    good = (files("transformer_course") / "chapters.toml").read_text()
    with pytest.raises(ValueError, match=r"chapter 11 lacks \['builds'"):
        m.load(
            good + '\n[[chapter]]\nnumber = 11\nslug = "x"\ntitle = "X"\npart = "P"\nmodules = []\n'
            'exercises = ""\ndiagrams = []\nruns = []\nsections = []\n'
        )
    with pytest.raises(ValueError, match="distinct"):
        m.load(good + good[good.index("[[chapter]]") :])
    with pytest.raises(ValueError, match="there is no chapter 99"):
        MANIFEST.chapter(99)
