import json
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from transformer_course.data import token_batches
from transformer_course.data.digits import digit_vocab, make_digit_pairs
from transformer_course.training import loop as training
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model


def test_label_smoothed_loss_matches_pytorch_over_real_tokens():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 11, (3, 5), generator=g)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 2, 1])[:, None]
    for smoothing in (0.0, 0.1, 0.3):
        ours = training.label_smoothed_loss(logits, targets, mask, smoothing)
        theirs = F.cross_entropy(logits[mask], targets[mask], label_smoothing=smoothing)
        assert abs(ours.item() - theirs.item()) < 1e-12


def test_label_smoothed_loss_ignores_padding_and_rejects_bad_input():
    logits, targets = torch.randn(2, 4, 6), torch.randint(0, 6, (2, 4))
    mask = torch.tensor([[True, True, False, False], [True, False, False, False]])
    changed = logits.clone()
    changed[~mask] = 100.0  # whatever the model says at padding does not count
    assert torch.equal(
        training.label_smoothed_loss(logits, targets, mask), training.label_smoothed_loss(changed, targets, mask)
    )
    with pytest.raises(ValueError, match="smoothing"):
        training.label_smoothed_loss(logits, targets, mask, 1.0)
    with pytest.raises(ValueError, match="shape|logits"):
        training.label_smoothed_loss(logits, targets[:, :3], mask)


