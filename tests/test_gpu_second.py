"""The GPU run's second version (transformer_course.gpu.second), dry-run on the CPU: a pack that carries a teacher's
translations, then `gpu run --version 2 --dry-run` in a fresh interpreter, as the GPU machine would run it. Its
teacher is a stand-in (each source's first human translation): the real one takes an hour to make, and the dry run
checks the code, not the figures.
"""

import fcntl
import json
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from test_gpu import RECORDER, ROOT, environment_kept, foreign_imports
from test_runs import check_run
from transformer_course.gpu import MAX_FILE_BYTES
from transformer_course.gpu.pack import PackError, open_pack, pack
from transformer_course.gpu.second import FILES, RUNS
from transformer_course.training.compiled import can_compile

HAS_COMPILER = can_compile(torch.device("cpu"))
# Inductor's C++ path, which only a CPU takes (a GPU gets Triton kernels): the modules it generates (named by a hash)
# and the build tools it imports (setuptools, with what setuptools vendors).
CPU_COMPILER = {"setuptools", "_distutils_hack", "distutils", "backports", "jaraco", "more_itertools"}
GENERATED = re.compile(r"c[a-z0-9]{51}")


def _gpu_side(modules: list[str]) -> list[str]:
    """The modules the run imported, but those that only compiling for a CPU imports."""
    return [m for m in modules if m.split(".")[0] not in CPU_COMPILER and not GENERATED.fullmatch(m.split(".")[0])]


def _stand_in_teacher(path: Path) -> Path:
    from transformer_course.data.tatoeba import tatoeba_split
    from transformer_course.training.teacher import training_sources

    first: dict[str, str] = {}
    for en, es in tatoeba_split().train:
        first.setdefault(en, es)
    path.write_bytes(lzma.compress("\n".join(first[en] for en in training_sources()).encode(), preset=0))
    return path


@pytest.fixture(scope="session")
def second(tmp_path_factory, worker_id):
    """(pack, out, record): the pack with a stand-in teacher, and version two's dry run; made once per session in a
    folder every xdist worker shares (a file lock keeps the second worker waiting for the first's), since compiling
    takes a minute and more on two cores."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "gpu-second"
    root.mkdir(exist_ok=True)
    packed, out = root / "pack", root / "out"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done.json").is_file():
            teacher = _stand_in_teacher(root / "stand-in.txt.xz")
            packing = ["pack", "--out", packed, "--preset", "0", "--teacher", teacher]
            subprocess.run([sys.executable, "-m", "transformer_course.gpu", *packing], check=True)
            command = [sys.executable, "-c", RECORDER, "run", "--version", "2", "--pack", str(packed), "--dry-run",
                       "--out", str(out)]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
            (root / "done.json").write_text(
                json.dumps({"returncode": done.returncode, "output": done.stdout[-3000:] + done.stderr[-3000:]})
            )
    done = json.loads((root / "done.json").read_text())
    assert done["returncode"] == 0, done["output"]
    return packed, out, json.loads(Path(f"{out}.imports.json").read_text())


def test_the_second_version_writes_its_files_with_every_phase_done(second):
    packed, out, record = second
    assert record["rc"] == 0
    machine = json.loads((out / FILES["machine"]).read_text())
    assert machine["version"] == 2 and machine["dry_run"]
    assert all(p["status"].startswith("done") for p in machine["phases"]), machine["phases"]
    assert len(machine["phases"]) == 7
    teacher = machine["pack"]["manifest"]["teacher"]
    assert teacher["lines"] == 107_408 and (packed / teacher["file"]).is_file()
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(FILES.values()) and all((out / n).stat().st_size < MAX_FILE_BYTES for n in written)
    assert "summary, version 2" in (out / FILES["log"]).read_text()
    assert not foreign_imports(_gpu_side(record["modules"]))


def test_it_trains_on_peoples_targets_and_on_the_teachers_compiled(second):
    _, out, _ = second
    speed = json.loads((out / FILES["speed"]).read_text())
    assert speed["flops_per_target_token"] > 1e6 and "peak" not in speed  # the peak is measured on a GPU only
    for key, extra in RUNS.items():
        run = json.loads((out / FILES[key]).read_text())
        check_run(run)
        assert run["config"] == "transformer-gpu" and run["steps"] == 2 and run["limit_held_out"] == 48
        assert ("--teacher-share 1.0" in run["command"]) == bool(extra)
        assert ("compile_seconds" in run) == HAS_COMPILER  # compiled before the clock, where Inductor can run
        assert run["beam"]["size"] == 4 and 0 <= run["test_score_beam"] <= 100
        assert run["target_tokens_per_second"] > 0 and "mfu" not in run  # MFU needs the GPU's peak


def test_its_records_are_adopted_by_seed_and_a_seed_only_once(second, tmp_path):
    from transformer_course.gpu.adopt import adopt, second_runs

    _, out, _ = second
    runs = tmp_path / "runs"
    with pytest.raises(ValueError, match="holds a dry run"):
        adopt(out, runs, tmp_path / "reference")
    lines = adopt(out, runs, tmp_path / "reference", dry_run_ok=True)
    assert lines == [f"kept the records of version two, seed 0, in {runs / 'gpu/v2/seed0'}"]
    assert sorted(p.name for p in (runs / "gpu/v2/seed0").iterdir()) == sorted(FILES.values())
    assert not (tmp_path / "reference").exists()  # version two brings no model back
    kept = second_runs(runs)
    assert list(kept) == [0] and set(kept[0]) == {"machine", "speed", "plain", "distilled"}
    other = tmp_path / "other"
    shutil.copytree(out, other)
    machine = json.loads((other / FILES["machine"]).read_text())
    machine["started"] = "2099-01-01T00:00:00Z"  # another run of the same seed
    (other / FILES["machine"]).write_text(json.dumps(machine))
    with pytest.raises(ValueError, match="seed 0 of version two is already adopted"):
        adopt(other, runs, tmp_path / "reference", dry_run_ok=True)


def test_a_pack_without_its_teacher_or_with_another_is_refused(second, tmp_path):
    packed, _, _ = second
    with pytest.raises(PackError, match="--teacher .*: no such file"):
        pack(tmp_path / "p", 0, tmp_path / "missing.txt.xz")
    copy = tmp_path / "pack"
    shutil.copytree(packed, copy)
    teacher = next(copy.glob("teacher-*.txt.xz"))
    teacher.write_bytes(lzma.compress(b"another teacher"))
    with environment_kept(), pytest.raises(PackError, match="not the file packed"):
        open_pack(copy, tmp_path / "cache")
