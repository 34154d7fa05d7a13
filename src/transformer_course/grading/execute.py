"""Execute notebooks in a fresh kernel.

    python -m transformer_course.grading.execute solutions/*.ipynb       # `make execute`: store fresh outputs
    python -m transformer_course.grading.execute --grading IN OUT.jsonl  # used by the grader, in a subprocess

In grading mode every cell runs with a time limit (a cell that runs past it is interrupted and the
next cell runs), errors do not stop the run, and the outputs of each exercise and probe cell are
appended to OUT.jsonl as soon as that cell finishes, so that a run killed by the grader's total time
limit still leaves the results of the exercises before it. Grading mode talks to the kernel with
jupyter_client directly: nbformat and nbclient would add seconds of imports to every submission.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import tempfile
import time
from pathlib import Path

PROBE_TAG = "grader-probe"
INTERRUPT_GRACE = 5  # seconds a kernel gets to answer after an interrupt before it counts as hung


def execute_in_place(path: Path, timeout: int = 600) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # No timing metadata: it would change the stored notebook on every run without changing its content.
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nbformat.write(nb, path)


def _output(msg: dict) -> dict | None:
    kind, content = msg["msg_type"], msg["content"]
    if kind == "stream":
        return {"output_type": "stream", "name": content["name"], "text": content["text"]}
    if kind in ("display_data", "execute_result"):
        return {"output_type": kind, "data": content.get("data", {})}
    if kind == "error":
        return {"output_type": "error", "ename": content.get("ename"), "evalue": content.get("evalue")}
    return None


def run_for_grading(notebook: Path, results: Path, cell_timeout: int) -> int:
    from jupyter_client.manager import start_new_kernel

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    workdir = tempfile.mkdtemp(prefix="course-grade-")
    km, kc = start_new_kernel(kernel_name="python3", cwd=workdir)
    try:
        with open(results, "a", encoding="utf-8") as out:
            for index, cell in enumerate(cells):
                if cell["cell_type"] != "code":
                    continue
                meta = cell.get("metadata", {})
                keep = PROBE_TAG in meta.get("tags", []) or "exercise" in meta
                outputs: list[dict] = []

                def hook(msg: dict, outputs: list = outputs) -> None:
                    output = _output(msg) if keep or msg["msg_type"] == "error" else None
                    if output is not None and len(outputs) < 100:
                        outputs.append(output)

                source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                status = _run_cell(km, kc, source, hook, cell_timeout)
                if keep or status != "ok":  # a given cell that fails is worth reporting too
                    out.write(json.dumps({"event": "cell", "cell": index, "outputs": outputs, "status": status}) + "\n")
                    out.flush()
                if status in ("died", "hung"):
                    out.write(json.dumps({"event": f"kernel-{status}", "cell": index}) + "\n")
                    return 0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return 0


def _run_cell(km, kc, source: str, hook, timeout: int) -> str:
    """Run one cell; 'ok', 'error', 'timeout' (interrupted), 'died' or 'hung' (did not stop when interrupted)."""
    msg_id = kc.execute(source, allow_stdin=False, stop_on_error=False)
    if _wait_idle(km, kc, msg_id, hook, time.monotonic() + timeout):
        return _reply_status(kc, msg_id)
    if not km.is_alive():
        return "died"
    km.interrupt_kernel()
    if not _wait_idle(km, kc, msg_id, hook, time.monotonic() + INTERRUPT_GRACE):
        return "hung" if km.is_alive() else "died"
    _reply_status(kc, msg_id)
    return "timeout"


def _wait_idle(km, kc, msg_id: str, hook, deadline: float) -> bool:
    """Pass the cell's output messages to hook until the kernel is idle again; False at the deadline or death."""
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=min(0.5, max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            if not km.is_alive():  # checked on every quiet half second, so a dead kernel costs no time-out
                return False
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
            return True
        hook(msg)
    return False


def _reply_status(kc, msg_id: str) -> str:
    try:
        while True:
            msg = kc.get_shell_msg(timeout=INTERRUPT_GRACE)
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"].get("status", "error")
    except queue.Empty:
        return "error"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute notebooks in a fresh kernel")
    parser.add_argument("--grading", nargs=2, metavar=("NOTEBOOK", "RESULTS"), help="grader mode")
    parser.add_argument("--cell-timeout", type=int, default=60)
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if args.grading:
        return run_for_grading(Path(args.grading[0]), Path(args.grading[1]), args.cell_timeout)
    os.environ.setdefault("TQDM_DISABLE", "1")
    for path in args.notebooks:
        print(f"executing {path}", flush=True)
        execute_in_place(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
