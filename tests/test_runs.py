"""The recorded training runs that chapters 8 and 9 draw (src/transformer_course/runs/*.json, and the reference
models' runs in src/transformer_course/reference/) are complete and consistent: each says how it was made, and
its curve is a curve of that run."""

import json
import math
from importlib.resources import files

import pytest

from transformer_course.training.train import _parser, configuration


def _load(name: str) -> dict:
    package, _, file = name.rpartition("/")
    return json.loads(files(f"transformer_course.{package or 'runs'}").joinpath(file).read_text())


# Training runs of the command-line trainer; the folder also holds benchmark results, which have no curve.
RUNS = sorted(
    p.name
    for p in files("transformer_course.runs").iterdir()
    if p.name.endswith(".json")
    and "curve" in _load(p.name)
    and _load(p.name)["command"].startswith("python -m transformer_course.train ")
)
# Chapter 10's language models, from their own trainer (python -m transformer_course.lm_train)
LM_RUNS = sorted(
    p.name
    for p in files("transformer_course.runs").iterdir()
    if p.name.endswith(".json")
    and _load(p.name).get("command", "").startswith("python -m transformer_course.lm_train ")
)
RUNS += sorted(
    f"reference/{p.name}" for p in files("transformer_course.reference").iterdir() if p.name.endswith("-ref.json")
)


def test_the_chapter_8_runs_are_there():
    # the three seeds of each five-minute model (chapter 8 draws two of them, chapter 9's table quotes all three)
    models = ("transformer-cpu", "bahdanau-cpu", "seq2seq-cpu")
    assert {f"{m}-5min-seed{s}.json" for m in models for s in range(3)} <= set(RUNS)
    for model in models:
        seeds = [_load(f"{model}-5min-seed{s}.json") for s in range(3)]
        assert len({r["steps"] for r in seeds}) == 1 and len({r["parameter_digests"][0] for r in seeds}) == 3
        assert all(r["curve_on"] == "valid" and r["test_score"] is not None for r in seeds)


def check_run(run: dict) -> None:
    """A run of the command-line trainer, as it stored itself: its command parses, names its configuration, has not
    drifted from it, and its curve is a curve of this run. The GPU run's (transformer_course.gpu) are checked so too."""
    assert run["command"].startswith("python -m transformer_course.train ")
    args = _parser().parse_args(run["command"].split()[3:])  # the command parses, and names this run's config
    assert args.config == run["config"]
    # The configuration has not drifted since: the command, run today, trains the same model (the budget aside).
    for key, value in configuration(args).items():
        if key not in ("steps", "seconds"):
            assert run["settings"].get(key) == value, key
    curve = run["curve"]
    assert len(curve) >= (2 if args.eval_every_minutes or args.eval_every_steps else 1)
    assert [p["step"] for p in curve] == sorted(p["step"] for p in curve)
    assert [p["seconds"] for p in curve] == sorted(p["seconds"] for p in curve)
    assert curve[-1]["step"] == run["steps"] and curve[-1]["score"] == run["score"]
    if args.minutes and not run.get("stopped_by_deadline"):
        assert curve[-1]["seconds"] >= 60 * args.minutes - 5  # it trained for the minutes it claims
    if args.steps and not args.minutes and not run.get("stopped_by_deadline"):
        assert run["steps"] == args.steps  # it trained the steps it claims
    assert all(0 <= p["score"] <= 100 for p in curve)
    assert run.get("finished", True)  # not a file written while it trained
    # Curves recorded since the validation split existed are on it; the test set is decoded once, at the end.
    if run.get("curve_on") == "valid":
        assert (run["test_score"] is None) == args.no_test
        assert args.no_test or 0 <= run["test_score"] <= 100
    else:
        assert "curve_on" not in run and "test_score" not in run  # an earlier run: its curve is on the test set
    if "launched_by" in run:  # trained by the GPU run, which wrote the trainer's own command beside its own
        assert run["launched_by"].startswith("python -m transformer_course.gpu run ")


@pytest.mark.parametrize("name", RUNS)
def test_run_records_its_command_and_a_consistent_curve(name):
    check_run(_load(name))


