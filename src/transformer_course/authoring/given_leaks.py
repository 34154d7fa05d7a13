"""Answers in given cells: a function that a student sees (a code cell of a student notebook that is not an exercise
cell) and that holds the solution of one of the chapter's exercises.

The student notebook, the student edition of the book and the classroom repository show every given cell, and the
course promises no solution on any page. Two checks, each per exercise of the chapter:

- ``run``: a given function (or class) whose signature fits the exercise's is called on the exercise's public cases
  (``registry.PUBLIC_SEED``), in a namespace made of the chapter's given definitions and imports, the exercises bound
  to their references; if it passes every case, it is an answer.
- ``ast``: a given function's body, read as the sequence of its syntax nodes with the names left out, is set beside
  the solution's (the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION``) and beside each function that
  the solution defines inside it; ``difflib`` counts the nodes they share in runs of at least RUN nodes (single
  nodes in common, `Name` here and `Call` there, say nothing). A given function that holds at least COVER of the
  solution's nodes shows the solution; one that holds COVER of a helper of the solution's that is at least PART of
  it, and is at least OWN made of that helper, shows half of it.

Tuned on the course as it was when the check came (issue 56): the given functions that answered an exercise held
78% (3.5's corpus BLEU), 85% (5.3's masked softmax), 87% and 97% (the helpers of 2.5 and 1.4) of the code they
copied, and no other given function more than 64%. Since those cells were rewritten, none holds more than 62%. What
neither check reads: lambdas and functions nested in a given function, and given cells of another chapter.

This module reads the cells and holds the ``ast`` check; ``given_runs`` holds the ``run`` check. The release runs
both on every chapter and refuses one that shows an answer (``release.given_cell_leaks``); so does
``tests/test_given_cells.py``.

    python -m transformer_course.authoring.release --leaks   # print what each chapter shows, write nothing
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

from ..grading import registry
from ..grading.cells import BEGIN, END, exercise_id
from ..grading.static_check import clean_source

__all__ = ["Leak", "ast_leaks", "given_cells", "refusal", "solution_blocks"]

COVER = 0.75  # the share of the solution's nodes (or of its helper's) that a given function holds to show it
PART = 0.3  # a helper of the solution counts when it is at least this share of the solution's nodes
OWN = 0.5  # ... and a given function shows it when at least this share of its own nodes are the helper's
RUN = 3  # nodes in common count in runs of at least this many
SMALLEST = 12  # a solution (or helper) of fewer nodes (`return x.mT`) is too short to tell a copy from a habit


@dataclass(frozen=True)
class Leak:
    chapter: int
    notebook: str
    cell: str  # the given cell's id
    name: str  # the given function or class
    exercise: str
    check: str  # "run" or "ast"
    detail: str

    def __str__(self) -> str:
        return (
            f"{self.notebook}, given cell {self.cell!r}: `{self.name}` answers exercise {self.exercise} "
            f"({self.check}: {self.detail})"
        )


# The chapter's notebooks and their cells -------------------------------------------------------------------------


def _source(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def given_cells(student: dict) -> Iterator[tuple[str, ast.Module]]:
    """(cell id, syntax tree) of every code cell of a student notebook that is not an exercise cell."""
    for index, cell in enumerate(student.get("cells", [])):
        if cell.get("cell_type") != "code" or exercise_id(cell) is not None:
            continue
        try:
            tree = ast.parse(clean_source(_source(cell))[0])
        except SyntaxError:
            continue
        yield str(cell.get("id") or f"cell {index}"), tree


def solution_blocks(solution: dict) -> dict[str, str]:
    """Per exercise id, the code between its cell's solution markers (dedented; several blocks joined)."""
    out: dict[str, str] = {}
    for cell in solution.get("cells", []):
        ex_id = exercise_id(cell)
        if ex_id is None:
            continue
        lines, inside = [], False
        for line in _source(cell).split("\n"):
            if BEGIN.match(line):
                inside = True
            elif END.match(line):
                inside = False
                lines.append("")
            elif inside:
                lines.append(line)
        blocks = [textwrap.dedent(b) for b in "\n".join(lines).split("\n\n\n\n") if b.strip()]
        out[ex_id] = "\n".join(blocks)
    return out


# The AST check ---------------------------------------------------------------------------------------------------


def node_sequence(nodes: list[ast.stmt]) -> list[str]:
    """The statements' syntax nodes in order (depth first), names left out: the node's type, and an attribute's or a
    keyword's name (`masked_fill`, `dim`), which say what is called; no load/store contexts, no docstrings."""
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.expr_context):
            return
        if isinstance(node, ast.Attribute):
            out.append(f"Attribute.{node.attr}")
        elif isinstance(node, ast.keyword):
            out.append(f"keyword.{node.arg}")
        else:
            out.append(type(node).__name__)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in _without_docstring(nodes):
        visit(node)
    return out


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def _shared(a: list[str], b: list[str]) -> int:
    """How many nodes of a difflib finds in b, in order, in runs of at least RUN nodes."""
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    return sum(m.size for m in blocks if m.size >= RUN)


def _solution_parts(code: str) -> list[tuple[str, list[str]]]:
    """(what, node sequence) of a solution and of each function it defines that is at least PART of it."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    whole = node_sequence(tree.body)
    parts = [("the solution", whole)]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sequence = node_sequence(node.body)
            if len(sequence) >= max(SMALLEST, PART * len(whole)) and len(sequence) < len(whole):
                parts.append((f"its helper `{node.name}`", sequence))
    return [(what, s) for what, s in parts if len(s) >= SMALLEST]


def _functions(tree: ast.Module) -> Iterator[tuple[str, list[ast.stmt]]]:
    """(name, body) of every function a cell defines at its top level, and of every method of its classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.body
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item.body


def ast_scores(solution: str, body: list[ast.stmt]) -> list[tuple[str, float, float]]:
    """(part of the solution, share of its nodes the body holds, share of the body's nodes that are the part's)."""
    given = node_sequence(body)
    if not given:
        return []
    out = []
    for what, sequence in _solution_parts(solution):
        shared = _shared(sequence, given)
        out.append((what, shared / len(sequence), shared / len(given)))
    return out


def ast_leaks(chapter: int, notebooks: dict[str, tuple[dict, dict]]) -> list[Leak]:
    """The given functions of the chapter's notebooks ({name: (solution, student)}) whose syntax is an exercise's
    solution, or a helper of it (module docstring)."""
    solutions = {}
    for solution, _ in notebooks.values():
        solutions.update(solution_blocks(solution))
    found = []
    for notebook, (_, student) in notebooks.items():
        for cell, tree in given_cells(student):
            for name, body in _functions(tree):
                for ex in registry.chapter_exercises(chapter):
                    if ex.id not in solutions:
                        continue
                    for what, cover, own in ast_scores(solutions[ex.id], body):
                        whole = what == "the solution"
                        if cover >= COVER and (whole or own >= OWN):
                            detail = f"holds {cover:.0%} of the syntax of {what}" + ("" if whole else f" ({own:.0%})")
                            found.append(Leak(chapter, notebook, cell, name, ex.id, "ast", detail))
                            break
    return found


def refusal(leaks: list[Leak]) -> str:
    """The release's message: one line per given function that answers an exercise, and what to do."""
    lines = [f"chapter {leak.chapter}: {leak}" for leak in leaks]
    return (
        "a given cell (which the student notebook, the student book and the classroom repository show) answers an "
        "exercise:\n  " + "\n  ".join(lines) + "\nCall the course package's function there instead, or show another "
        "computation (authoring/given_leaks.py says how the checks measure)."
    )
