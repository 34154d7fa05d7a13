"""Not a test: a digest of everything the exercises are, to show that a refactoring changed none of it.

    .venv/bin/python tests/benchmarks/exercise_fingerprint.py > before.json   # on the old code
    .venv/bin/python tests/benchmarks/exercise_fingerprint.py > after.json    # on the new code
    diff before.json after.json                                              # empty: nothing changed

For every registered exercise: its id, title, points, name, kind, idea, forbidden names and tolerances; its public
(self-check) and hidden (grader) cases; the reference's output on each (or, for a judged exercise, the judge's
verdict on the reference's answer); and each known mistake's hint, its output on each case and the verdict on it.
Values are encoded by the grader's codec (what crosses to and from the sandbox) and hashed.
"""

from __future__ import annotations

import hashlib
import json

import torch

from transformer_course.grading import registry
from transformer_course.grading.codec import encode


def _digest(value) -> str:
    try:
        text = json.dumps(encode(value, strict=False), sort_keys=True)
    except Exception as exc:  # noqa: BLE001 - a value the codec refuses is recorded by its error
        text = f"unencodable: {type(exc).__name__}: {exc}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run(ex, obj, case) -> str:
    torch.manual_seed(0)
    try:
        return _digest(registry.run_case(ex, obj, case))
    except Exception as exc:  # noqa: BLE001
        return f"raises {type(exc).__name__}: {str(exc)[:120]}"


def fingerprint() -> dict:
    out = {}
    for chapter in sorted(registry.CHAPTER_MODULES):
        for ex in registry.chapter_exercises(chapter):
            entry = {
                "title": ex.title,
                "points": ex.points,
                "name": ex.name,
                "kind": ex.kind,
                "idea": ex.idea,
                "forbidden": list(ex.forbidden),
                "tolerance": [ex.atol, ex.rtol],
                "judged": ex.judge is not None,
                "notebook": registry.chapter_notebook(chapter),
            }
            for label, seed in (("public", registry.PUBLIC_SEED), ("hidden", registry.HIDDEN_SEED)):
                cases = ex.cases(seed)
                entry[label] = []
                for case in cases:
                    reference = _run(ex, ex.reference, case)
                    row = {"case": case.label, "inputs": _digest((case.args, case.kwargs, case.init, case.state))}
                    row["reference"] = reference
                    if ex.judge is not None:
                        torch.manual_seed(0)
                        answer = registry.run_case(ex, ex.reference, case)
                        row["judged_reference"] = registry.verdict(ex, case, answer)
                    row["mistakes"] = []
                    for m in ex.mistakes:
                        output = _run(ex, m.implementation, case)
                        try:
                            torch.manual_seed(0)
                            verdict = registry.verdict(ex, case, registry.run_case(ex, m.implementation, case))
                        except Exception as exc:  # noqa: BLE001
                            verdict = f"raises {type(exc).__name__}"
                        row["mistakes"].append({"hint": m.hint, "output": output, "verdict": verdict})
                    entry[label].append(row)
            out[ex.id] = entry
    return out


if __name__ == "__main__":
    print(json.dumps(fingerprint(), indent=1, sort_keys=True))
