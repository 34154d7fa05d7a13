"""Issue 54's tools for the five-minute Transformer: a teacher's targets (training.teacher), checkpoint averaging
(training.averaging) and the compiled step (training.compiled). Their figures come from stored runs and
tests/benchmarks/compiled_step.py; these tests check that each does what it says, on tiny budgets."""

import json

import pytest
import torch
from torch import nn

from transformer_course.training.averaging import LastEvaluations, average_states
from transformer_course.training.compiled import can_compile


class _Weight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))


def test_averaging_the_last_evaluations_is_the_mean_of_their_weights_chosen_on_validation():
    model = _Weight()
    seen = []
    keep = LastEvaluations(lambda m: seen.append(m.w[0].item()) or 0.0, k=3)
    for value in (1.0, 2.0, 3.0, 4.0):
        with torch.no_grad():
            model.w.fill_(value)
            model.count.fill_(int(value))
        keep(model)
    assert seen == [1.0, 2.0, 3.0, 4.0] and len(keep.states) == 3  # the first fell out
    assert keep.averaged(model, 3).w.tolist() == [3.0, 3.0]  # (2 + 3 + 4) / 3
    assert keep.averaged(model, 2).w.tolist() == [3.5, 3.5]
    assert keep.averaged(model, 2).count.item() == 4  # not averaged: the last one's
    assert model.w.tolist() == [4.0, 4.0]  # the model itself is untouched
    tested = []
    report = keep.report(model, lambda m: -abs(m.w[0].item() - 3.4), lambda m: tested.append(m.w[0].item()) or 1.0)
    assert report["chosen"] == 2 and tested == [3.5]  # best on validation; only that one tested
    assert set(report["valid"]) == {"2", "3"}
    with pytest.raises(ValueError, match="at least 2"):
        LastEvaluations(lambda m: 0.0, 1)
    with pytest.raises(ValueError, match="no weights"):
        average_states([])


def test_the_trainer_reports_the_average_of_its_last_evaluations(tmp_path):
    from transformer_course.training.train import train

    out = tmp_path / "run.json"
    argv = ["--config", "transformer-tiny", "--data", "copy", "--steps", "40", "--eval-every-steps", "10"]
    trained = train([*argv, "--average-last", "3", "--no-progress", "--threads", "1", "--out", str(out)])
    averaged = json.loads(out.read_text())["averaged"]
    assert averaged == trained.result["averaged"]
    assert averaged["kept"] == 3 and set(averaged["valid"]) == {"2", "3"} and averaged["chosen"] in (2, 3)
    assert "--average-last 3" in trained.result["command"]


def test_distilled_batches_are_the_human_pairs_at_share_0_and_the_teachers_at_share_1():
    from transformer_course.data.tatoeba import tatoeba_split
    from transformer_course.data.translation import load_data
    from transformer_course.training.teacher import distilled_batches

    data = load_data(600, 0)
    sources = {en for en, _ in tatoeba_split().train}
    teacher = {en: "uno dos" for en in sources}  # a teacher that says the same to every sentence
    human = distilled_batches(data, 0.0, 600, 0, teacher)
    assert len(human) == len(data.train)
    assert all(torch.equal(a.tgt, b.tgt) and torch.equal(a.src, b.src) for a, b in zip(human, data.train))
    taught = distilled_batches(data, 1.0, 600, 0, teacher)
    target = data.tokenizer.encode("uno dos") + [data.tokenizer.eos_id]
    rows = [row[mask].tolist() for batch in taught[:20] for row, mask in zip(batch.tgt, batch.tgt_mask)]
    assert rows and all(row == target for row in rows)
    half = distilled_batches(data, 0.5, 600, 0, teacher)[:300]
    share = sum(row[mask].tolist() == target for b in half for row, mask in zip(b.tgt, b.tgt_mask))
    assert 0.4 < share / sum(len(b) for b in half) < 0.6
    with pytest.raises(ValueError, match="from 0 to 1"):
        distilled_batches(data, 1.5, 600, 0, teacher)


