"""Checkpoint averaging: the weights of a run's last k evaluations, averaged, scored as one model.

"Attention is all you need" averaged its last 5 (base) or 20 (big) checkpoints, written ten minutes apart. Late in
training, successive checkpoints sit on different sides of a valley that the optimiser keeps crossing; their mean
lies nearer its floor. ``LastEvaluations`` wraps a run's evaluation, keeps a copy of the weights at each of the
last ``k`` evaluations, and at the end scores the average of the last 2, 3, ... k of them on validation. The count
that scores best on validation is the one reported, and only it is decoded on the test set.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["LastEvaluations", "average_states"]


def average_states(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of floating-point tensors; any other tensor (a count, a mask) from the last state."""
    if not states:
        raise ValueError("no weights to average")
    last = states[-1]
    return {
        name: torch.stack([s[name] for s in states]).mean(0) if last[name].is_floating_point() else last[name]
        for name in last
    }


class LastEvaluations:
    """An evaluation (``model -> score``) that also keeps the weights it saw at its last ``k`` calls."""

    def __init__(self, evaluate: Callable[[nn.Module], float], k: int) -> None:
        if k < 2:
            raise ValueError(f"averaging needs at least 2 evaluations' weights, got k={k}")
        self.evaluate, self.k = evaluate, k
        self.states: deque[dict[str, torch.Tensor]] = deque(maxlen=k)

    def __call__(self, model: nn.Module) -> float:
        # float32 on the CPU: a bf16 model on a GPU is averaged in full precision
        state = {
            name: t.detach().to("cpu", torch.float32 if t.is_floating_point() else t.dtype).clone()
            for name, t in model.state_dict().items()
        }
        self.states.append(state)
        return self.evaluate(model)

    def averaged(self, model: nn.Module, last: int) -> nn.Module:
        """A copy of ``model`` holding the mean of the weights of the ``last`` evaluations."""
        twin = copy.deepcopy(model)
        mean = average_states(list(self.states)[-last:])
        reference = model.state_dict()
        twin.load_state_dict({name: mean[name].to(reference[name].dtype) for name in reference})
        return twin.eval()

    def report(
        self, model: nn.Module, valid: Callable[[nn.Module], float], test: Callable[[nn.Module], float] | None
    ) -> dict:
        """Validation BLEU of the average of the last 2 .. k evaluations; the best count's test BLEU."""
        counts = range(2, len(self.states) + 1)
        if not counts:
            return {"k": self.k, "kept": len(self.states), "valid": {}}
        scores = {n: valid(self.averaged(model, n)) for n in counts}
        best = max(scores, key=lambda n: (scores[n], -n))  # a tie: the fewer checkpoints
        out = {"k": self.k, "kept": len(self.states), "valid": {str(n): s for n, s in scores.items()}, "chosen": best}
        if test is not None:
            out["test_score"] = test(self.averaged(model, best))
        return out
