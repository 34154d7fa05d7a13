"""Numbers in the prose that cannot go stale: every number that a chapter's text quotes is found in what backs it.

    python -m transformer_course.authoring.claims [solutions/NN_name.ipynb ...]     # `make claims`

For every number in the markdown cells of a solution notebook the check looks, rounded as the prose prints it,
for a value in one of five places:

- **an output** of the same notebook (what the book shows under the code);
- **an assertion** of the same notebook (a number that a cell's ``assert`` holds the output to);
- **a stored run** that the notebook reads: a file of ``runs/`` or ``reference/`` whose name its code cells
  mention, or that a markdown cell names in a comment ``<!-- source: runs/NAME.json -->``;
- **a configuration** of the course (``configs``, the language models' tables): sizes, budgets, schedules;
- **the code** of the same notebook: a setting that its cells write ("600 steps of 64 images"), comments left out.

"Rounded as printed": 30.3 matches 30.26 but not 30.4; 1,920 matches 1920 (and 579,000 matches 578,911: a
number's trailing zeros are rounding, as long as two significant digits are left); 88% matches 0.882 as well as
88.2; 3.6 million matches 3,621,440. Numbers that are not measurements are recognised by rule (the ``rules`` below: a
chapter, section or exercise number, a year, a count below 10 written as a digit, a software version, a bit width)
or listed with their reason in ``claims_allowed.toml``. Anything else that matches nothing is reported with its
notebook, cell and sentence, and the command exits with status 1. Math and code spans are not prose and are not
read. It also reports a cell whose printed output strict nbval ignores and whose code asserts nothing
(``unasserted_cells``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .prose_numbers import Quote, prose_numbers

__all__ = ["Quote", "Report", "check", "check_notebook", "main", "prose_numbers"]

PACKAGE = Path(__file__).resolve().parents[1]
ALLOWED = Path(__file__).with_name("claims_allowed.toml")
RUN_FOLDERS = (PACKAGE / "runs", PACKAGE / "reference")

VERSION = re.compile(r"\d+(\.\d+){2,}\S*")
SOURCE_COMMENT = re.compile(r"<!--\s*source:\s*([^>]*?)\s*-->")


@dataclass
class Report:
    quotes: list[Quote] = field(default_factory=list)
    unused_allowances: list[dict] = field(default_factory=list)
    unasserted: list[str] = field(default_factory=list)  # "notebook, cell id" of ignored outputs asserting nothing

    @property
    def missing(self) -> list[Quote]:
        return [q for q in self.quotes if not q.backed_by]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for q in self.quotes:
            kind = q.backed_by.split(":")[0] if q.backed_by else "missing"
            counts[kind] = counts.get(kind, 0) + 1
        return counts


# What backs the prose ----------------------------------------------------------------------------------------------


def _numbers_in_text(text: str, out: list[float]) -> None:
    text = VERSION.sub(" ", text)  # "sacrebleu 2.6.0", "torch 2.13.0+cpu": a version is no measurement
    for m in re.finditer(r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", text):
        try:
            out.append(float(m.group().replace(",", "")))
        except ValueError:
            pass


def _numbers_in_data(data: object, out: list[float]) -> None:
    if isinstance(data, bool):
        return
    if isinstance(data, int | float):
        out.append(abs(float(data)))
    elif isinstance(data, str):
        _numbers_in_text(data, out)
    elif isinstance(data, dict):
        for v in data.values():
            _numbers_in_data(v, out)
    elif isinstance(data, list | tuple):
        for v in data:
            _numbers_in_data(v, out)


def _output_text(output: dict) -> str:
    """An output's text, tags stripped: a stream's, or a display's plain, HTML and markdown forms."""
    data = output.get("data", {})
    parts = [output.get("text", "")] + [data.get(mime, "") for mime in ("text/plain", "text/html", "text/markdown")]
    return re.sub(r"<[^>]+>", " ", "\n".join("".join(p) for p in parts))


