"""Chapter 9: the key/value cache growing one row per step, and a beam-search tree."""

from __future__ import annotations

from typing import Any

from . import _args
from ._canvas import FADED, HIGHLIGHT, INK, NARROW, Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render
from ._shapes import plain

__all__ = ["beam_tree", "kv_cache"]

END = ("<eos>", "</s>")  # a hypothesis that writes one of these is finished, not pruned
# A search of width 2 for "the cat sleeps": per step, (parent's index in the step before, token, log-probability
# of the whole hypothesis so far). What has no child in the next step was pruned.
BEAMS = (
    ((0, "el", -0.4), (0, "la", -1.3), (0, "un", -2.5)),
    ((0, "gato", -0.9), (1, "gata", -1.6), (0, "perro", -2.8), (1, "casa", -3.1)),
    ((0, "duerme", -1.2), (1, "duerme", -2.0), (0, "come", -3.4)),
    ((0, "<eos>", -1.3), (1, "<eos>", -2.1)),
)


@drawing
@narrow_layout("kv_cache")
def kv_cache(n_steps: int = 4, tokens=None) -> Diagram:
    """The key/value cache over ``n_steps`` decoder steps (one column per step t, from 1): the query of the new
    token ("query-t") attends to the cached keys, and values, of every token so far; at step t the cache holds t
    rows ("cache-k-t-i" and "cache-v-t-i", i from 1), of which only row t is new (outlined) and the t - 1 older
    ones are reused as they are (faded). ``tokens``, if given, are the n_steps tokens read."""
    n = _args.count("n_steps", n_steps, 1, 6)
    words = _args.tokens("tokens", tokens, 6) if tokens is not None else None
    if words is not None and len(words) != n:
        raise ValueError(f"tokens has {len(words)} tokens for {n} steps: give one per step")
    phone = narrow()  # a phone: narrower steps, the token under each step's name
    rh, pitch = 0.26, min(1.4, (NARROW - 0.9 if phone else 6.0) / n)
    k_top = 0.75 + 2 * n * rh + 0.45
    c = Canvas(0.85 + n * pitch, k_top + (1.3 if phone and words else 1.05))
    v_top = k_top - n * rh - 0.45
    c.text(0.1, k_top - n * rh / 2, "key\ncache", ha="left")
    c.text(0.1, v_top - n * rh / 2, "value\ncache", ha="left")
    for t in range(1, n + 1):
        x = 0.85 + (t - 0.5) * pitch
        head = f"step {t}" + (f"{chr(10) if phone else ': '}{plain(words[t - 1])}" if words else "")
        c.text(x, c.height - (0.28 if phone and words else 0.15), head, fontsize=10)
        q = c.box(x, k_top + 0.45, min(0.6, pitch - 0.3), 0.36, f"$q_{{{t}}}$", "attention", part="query", index=t)
        c.arrow(q.bottom, (x, k_top + 0.02))
        for name, top in (("k", k_top), ("v", v_top)):
            for i in range(1, t + 1):
                new = i == t
                c.box(
                    x,
                    top - (i - 0.5) * rh,
                    pitch - 0.3,
                    rh,
                    f"${name}_{{{i}}}$",
                    "state",
                    part=f"cache_{name}",
                    index=(t, i),
                    fontsize=9,
                    edge=HIGHLIGHT if new else INK,
                    lw=1.8 if new else 0.6,
                    alpha=1.0 if new else 0.5,
                )
    for y, new, meaning in ((0.5, True, "the new row, computed at this step"), (0.22, False, "reused from the cache")):
        c.box(
            0.95,
            y,
            0.2,
            0.16,
            "",
            "state",
            edge=HIGHLIGHT if new else INK,
            lw=1.8 if new else 0.6,
            alpha=1.0 if new else 0.5,
        )
        c.text(1.13, y, meaning, ha="left")
    alt = (
        f"The key/value cache over {n} decoder steps: at step t the new token's query attends to the keys and "
        f"values of all t tokens so far; the cache grows by one row per step, only that row is computed, and the "
        f"older rows are reused, so step {n} holds {n} rows of keys and {n} of values."
    )
    return render(c, alt)