def test_the_language_model_runs_are_there():
    # the three seeds of each five-minute model and of translation as language modelling, which chapter 10 reads
    configs = ("lm-transformer-cpu", "lm-transformer-2layer-cpu", "lm-rnn-cpu", "tlm-transformer-cpu")
    seeds = {f"{c}-seed{s}.json" for c in (*configs, "tlm-transformer-cpu-1280") for s in range(3)}
    sweep = {f"lm-transformer-cpu-sweep-{n}.json" for n in ("base-lr4", "256x2-lr3", "128x4-lr4", "192x2-lr4")}
    assert {"lm-bigram.json", "lm-transformer-cpu-vocab2000.json"} | seeds | sweep <= set(LM_RUNS)


@pytest.mark.parametrize("name", LM_RUNS)
def test_language_model_run_records_its_command_and_settings(name):
    from transformer_course.training.lm_configs import recorded
    from transformer_course.training.lm_train import _parse, configuration

    run = _load(name)
    args = _parse(run["command"].split()[3:])  # the command parses, and names this run's configuration
    assert args.config == run["config"] and run["settings"] == recorded(configuration(args))  # no drift since
    assert args.out is not None
    # it wrote this very file; a tuning run (--no-test) may have been written elsewhere and stored under its name
    assert args.out.name == name or args.no_test
    for part in ("valid",) if args.no_test else ("valid", "test"):
        p = run[part]
        assert math.isclose(p["perplexity"], math.exp(p["nll_per_token"]))
        assert p["perplexity_per_word"] > p["perplexity"] > 1  # a word is one piece or more
    if run["settings"]["model"] == "bigram":
        assert min(t["valid_perplexity"] for t in run["tried"]) == run["valid"]["perplexity"]  # k chosen on validation
        return
    curve = run["curve"]
    assert [c["step"] for c in curve] == sorted(c["step"] for c in curve) and curve[-1]["step"] == run["steps"]
    assert run["steps"] == args.steps and curve[-1]["perplexity"] == run["valid"]["perplexity"]
    assert curve[-1]["perplexity"] < curve[0]["perplexity"]  # it learned
    assert ("samples" in run) == bool(args.samples) and ("test" in run) != args.no_test
    for row in run.get("samples", []):  # lm_samples' statistics, each a share or a positive number
        assert 0 <= row["distinct_2"] <= 1 and 0 <= row["unique"] <= 1 and row["nll_per_token"] > 0
        assert 1 <= row["mean_tokens"] <= 30 and len(row["examples"]) == 4


def test_chapter_4_alignment_peaks_say_how_they_were_made():
    # Chapter 4 draws these maps and reads these counts (tests/benchmarks/alignment_peaks.py made them).
    peaks = _load("alignment-peaks-seed0.json")
    assert peaks["command"].startswith("python tests/benchmarks/alignment_peaks.py ")
    assert list(peaks["models"]) == ["one-way", "bidirectional"]
    for side, config in (("one-way", "bahdanau-cpu"), ("bidirectional", "bahdanau-bi-cpu")):
        model = peaks["models"][side]
        args = _parser().parse_args(model["trained_by"].split()[3:])
        assert args.config == model["config"] == config and args.steps == model["steps"] == 1950 and args.save
        copied = model["copied"]
        assert sum(copied["peaks"].values()) == copied["pieces"] > 1000 and 0 < copied["mean_weight_on_own"] < 1
        for example in model["maps"]:
            rows = example["weights"]
            assert len(rows) == len(example["queries"]) and all(len(r) == len(example["keys"]) for r in rows)
            assert all(abs(sum(r) - 1) < 1e-2 for r in rows)  # each row a distribution (rounded to 4 places)


