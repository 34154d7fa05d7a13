"""Execute notebooks in a fresh kernel.

    python -m transformer_course.authoring.execute solutions/*.ipynb       # `make execute`: store fresh outputs

(The grader does not run notebooks: it runs exercise cells in its sandboxed worker, see grader.py.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def execute_in_place(path: Path, timeout: int = 600) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # No timing metadata: it would change the stored notebook on every run without changing its content.
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute notebooks in a fresh kernel")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    for path in args.notebooks:
        print(f"executing {path}", flush=True)
        execute_in_place(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