def _nodes(beams) -> list[list[dict]]:
    """The hypotheses, checked: step s (from 1) as dicts of parent, token, log_prob, index, pruned, finished."""
    if isinstance(beams, (str, bytes)) or not beams:
        raise ValueError("beams must be a non-empty list of steps, each a list of (parent_index, token, log_prob)")
    steps: list[list[dict[str, Any]]] = []
    for s, step in enumerate(beams, start=1):
        if isinstance(step, (str, bytes)) or not step:
            raise ValueError(f"step {s} of beams is empty: every step needs at least one hypothesis")
        nodes: list[dict[str, Any]] = []
        for k, entry in enumerate(step):
            if not isinstance(entry, (tuple, list)) or len(entry) not in (3, 4):
                raise ValueError(f"step {s}, hypothesis {k}: expected (parent_index, token, log_prob), got {entry!r}")
            parent, token, log_prob = entry[:3]
            if len(entry) == 4 and not isinstance(entry[3], bool):
                raise ValueError(f"step {s}, hypothesis {k}: the 4th element says whether it was kept: True or False")
            size = len(steps[-1]) if steps else 1
            if isinstance(parent, bool) or not isinstance(parent, int) or not 0 <= parent < size:
                raise ValueError(f"step {s}, hypothesis {k}: parent_index {parent!r} is not one of 0 to {size - 1}")
            if not isinstance(token, str) or not token:
                raise ValueError(f"step {s}, hypothesis {k}: the token must be a non-empty string, got {token!r}")
            nodes.append(
                dict(
                    parent=parent,
                    token=token,
                    log_prob=float(log_prob),
                    index=k,
                    kept=entry[3] if len(entry) == 4 else None,
                    finished=token in END,
                )
            )
        steps.append(nodes)
    _args.count("the number of steps", len(steps), 1, 6)
    for s, nodes in enumerate(steps):
        _args.count(f"the number of hypotheses at step {s + 1}", len(nodes), 1, 10)
        children = {n["parent"] for n in steps[s + 1]} if s + 1 < len(steps) else set()
        for n in nodes:
            # Pruned: said so, or (when not said) extended by nothing before the last step, unless finished.
            inferred = s + 1 < len(steps) and n["index"] not in children and not n["finished"]
            n["pruned"] = (not n["kept"]) if n["kept"] is not None else inferred
        if s > 0:
            for n in nodes:
                parent = steps[s - 1][n["parent"]]
                if parent["pruned"] or parent["finished"]:
                    why = "pruned" if parent["pruned"] else "finished"
                    raise ValueError(f"step {s + 1}, hypothesis {n['index']} extends a {why} hypothesis")
    return steps


def _best_path(c: Canvas, steps: list, candidates: list, downwards: bool) -> list[dict[str, Any]]:
    """Draw every parent-to-child edge, the best candidate's chain bold and red, the pruned ones faded and dashed;
    count the pruned in c.parts. Returns the chain, from its first token to its last. Edges run from a box's right
    side to the next one's left (the wide tree), or from its bottom to the next one's top (the phone's)."""
    chain: list[dict[str, Any]] = []
    if candidates:
        node = max(candidates, key=lambda n: n["log_prob"])
        while "token" in node:
            chain.insert(0, node)
            node = node["from"]
    path = {id(n) for n in chain}
    for s, nodes in enumerate(steps, start=1):
        for n in nodes:
            on_path = id(n) in path
            start, end = (
                (n["from"]["box"].bottom, n["box"].top) if downwards else (n["from"]["box"].right, n["box"].left)
            )
            c.arrow(
                start,
                end,
                head=False,
                part="edge",
                index=(s, n["index"]),
                color=HIGHLIGHT if on_path else INK,
                lw=2.0 if on_path else 1.0,
                alpha=FADED if n["pruned"] else 1.0,
                linestyle="--" if n["pruned"] else "-",
            )
    c.parts["pruned"] = sum(n["pruned"] for nodes in steps for n in nodes)
    return chain


