"""Execute notebooks in a fresh kernel.

    python -m transformer_course.authoring.execute solutions/*.ipynb       # `make execute`: store fresh outputs
    python -m transformer_course.authoring.execute solutions/08_x.ipynb --cells ID [ID ...] --after ID [ID ...]

``--cells`` re-executes only the cells named, in a fresh kernel that first runs the cells named by ``--after`` (the
imports and whatever else they need), and stores the outputs of the cells named alone: for a cell that reads stored
runs, or whose prose changed, without training a chapter's models again.

(The grader does not run notebooks: it runs exercise cells in its sandboxed worker, see grader.py.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..training.budget import ENV

PREAMBLE = "from transformer_course.evaluation.figure_formatter import install as _install\n_install()\ndel _install"


def _run(nb, folder: Path, timeout: int) -> None:
    """Execute ``nb`` in place in a fresh kernel whose working folder is ``folder``."""
    from nbclient import NotebookClient

    async def phone_figures(notebook) -> None:
        # Before the first cell, outside the notebook's history: every figure stored carries its copy laid out
        # for a phone (evaluation/figure_formatter.py), which the book shows on a narrow screen.
        assert client.kc is not None  # started before this hook runs
        msg_id = client.kc.execute(PREAMBLE, silent=True, store_history=False)
        reply = await client.async_wait_for_reply(msg_id)
        if reply is None or reply["content"]["status"] != "ok":
            raise RuntimeError(f"the kernel's preamble failed: {reply and reply['content']}")

    # No timing metadata: it would change the stored notebook on every run without changing its content.
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(folder)}},
        on_notebook_start=phone_figures,
    )
    client.execute()


def execute_in_place(path: Path, timeout: int = 600) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    _run(nb, path.parent, timeout)
    nbformat.write(nb, path)


def execute_cells(path: Path, cells: list[str], after: list[str], timeout: int = 600) -> None:
    """Run the cells ``after`` then ``cells`` (ids, in the notebook's order) in a fresh kernel; store the outputs of
    ``cells`` in the notebook, leave every other cell as it was."""
    import copy

    import nbformat

    nb = nbformat.read(path, as_version=4)
    ids = [cell.get("id") for cell in nb.cells]
    unknown = [i for i in (*cells, *after) if i not in ids]
    if unknown:
        raise ValueError(f"{path} has no cell with the id {', '.join(map(repr, unknown))}")
    part = copy.deepcopy(nb)
    part.cells = [copy.deepcopy(c) for c in nb.cells if c.get("id") in (*cells, *after) and c.cell_type == "code"]
    _run(part, path.parent, timeout)
    ran = {c.get("id"): c for c in part.cells}
    for cell in nb.cells:
        if cell.get("id") in cells:
            cell.outputs = ran[cell.get("id")].outputs
            # nbval refuses a cell with outputs and no count ("unrun"); the count of the partial run will do
            cell.execution_count = cell.execution_count or ran[cell.get("id")].execution_count
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute notebooks in a fresh kernel")
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--cells", nargs="+", default=[], help="re-execute only these cells (ids) of one notebook")
    parser.add_argument("--after", nargs="+", default=[], help="with --cells: run these cells (ids) first")
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds a cell may run (a cell that trains on an empty cache: more)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault(ENV, "1")  # stored outputs come from runs budgeted in steps, never in minutes
    if args.cells:
        if len(args.notebooks) != 1:
            parser.error("--cells names cells of one notebook: give exactly one")
        execute_cells(args.notebooks[0], args.cells, args.after, args.timeout)
        return 0
    for path in args.notebooks:
        print(f"executing {path}", flush=True)
        execute_in_place(path, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
