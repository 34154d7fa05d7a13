"""Chapter 9's beam tree laid out for a phone's column (see _render.LAYOUTS): it grows downwards, one row per step,
where the wide one grows to the right (six steps of boxes with a token and a log-probability do not fit 3.75 in
across; five hypotheses a step do). The ids are those of decoding.beam_tree, which checked the arguments."""

from __future__ import annotations

from ._canvas import FADED, NARROW, Canvas
from ._render import narrow_layout
from ._shapes import plain
from .decoding import BEAMS, _best_path, _nodes

__all__: list[str] = []


@narrow_layout("beam_tree")
def beam_tree(beams=BEAMS, best: tuple[int, int] | None = None) -> Canvas:
    """As decoding.beam_tree turned a quarter: <bos> on top, step s in row s, each row in its parents' order (so
    no two edges cross), each step named in the left margin, the key to the styles on two lines under the tree."""
    steps = _nodes(beams)
    tallest = max(len(nodes) for nodes in steps)
    margin, row = 0.52, 0.78  # the steps' names; the height of a step
    pitch = min(0.85, (NARROW - margin - 0.05) / tallest)
    w = pitch - 0.05
    key = 0.55  # the key under the tree
    c = Canvas(NARROW, key + (len(steps) + 1) * row)
    mid = margin + (NARROW - margin - 0.05) / 2
    c.text(0.05, 0.35, "faded: pruned;  bold: finished (<eos>);\nred: the best hypothesis", ha="left")
    root = c.box(mid, c.height - 0.35, 0.7, 0.42, "<bos>", "input", part="root")
    placed = [[dict(box=root)]]
    for s, nodes in enumerate(steps, start=1):
        for n in nodes:
            n["from"] = steps[s - 2][n["parent"]] if s > 1 else placed[0][0]
        rank = {id(p): r for r, p in enumerate(placed[-1])}
        order = sorted(nodes, key=lambda n: (rank[id(n["from"])], -n["log_prob"]))
        y = c.height - 0.35 - s * row
        c.text(0.05, y, f"step {s}", ha="left", fontsize=10)
        for r, n in enumerate(order):
            x = mid + (r - (len(order) - 1) / 2) * pitch
            n["box"] = c.box(
                x,
                y,
                w,
                0.5,
                f"{plain(n['token'])}\n{n['log_prob']:.2f}".replace("-", "−"),
                "state",
                part="node",
                index=(s, n["index"]),
                alpha=FADED if n["pruned"] else 1.0,
                lw=2.0 if n["finished"] else 1.0,
            )
        placed.append(order)
    candidates = [n for nodes in steps for n in nodes if n["finished"]] or [n for n in steps[-1] if not n["pruned"]]
    if best is not None:
        candidates = [steps[best[0] - 1][best[1]]]
    _best_path(c, steps, candidates, downwards=True)
    return c