@drawing
def beam_tree(beams=BEAMS, best: tuple[int, int] | None = None) -> Diagram:
    """A beam-search tree, left to right from <bos> ("root"): step s (from 1) of ``beams`` is a list of
    (parent_index, token, log_prob), parent_index the hypothesis it extends in step s - 1 (0 for the root),
    log_prob the whole hypothesis's; a 4th element True/False says whether it was kept, otherwise a hypothesis
    nothing extends before the last step was pruned (drawn faded), unless it wrote <eos> (finished, bold). Each
    column is laid out in its parents' order, so no two edges cross ("node-s-k", "edge-s-k", k the index given).
    The best hypothesis is red: ``best`` = (step, index) names it (a search picks by length-normalised score);
    without it, the finished one, or else the last step's kept one, of highest log-probability."""
    steps = _nodes(beams)
    pitch = min(1.25, 6.0 / len(steps))
    w, rp = min(0.95, pitch - 0.32), 0.55
    tallest = max(len(nodes) for nodes in steps)
    c = Canvas(max(4.6, 0.95 + len(steps) * pitch), tallest * rp + 1.05)
    mid = 0.5 + tallest * rp / 2
    c.text(0.1, 0.17, "faded: pruned;  bold: finished (<eos>);  red: the best hypothesis", ha="left")
    root = c.box(0.45, mid, 0.7, 0.42, "<bos>", "input", part="root")
    # Order each column by its parents' order (then by log-probability): edges between columns never cross.
    placed = [[dict(box=root)]]
    for s, nodes in enumerate(steps, start=1):
        for n in nodes:
            n["from"] = steps[s - 2][n["parent"]] if s > 1 else placed[0][0]
        rank = {id(p): r for r, p in enumerate(placed[-1])}
        order = sorted(nodes, key=lambda n: (rank[id(n["from"])], -n["log_prob"]))
        x = 0.95 + (s - 0.5) * pitch
        c.text(x, c.height - 0.2, f"step {s}", fontsize=10)
        for r, n in enumerate(order):
            y = mid + ((len(order) - 1) / 2 - r) * rp
            alpha = FADED if n["pruned"] else 1.0
            n["box"] = c.box(
                x,
                y,
                w,
                0.44,
                f"{plain(n['token'])}\n{n['log_prob']:.2f}".replace("-", "−"),
                "state",
                part="node",
                index=(s, n["index"]),
                fontsize=9,
                alpha=alpha,
                lw=2.0 if n["finished"] else 1.0,
            )
        placed.append(order)
    candidates = [n for nodes in steps for n in nodes if n["finished"]] or [n for n in steps[-1] if not n["pruned"]]
    if best is not None:
        if not (
            isinstance(best, tuple)
            and len(best) == 2
            and 1 <= best[0] <= len(steps)
            and 0 <= best[1] < len(steps[best[0] - 1])
        ):
            raise ValueError(f"best must be (step, index) of a hypothesis in beams, got {best!r}")
        candidates = [steps[best[0] - 1][best[1]]]
    chain = _best_path(c, steps, candidates, downwards=False)
    pruned = c.parts["pruned"]
    words = f"; the best hypothesis, in red, is '{' '.join(n['token'] for n in chain)}'" if chain else ""
    total = sum(len(nodes) for nodes in steps)
    alt = (
        f"A beam-search tree over {len(steps)} steps from <bos>: {total} hypotheses, each a box with its token and "
        f"log-probability; {pruned} of them, pruned, are faded{words}."
    )
    return render(c, alt)