def test_chapter_4_copy_runs_bound_what_the_chapter_says_of_them():
    # Chapter 4 quotes the range of these four runs with its own (71 to 93% of the characters right at 23 and 24
    # digits with attention, none to half of the strings exact) and says that attention at least doubles the
    # characters right from 20 digits on in every run (tests/benchmarks/copy_spread.py made them).
    spread = _load("copy-spread.json")
    assert spread["commands"][0].startswith("python tests/benchmarks/copy_spread.py ")
    runs = spread["runs"]
    assert len(runs) == 4 and {(r["threads"], r["kernels"]) for r in runs} == {
        (t, k) for t in (1, 2) for k in ("AVX2", "AVX512")
    }
    for run in runs:
        att, plain = run["by_length"]["with attention"], run["by_length"]["without"]
        assert all(0.705 <= att[n]["characters"] < 0.935 and att[n]["exact"] <= 0.5 for n in ("23", "24"))
        assert min(att[str(n)]["exact"] for n in range(4, 13)) > 0.6
        long = [str(n) for n in range(20, 25)]
        assert sum(att[n]["characters"] for n in long) > 2 * sum(plain[n]["characters"] for n in long)


def test_the_reference_transformer_stays_float32_for_chapter_9s_choice_of_length_penalty():
    # The instructor guide (book/instructor/models.md, "Stored weights") keeps transformer-ref as trained although
    # float16 costs it 0.01 BLEU: the length penalty that chapter 9 chooses on its validation sample (0.6, its
    # notebook asserts) changes in float16. tests/benchmarks/compact_weights_bleu.py measured each form; the
    # reference's run and file agree.
    forms = _load("compact-forms-transformer-ref.json")
    assert forms["command"].startswith("python tests/benchmarks/compact_weights_bleu.py transformer-ref ")
    run = _load("reference/transformer-ref.json")
    assert forms["stored_form"] == "float32" and "stored_weights" not in run
    assert forms["trained"] == {"valid_score": run["score"], "test_score": run["test_score"]}
    full, half = forms["forms"]["float32"], forms["forms"]["float16"]
    assert (full["valid_score"], full["test_score"]) == (run["score"], run["test_score"])  # as trained, exactly
    assert full["sample_translations_changed"] == half["sample_translations_changed"] == 0
    assert abs(half["valid_score"] - run["score"]) < 0.02 and abs(half["test_score"] - run["test_score"]) < 0.02
    assert full["chapter9_alpha"] == 0.6 and half["chapter9_alpha"] != 0.6
    for form in (full, half):
        sweep = form["chapter9_alpha_sweep"]
        assert max(sweep.values()) == sweep[str(form["chapter9_alpha"])]
    assert half["bytes"] < 0.51 * full["bytes"]


def test_chapter_8_caption_encoders_were_chosen_on_validation_and_summarised_from_test():
    # tests/benchmarks/caption_encoders.py: each learning rate the best on validation, the summary the mean and
    # spread of the three test seeds at that rate, every run with the encoder's parameter count
    import statistics

    run = _load("caption-encoders.json")
    assert run["command"].startswith("python tests/benchmarks/caption_encoders.py ")
    for encoder, summary in run["summary"].items():
        tuning = [r for r in run["tuning"] if r["encoder"] == encoder]
        assert {r["lr"] for r in tuning} == set(run["grid"]) and {r["part"] for r in tuning} == {"valid"}
        assert summary["lr"] == max(tuning, key=lambda r: r["exact"])["lr"]
        tests = [r for r in run["test"] if r["encoder"] == encoder]
        assert {r["seed"] for r in tests} == {0, 1, 2} and {r["lr"] for r in tests} == {summary["lr"]}
        for key in ("exact", "on_digit"):
            values = [r[key] for r in tests]
            assert math.isclose(summary[key]["mean"], statistics.mean(values))
            assert math.isclose(summary[key]["sd"], statistics.stdev(values))


def _gpu_runs():
    from transformer_course.gpu.adopt import adopted_runs

    return [(seed, key, kept[key]) for seed, kept in adopted_runs().items() for key in ("transformer", "gru")]


@pytest.mark.parametrize(("seed", "key", "run"), _gpu_runs(), ids=lambda v: v if isinstance(v, (int, str)) else "")
def test_every_kept_gpu_run_records_its_command_and_a_consistent_curve(seed, key, run):
    check_run(run)  # the records of every GPU run adopted, by seed (runs/gpu/seedN), not only the stored model's
    assert f"--seed {seed}" in run["command"]
