"""Store the phone's copy of every diagram output of the solution notebooks, without executing them again.

    python -m transformer_course.authoring.diagram_outputs solutions/01_rnn.ipynb [...]

A diagram output (an SVG drawn by transformer_course.diagrams) carries its copy laid out for a phone in its
metadata (``Diagram._repr_mimebundle_``), which `make execute` stores. After a change to the phone's layouts only,
this redraws the diagram cells alone, in a fresh kernel: first those cells by themselves (most import the diagrams
and call one), or, where one needs what earlier cells computed (chapter 9's beam tree draws a search), every code
cell up to the last diagram. It then writes each diagram output's metadata, and nothing else, into the notebook:
the notebook's SVG must come out byte for byte as stored (else it stops and says which cell differs), so the other
outputs, the counts and the timings the prose quotes stay as they are.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

from ..training.budget import ENV

SVG = "image/svg+xml"


def _text(value):
    """A stored output's text as one string: the file may hold it as a list of lines (nbformat writes either)."""
    return "".join(value) if isinstance(value, list) else value


def _diagram_cells(nb) -> list[int]:
    return [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(SVG in o.get("data", {}) for o in c.outputs)
    ]


def _run(nb, indices: list[int], folder: Path) -> list | None:
    """The outputs of the cells at ``indices`` when those cells alone run in a fresh kernel (None if one fails)."""
    from nbclient.exceptions import CellExecutionError

    from .execute import _run as run

    part = copy.deepcopy(nb)
    part.cells = [copy.deepcopy(nb.cells[i]) for i in indices]
    try:
        run(part, folder, timeout=600)
    except CellExecutionError:
        return None
    return [c.outputs for c in part.cells]


def redraw(path: Path) -> int:
    """Write the phone's copies of the diagram outputs of ``path``; returns how many outputs it wrote."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    cells = _diagram_cells(nb)
    if not cells:
        return 0
    ran = _run(nb, cells, path.parent)
    if ran is None:  # a diagram cell needs the cells before it
        prefix = [i for i in range(cells[-1] + 1) if nb.cells[i].cell_type == "code"]
        outputs = _run(nb, prefix, path.parent)
        if outputs is None:
            raise RuntimeError(f"{path}: the cells up to the last diagram fail in a fresh kernel")
        ran = [outputs[prefix.index(i)] for i in cells]
    # The file as it is, key order and all (a cell edited by hand may not be in nbformat's order): only the
    # metadata of its diagram outputs changes.
    text = path.read_text(encoding="utf-8")
    raw = json.loads(text)
    written = 0
    for i, new in zip(cells, ran):
        old = raw["cells"][i]["outputs"]
        stored = [o for o in old if SVG in o.get("data", {})]
        drawn = [o for o in new if SVG in o.get("data", {})]
        if len(stored) != len(drawn) or any(
            _text(a["data"][SVG]) != _text(b["data"][SVG])
            or _text(a["data"].get("text/plain")) != _text(b["data"].get("text/plain"))
            for a, b in zip(stored, drawn)
        ):
            raise RuntimeError(
                f"{path}, cell {nb.cells[i].get('id')}: the diagram is not the one stored (make execute)"
            )
        for a, b in zip(stored, drawn):
            a["metadata"] = dict(b.get("metadata", {}))
            written += 1
    path.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Store the phone's copies of the notebooks' diagrams")
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault(ENV, "1")  # as `make execute`: runs budgeted in steps, never in minutes
    for path in args.notebooks:
        print(f"{path}: {redraw(path)} diagram outputs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