NO_COMPILER = "torch.compile on the CPU needs a C++ compiler, and there is none here: `make compiler`"
needs_compiler = pytest.mark.skipif(not can_compile(torch.device("cpu")), reason=NO_COMPILER)


@needs_compiler
def test_the_compiled_model_trains_as_the_eager_one():
    """A few steps of the same model from the same weights on the same batches: the compiled forward and backward
    give the eager losses to float32 rounding (Inductor fuses and reorders sums)."""
    from transformer_course.data.digits import copy_task
    from transformer_course.training.compiled import compile_model
    from transformer_course.training.configs import CONFIGS
    from transformer_course.training.kinds import build_model, typed
    from transformer_course.training.loop import Settings, fit

    config = typed(CONFIGS["transformer-tiny"])
    vocab, batches, _ = copy_task(config.max_tokens, 0)
    losses = {}
    for compiled in (False, True):
        model = build_model(config, len(vocab), seed=0)
        trained = compile_model(model) if compiled else model
        settings = Settings(steps=4, peak_lr=1e-3, warmup=2, fused_adam=False)
        # one batch four times: one shape, so one compilation (a new shape would compile again, tens of seconds)
        losses[compiled] = fit(trained, batches[:1] * 4, settings, progress=False)["loss"]
    assert len(losses[True]) == 4 and losses[False][-1] < losses[False][0]  # it trained
    assert losses[True] == pytest.approx(losses[False], rel=1e-4), losses


def test_the_training_forward_compiles_to_one_graph_without_breaks():
    """The padding packing and the input checks used to ask the data questions (is any position padded? are the
    ids in the vocabulary?), each a graph break that left part of the step eager; under compilation neither asks."""
    from transformer_course.data.digits import copy_task
    from transformer_course.training.compiled import compile_model
    from transformer_course.training.configs import CONFIGS
    from transformer_course.training.kinds import build_model, typed

    config = typed(CONFIGS["transformer-tiny"])
    vocab, batches, _ = copy_task(config.max_tokens, 0)
    model = build_model(config, len(vocab), seed=0)
    compile_model(model)  # sets the options the trainer compiles with
    src, src_mask, tgt = batches[0].src.clone(), batches[0].src_mask.clone(), batches[0].tgt.clone()
    src[1, -3:], src_mask[1, -3:], tgt[0, -2:] = 0, False, 0  # padding (<pad> = 0), which the packing skips
    explained = torch._dynamo.explain(model)(src, src_mask, tgt)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_warming_up_runs_forward_and_backward_but_leaves_the_weights_and_gradients_as_they_were():
    """training.compiled.warm_up compiles before the trainer's clock: it must not train (no step, no gradient left)."""
    from transformer_course.data.digits import copy_task
    from transformer_course.training.compiled import shape_samples, warm_up
    from transformer_course.training.configs import CONFIGS
    from transformer_course.training.kinds import build_model, typed

    config = typed(CONFIGS["transformer-tiny"])
    vocab, batches, _ = copy_task(config.max_tokens, 0)
    model = build_model(config, len(vocab), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    assert warm_up(model, shape_samples(batches[:5]), torch.device("cpu"), bf16=False) > 0
    assert len(calls) == 3  # the shortest, a middle and the longest batch
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_a_missing_teacher_file_names_the_command_that_makes_it(tmp_path, monkeypatch):
    from transformer_course.training.teacher import read_teacher, write_teacher

    monkeypatch.setenv("TRANSFORMER_COURSE_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="python -m transformer_course.reference.teacher"):
        read_teacher(3)
    write_teacher(["Vete.", "Hola.", "¡Corre!"], 3)
    assert list(read_teacher(3).values()) == ["Vete.", "Hola.", "¡Corre!"]
    write_teacher(["Vete."], 3)  # a file for other sources
    with pytest.raises(ValueError, match="1 lines for 3 sources"):
        read_teacher(3)
    with pytest.raises(ValueError, match="line break"):
        write_teacher(["a\nb", "c", "d"], 3)