def stored_runs() -> dict[str, Path]:
    """Every stored run by name: ``runs/NAME.json`` and ``reference/NAME.json``."""
    return {p.stem: p for folder in RUN_FOLDERS for p in sorted(folder.glob("*.json"))}


def _runs_read(code: str, markdown: str, runs: dict[str, Path]) -> list[str]:
    """The stored runs a notebook reads: named in its code (a name, or the stem of a family of seeds), or named by a
    markdown cell's ``<!-- source: ... -->`` comment."""
    named = {Path(s.strip()).stem for m in SOURCE_COMMENT.finditer(markdown) for s in m.group(1).split(",")}
    unknown = named - set(runs)
    if unknown:
        raise ValueError(f"a source comment names no stored run: {sorted(unknown)}")
    read = []
    for name in runs:
        family = re.sub(r"\d+$", "", name)  # "x-seed" of "x-seed0", for f"x-seed{s}"
        base = re.sub(r"(-5min)?-seed\d+$", "", name)  # "x" of "x-5min-seed0", for seeds("x")
        quoted = base != name and re.search(rf"[\"']{re.escape(base)}[\"']", code)
        if name in named or name in code or (family != name and family in code) or quoted:
            read.append(name)
    return read


def _configurations() -> list[float]:
    from ..training import configs, lm_train, mlm_train
    from ..training import kinds as models

    out: list[float] = [float(models.DEFAULT_VOCAB)]
    for table in (configs.CONFIGS, configs.COPY_EXPERIMENT, configs.DATE_EXPERIMENT, lm_train.LM_CONFIGS):
        _numbers_in_data(table, out)
    _numbers_in_data(mlm_train.MLM_SETTINGS, out)
    return out


@dataclass
class _Evidence:
    kinds: dict[str, list[float]]

    def find(self, quote: Quote) -> str:
        tolerance = 0.5 * 10.0**-quote.decimals + 1e-9
        for kind, values in self.kinds.items():
            for scale in quote.scales:
                lo, hi = (quote.value - tolerance) / scale, (quote.value + tolerance) / scale
                i = bisect.bisect_left(values, lo)
                if i < len(values) and values[i] <= hi:
                    return kind
        return ""


def _evidence(nb: dict, runs: dict[str, Path], configurations: list[float]) -> _Evidence:
    outputs: list[float] = []
    asserted: list[float] = []
    settings: list[float] = []
    code, markdown = "", ""
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            markdown += source + "\n"
            continue
        if cell["cell_type"] != "code":
            continue
        code += source + "\n"
        # The experiment's settings, as its code writes them (comments left out): "600 steps of 64 images".
        _numbers_in_text(re.sub(r"(?<=\d)_(?=\d)", "", re.sub(r"#.*", "", source)), settings)
        for output in cell.get("outputs", []):
            _numbers_in_text(_output_text(output), outputs)
        for line in source.splitlines():
            if re.search(r"\bassert\b", line):
                _numbers_in_text(line, asserted)
    from_runs: list[float] = []
    for name in _runs_read(code, markdown, runs):
        _numbers_in_data(json.loads(runs[name].read_text()), from_runs)
    kinds = {
        "output": outputs,
        "assertion": asserted,
        "run": from_runs,
        "configuration": configurations,
        "code": settings,
    }
    return _Evidence({k: sorted(abs(v) for v in values) for k, values in kinds.items()})


def _allowances() -> list[dict]:
    return tomllib.loads(ALLOWED.read_text())["allowed"]