def test_noam_schedule_rises_peaks_and_decays_as_in_the_paper():
    d, warmup = 512, 4000
    lrs = [training.noam_lr(s, d, warmup) for s in range(1, 20001)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == warmup
    assert math.isclose(lrs[warmup - 1], d**-0.5 * warmup**-0.5)
    assert math.isclose(lrs[99] / lrs[49], 2.0)  # linear warm-up
    assert math.isclose(lrs[4 * warmup - 1] / lrs[warmup - 1], 0.5)  # 1/sqrt(step) decay
    assert math.isclose(training.inverse_sqrt_lr(warmup, 2e-3, warmup), 2e-3)
    with pytest.raises(ValueError, match="count from 1"):
        training.noam_lr(0, d, warmup)


def test_the_trainers_schedule_is_chapter_8s_named_by_its_peak():
    # fit uses inverse_sqrt_lr; chapter 8 grades noam_lr: one curve, parameterised two ways
    for peak, warmup in ((2e-3, 150), (1.5e-3, 400), (8e-3, 70)):
        factor = peak * warmup**0.5  # noam's peak is factor / sqrt(d_model * warmup); d_model = 1 here
        for step in (1, 2, warmup // 2, warmup, warmup + 1, 3 * warmup, 20_000):
            assert math.isclose(training.inverse_sqrt_lr(step, peak, warmup), training.noam_lr(step, 1, warmup, factor))


def test_token_batches_respect_the_budget_and_keep_every_pair():
    vocab = digit_vocab()
    pairs = make_digit_pairs(500, 2, 20, seed=0)
    src = [vocab.encode(a) for a, _ in pairs]
    batches = token_batches(src, src, 200, vocab.pad_id, vocab.eos_id, seed=0)
    assert sum(len(b) for b in batches) == 500
    for b in batches:
        assert b.src.numel() <= 200 and b.tgt.numel() <= 200
    sizes = {len(b) for b in batches}
    assert max(sizes) > 2 * min(sizes)  # short sentences come in bigger batches
    with pytest.raises(ValueError, match="max_tokens"):
        token_batches(src, src, 10, vocab.pad_id, vocab.eos_id)


def _tiny_setup(name="transformer-tiny"):
    vocab = digit_vocab()
    pairs = make_digit_pairs(300, 3, 8, seed=0)
    ids = [vocab.encode(a) for a, _ in pairs]
    batches = token_batches(ids, ids, 200, vocab.pad_id, vocab.eos_id, seed=0)
    return CONFIGS[name], len(vocab), batches


@pytest.mark.parametrize("name", ["transformer-tiny", "bahdanau-tiny"])
def test_a_checkpoint_resumes_exactly(tmp_path, name):
    config, vocab_size, batches = _tiny_setup(name)
    straight = build_model(config, vocab_size)
    history = training.fit(straight, batches, training.Settings(steps=12, warmup=5), progress=False)
    assert history["step"] == 12 and history["loss"][-1] < history["loss"][0]

    resumed = build_model(config, vocab_size)
    ckpt = tmp_path / "run.pt"
    training.fit(resumed, batches, training.Settings(steps=5, warmup=5), checkpoint=ckpt, progress=False)
    again = build_model(config, vocab_size, seed=123)  # a fresh process would start from other weights
    second = training.fit(again, batches, training.Settings(steps=12, warmup=5), checkpoint=ckpt, progress=False)
    assert second["trained_steps_this_call"] == 7 and second["loss"] == history["loss"]
    for (name_a, a), (_, b) in zip(straight.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name_a


def test_a_time_budget_stops_training_and_evaluation_is_not_counted(monkeypatch):
    # A clock of our own: every reading moves it 25 ms, so a step costs 25 ms of training time however busy the
    # machine is, and an evaluation moves it 300 ms more, which must not count.
    class Clock:
        now = 0.0

        def perf_counter(self) -> float:
            self.now += 0.025
            return self.now

        def time(self) -> float:
            return 1e9 + self.now

    clock = Clock()
    monkeypatch.setattr(training, "time", clock)
    config, vocab_size, batches = _tiny_setup()
    model = build_model(config, vocab_size)
    calls = []

    def slow_eval(m):
        clock.now += 0.3
        calls.append(m.training)
        return 1.0

    history = training.fit(
        model, batches, training.Settings(seconds=0.5, eval_every_seconds=0.2), evaluate=slow_eval, progress=False
    )
    assert history["step"] in (20, 21) and 0.5 <= history["seconds"] < 0.55  # 20 steps of 25 ms, evaluations apart
    assert len(calls) >= 2 and not any(calls)
    assert [e[1] for e in history["eval"]] == sorted(e[1] for e in history["eval"])


def test_settings_need_a_budget_and_devices_are_checked():
    with pytest.raises(ValueError, match="budget"):
        training.Settings()
    assert training.pick_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA"):
            training.pick_device("cuda")
        assert training.pick_device().type in ("cpu", "mps")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: checks bf16 autocast training on it")
def test_bf16_training_on_a_gpu():
    config, vocab_size, batches = _tiny_setup()
    model = build_model(config, vocab_size).cuda()
    history = training.fit(
        model, batches, training.Settings(steps=30, warmup=5), device=torch.device("cuda"), progress=False
    )
    assert history["loss"][-1] < history["loss"][0] and history["device"].startswith("cuda")


def test_two_processes_under_torchrun_keep_identical_parameters(tmp_path):
    out = tmp_path / "run.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "transformer_course.training.train",
        "--config",
        "transformer-tiny",
        "--data",
        "copy",
        "--steps",
        "6",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["world_size"] == 2 and result["steps"] == 6
    digests = result["parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    # ... and the two processes did train: a single process with the same seed ends elsewhere
    single = tmp_path / "single.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_course.training.train",
            "--config",
            "transformer-tiny",
            "--data",
            "copy",
            "--steps",
            "6",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--no-progress",
            "--out",
            str(single),
            "--save",
            str(tmp_path / "w.pt"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(single.read_text())
    assert result["parameter_digests"][0] != digests[0]
    # --save: the final weights, a plain state dict, loadable with weights_only and recorded by their digest
    import hashlib

    from transformer_course.training.train import parameter_digest

    assert result["weights_sha256"] == hashlib.sha256((tmp_path / "w.pt").read_bytes()).hexdigest()
    model = build_model(CONFIGS["transformer-tiny"], 14)  # the digit vocabulary
    model.load_state_dict(torch.load(tmp_path / "w.pt", weights_only=True))
    assert parameter_digest(model) == result["parameter_digests"][0]


def test_set_overrides_keys_of_the_configuration_and_refuses_unknown_ones():
    from transformer_course.training.train import _parser, configuration

    args = _parser().parse_args(
        [
            "--config",
            "transformer-cpu",
            "--steps",
            "1",
            "--set",
            "dropout=0",
            "d_ff=512",
            "smoothing=0.05",
            "norm_first=false",
        ]
    )
    config = configuration(args)
    assert config["dropout"] == 0 and config["d_ff"] == 512 and config["smoothing"] == 0.05
    assert config["norm_first"] is False and config["d_model"] == CONFIGS["transformer-cpu"]["d_model"]
    assert (
        configuration(_parser().parse_args(["--config", "transformer-cpu", "--steps", "1"]))
        == CONFIGS["transformer-cpu"]
    )
    with pytest.raises(SystemExit, match="--set d_emb: not a key of the transformer configurations"):
        configuration(_parser().parse_args(["--config", "transformer-cpu", "--steps", "1", "--set", "d_emb=8"]))


def test_set_values_must_be_json(capsys):
    from transformer_course.training.train import _parser

    with pytest.raises(SystemExit):
        _parser().parse_args(["--config", "transformer-cpu", "--steps", "1", "--set", "dropout=zero"])
    assert "the value of dropout must be JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    "trainer, argv, valid_key",
    [
        ("train", ["--config", "transformer-cpu", "--steps", "1"], "d_model"),
        ("lm_train", ["--config", "lm-rnn-cpu"], "d_hidden"),
        ("mlm_train", [], "rate"),
    ],
)
def test_every_trainer_takes_the_same_overrides_and_names_a_bad_key_with_the_valid_ones(trainer, argv, valid_key):
    from transformer_course.training import lm_train, mlm_train
    from transformer_course.training.train import _parser, configuration

    def configured(extra: list[str]):
        if trainer == "train":
            return configuration(_parser().parse_args([*argv, *extra]))
        module = lm_train if trainer == "lm_train" else mlm_train
        return module.configuration(module._parse([*argv, *extra]))

    config = configured(["--set", "peak_lr=0.001", "warmup=3"])  # values in JSON, on every command line
    peak_lr, warmup = (config["peak_lr"], config["warmup"]) if trainer == "train" else (config.peak_lr, config.warmup)
    assert (peak_lr, warmup) == (0.001, 3)
    with pytest.raises(SystemExit, match=rf"--set colour: not a key of the .* configurations \(.*\b{valid_key}\b"):
        configured(["--set", "colour=1"])
    with pytest.raises(SystemExit, match="warmup of a .* configuration must be int, got 'x'"):
        configured(["--set", 'warmup="x"'])


class ToyTask:
    """The smallest task: a line through noiseless points y = 3x - 1, a batch of 8 new points per step."""

    def __init__(self, seed: int = 0):
        self.generator = torch.Generator().manual_seed(seed)
        self.modes: list[bool] = []  # the model's mode at each evaluation

        @torch.no_grad()
        def evaluate(model):
            self.modes.append(model.training)
            return {"error": (model(torch.ones(1, 1)) - 2).abs().item()}

        self.evaluate = evaluate

    def next_batch(self):
        x = torch.randn(8, 1, generator=self.generator)  # (8, 1)
        return (x, 3 * x - 1), 8

    def loss(self, model, batch):
        x, y = batch
        return F.mse_loss(model(x), y)

    def state(self):
        return {"generator": self.generator.get_state()}

    def load_state(self, state):
        self.generator.set_state(state["generator"])


def test_fit_trains_any_task_through_its_interface(tmp_path):
    assert isinstance(ToyTask(), training.Task) and not isinstance([], training.Task)
    settings = training.Settings(steps=150, peak_lr=0.05, warmup=10, eval_every_steps=50)
    torch.manual_seed(0)
    model, task = torch.nn.Linear(1, 1), ToyTask()
    history = training.fit(model, task, settings, progress=False)
    assert history["step"] == 150 and history["tokens"] == 150 * 8
    assert [e[0] for e in history["eval"]] == [50, 100, 150] and task.modes == [False] * 3  # eval mode
    assert history["loss"][-1] < 0.01 * history["loss"][0] and history["eval"][-1][2]["error"] < 0.1
    # A checkpoint keeps the task's state with the model's: 60 steps, then 90 more, are the 150.
    torch.manual_seed(0)
    first = torch.nn.Linear(1, 1)
    part = training.Settings(steps=60, peak_lr=0.05, warmup=10)
    training.fit(first, ToyTask(), part, checkpoint=tmp_path / "toy.pt", progress=False)
    resumed = torch.nn.Linear(1, 1)  # other weights: the checkpoint's replace them
    again = training.fit(resumed, ToyTask(seed=9), settings, checkpoint=tmp_path / "toy.pt", progress=False)
    assert again["trained_steps_this_call"] == 90 and again["loss"] == history["loss"]
    assert torch.equal(resumed.weight, model.weight) and torch.equal(resumed.bias, model.bias)


def test_a_list_of_batches_is_trained_as_the_translation_task():
    config, vocab_size, batches = _tiny_setup()
    settings = training.Settings(steps=8, warmup=5, seed=3)
    as_list = training.fit(build_model(config, vocab_size), batches, settings, progress=False)
    task = training.TranslationTask(batches, seed=3, smoothing=settings.smoothing, device=torch.device("cpu"))
    as_task = training.fit(build_model(config, vocab_size), task, settings, progress=False)
    assert as_list["loss"] == as_task["loss"] and as_list["tokens"] == as_task["tokens"] > 0
    with pytest.raises(ValueError, match="cannot be shared among 3 processes"):
        training.TranslationTask(batches[:2], world=3)


def test_a_deadline_stops_training_evaluations_included_and_each_evaluation_is_reported():
    import time

    config, vocab_size, batches = _tiny_setup()
    model = build_model(config, vocab_size)
    reported = []

    def slow_eval(m):
        time.sleep(0.2)
        return 1.0

    torch.optim.Adam([torch.zeros(1, requires_grad=True)], fused=True)  # its first use imports for seconds
    start = time.time()
    history = training.fit(
        model,
        batches,
        training.Settings(steps=10**6, eval_every_steps=5, deadline=start + 1.5),
        evaluate=slow_eval,
        progress=False,
        after_eval=lambda h: reported.append((h["step"], len(h["eval"]))),
    )
    # Stopped by the deadline, not by the budget of a million steps; evaluated after the last step it took.
    assert time.time() - start < 3.0 and 0 < history["step"] < 10**6
    assert history["eval"][-1][0] == history["step"]
    assert reported == [(e[0], i + 1) for i, e in enumerate(history["eval"])]


def test_the_trainer_writes_its_run_as_it_goes_and_returns_the_model(tmp_path):
    import time

    from transformer_course.training.train import parameter_digest, train

    out = tmp_path / "run.json"
    seen = []

    def after_eval(result, model):
        seen.append((result["finished"], result["steps"], json.loads(out.read_text())["steps"], model.training))

    argv = ["--config", "transformer-tiny", "--data", "copy", "--steps", "100000", "--eval-every-steps", "20"]
    trained = train(
        [*argv, "--no-progress", "--out", str(out)],
        deadline=time.time() + 3,
        launched_by="a test",
        after_eval=after_eval,
    )
    run = json.loads(out.read_text())
    # The file on disk was the run so far at every evaluation (unfinished), and is the finished run at the end.
    assert seen and all(finished is False and steps == on_disk for finished, steps, on_disk, _ in seen)
    assert "finished" not in run and run["stopped_by_deadline"] and run["launched_by"] == "a test"
    assert run["steps"] == trained.result["steps"] < 100000 and run["curve"][-1]["step"] == run["steps"]
    assert trained.data is None and not trained.model.training
    assert run["parameter_digests"] == [parameter_digest(trained.model)]  # the model returned is the one recorded


def test_the_trainer_checks_the_held_out_limit_and_the_tatoeba_file(tmp_path, capsys):
    from transformer_course.data.tatoeba import TatoebaUnavailable
    from transformer_course.training.train import train

    with pytest.raises(SystemExit):
        train(["--config", "transformer-tiny", "--steps", "1", "--limit-held-out", "0"])
    assert "--limit-held-out must be a positive number" in capsys.readouterr().err
    with pytest.raises(TatoebaUnavailable, match="no such file"):
        train(["--config", "transformer-tiny", "--steps", "1", "--tatoeba", str(tmp_path / "spa.tsv.xz")])