def check_notebook(path: Path, configurations: list[float] | None = None, allowances: list[dict] | None = None):
    """The quotes of one notebook, each marked with what backs it; the allowances that matched none of them; the
    cells whose ignored output asserts nothing."""
    nb = json.loads(path.read_text())
    configurations = _configurations() if configurations is None else configurations
    allowances = [a for a in (_allowances() if allowances is None else allowances) if a["notebook"] == path.name]
    evidence = _evidence(nb, stored_runs(), configurations)
    quotes = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            quotes += prose_numbers(path.name, cell.get("id", "?"), "".join(cell["source"]))
    used: set[int] = set()
    for quote in quotes:
        if quote.backed_by:
            continue
        quote.backed_by = evidence.find(quote)
        if quote.backed_by:
            continue
        for i, allowance in enumerate(allowances):
            if allowance["number"] == quote.text and allowance["words"] in quote.sentence:
                quote.backed_by = f"allowed: {allowance['reason']}"
                used.add(i)
                break
    return quotes, [a for i, a in enumerate(allowances) if i not in used], _unasserted(nb, path.name)


IGNORED = "nbval-ignore-output"


def unasserted_cells(path: Path) -> list[str]:
    """``_unasserted`` of the notebook at ``path``."""
    return _unasserted(json.loads(path.read_text()), path.name)


def _unasserted(nb: dict, name: str) -> list[str]:
    """The cells whose printed output strict nbval does not compare (tagged ``nbval-ignore-output``) and whose code
    asserts nothing: the prose reads them, and only an assertion holds a re-run to what it reads. A cell whose
    output the prose does not read says so, and why, in a comment ``# nothing to assert: ...``. A cell that draws
    and prints nothing (its only text is matplotlib's "<Figure size ...>") has nothing for nbval to compare."""
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or IGNORED not in cell.get("metadata", {}).get("tags", []):
            continue
        text = "".join(_output_text(o) for o in cell.get("outputs", []))
        printed = re.sub(r"<Figure size [^>]*>", "", text).strip()
        source = "".join(cell["source"])
        if printed and not re.search(r"^\s*(assert\b|# nothing to assert: \S)", source, re.M):
            found.append(f"{name}, cell {cell.get('id', '?')}")
    return found


def check(paths: list[Path]) -> Report:
    report = Report()
    configurations = _configurations()
    allowances = _allowances()
    names = {p.name for p in paths}
    for path in paths:
        quotes, unused, unasserted = check_notebook(path, configurations, allowances)
        report.quotes += quotes
        report.unused_allowances += unused
        report.unasserted += unasserted
    # An allowance for a notebook that is not checked here is neither used nor unused.
    report.unused_allowances = [a for a in report.unused_allowances if a["notebook"] in names]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check every number of the chapters' prose against what backs it")
    parser.add_argument("notebooks", nargs="*", type=Path, help="solution notebooks (default: solutions/*.ipynb)")
    parser.add_argument("--list", action="store_true", help="print every number with what backs it")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(Path("solutions").glob("*.ipynb"))
    report = check(paths)
    if args.list:
        for q in report.quotes:
            print(f"{q.notebook} {q.cell} {q.text:>10s}  {q.backed_by or 'MISSING'}")
    for q in report.missing:
        print(f"{q.notebook}, cell {q.cell}: {q.text} is in no output, assertion, stored run, configuration or code.")
        print(f"    {q.sentence}")
    for a in report.unused_allowances:
        print(f"{a['notebook']}: the allowance for {a['number']} ({a['words']!r}) matches no number of the prose.")
    counts = report.counts()
    checked = sum(counts.get(k, 0) for k in ("output", "assertion", "run", "configuration", "code"))
    print(
        f"{len(report.quotes)} numbers quoted in {len(paths)} notebooks: {checked} checked "
        f"({counts.get('output', 0)} against an output, {counts.get('assertion', 0)} an assertion, "
        f"{counts.get('run', 0)} a stored run, {counts.get('configuration', 0)} a configuration, "
        f"{counts.get('code', 0)} the code), "
        f"{counts.get('rule', 0)} recognised by rule, {counts.get('allowed', 0)} allow-listed, "
        f"{len(report.missing)} not found."
    )
    for cell in report.unasserted:
        print(f"{cell}: its output is not compared by nbval (tagged {IGNORED}) and its code asserts nothing.")
    return 1 if report.missing or report.unused_allowances or report.unasserted else 0


if __name__ == "__main__":
    sys.exit(main())
