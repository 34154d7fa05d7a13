"""python -m transformer_course.gpu {pack,run,adopt}: see the package's docstring."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when torch loads: threads that wait sleep, not spin


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m transformer_course.gpu",
        description="The course's GPU run: pack its data here, run it on a GPU machine, adopt its results here.",
    )
    sub = p.add_subparsers(dest="what", required=True)
    pack = sub.add_parser("pack", help="write the folder the GPU machine needs (Tatoeba as xz, the BPE, a manifest)")
    pack.add_argument("--out", type=Path, default=Path(".gpu"), help="the folder to write (default .gpu)")
    pack.add_argument(
        "--preset",
        type=int,
        default=6,
        choices=range(10),
        help="xz's preset: 0 fast (4.6 MB) to 9 small (default 6: 3.4 MB)",
    )
    pack.add_argument(
        "--teacher",
        type=Path,
        help="the teacher's translations to pack (default: the model cache's, when python -m "
        "transformer_course.reference.teacher has made them)",
    )
    run = sub.add_parser("run", help="measure and train on the GPU, writing every result into --out as it goes")
    run.add_argument("--pack", type=Path, default=Path(".gpu"), help="the folder `pack` wrote (default .gpu)")
    run.add_argument("--out", type=Path, required=True, help="where the results go (at most 8 files)")
    run.add_argument(
        "--minutes", type=float, default=9.0, help="the deadline for everything, from the start (default 9)"
    )
    run.add_argument("--device", help="cuda (the default when there is one), or cpu for a dry run")
    run.add_argument("--dry-run", action="store_true", help="the same phases in seconds, on the CPU by default")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--version",
        type=int,
        default=1,
        choices=(1, 2),
        help="1: throughput, step times, the Transformer and the GRU; 2: the Transformer on people's and on a "
        "teacher's targets, compiled, with its MFU (transformer_course.gpu.second)",
    )
    speed = sub.add_parser("speed", help="version two, part one: the compiled step and its MFU (no pack needed)")
    speed.add_argument("--out", type=Path, required=True, help="where gpu-speed.json goes")
    speed.add_argument("--minutes", type=float, default=4.0, help="the deadline for everything (default 4)")
    speed.add_argument("--device", help="cuda (the default when there is one), or cpu for a dry run")
    speed.add_argument("--dry-run", action="store_true", help="the same phases in seconds, on the CPU by default")
    adopt = sub.add_parser("adopt", help="put a run's results into the course (runs/ and reference/)")
    adopt.add_argument("results", type=Path, help="the folder of files the run wrote")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.what == "pack":
        from .pack import pack

        manifest = pack(args.out, args.preset, args.teacher)
        size = sum(p.stat().st_size for p in args.out.iterdir())
        print(f"wrote {args.out}/ ({size / 2**20:.1f} MiB): {', '.join(sorted(p.name for p in args.out.iterdir()))}")
        print(f"tokenizer {manifest['tokenizer']['file']}, commit {manifest['course_commit']}")
        return 0
    if args.what == "speed":
        from ..training.loop import pick_device
        from .speed import speed

        chosen = pick_device(args.device or ("cpu" if args.dry_run else None))
        if chosen.type != "cuda" and not args.dry_run:
            print("the speed run measures a CUDA GPU, and there is none here: --dry-run to try it", file=sys.stderr)
            return 2
        return speed(
            args.out, args.minutes, chosen, args.dry_run, "python -m transformer_course.gpu " + shlex.join(argv)
        )
    if args.what == "run":
        if args.minutes <= 0:
            print(f"--minutes must be positive, got {args.minutes}", file=sys.stderr)
            return 2
        from . import phases, second
        from .run import Run

        device = args.device or ("cpu" if args.dry_run else None)
        if not args.dry_run:
            import torch

            if not torch.cuda.is_available() or (device is not None and not device.startswith("cuda")):
                print(
                    "the GPU run needs a CUDA GPU, and PyTorch sees none here"
                    if not torch.cuda.is_available()
                    else f"the GPU run trains on a CUDA GPU, not on {device}: use --dry-run to try it elsewhere",
                    file=sys.stderr,
                )
                return 2
        command = "python -m transformer_course.gpu " + shlex.join(argv)
        if args.version == 2:
            run = Run(args.pack, args.out, args.minutes, device, args.dry_run, args.seed, command, second.FILES,
                      second.BUDGETS)  # fmt: skip
            return run.execute(second.PHASES, second.summary)
        run = Run(args.pack, args.out, args.minutes, device, args.dry_run, args.seed, command)
        return run.execute(phases.PHASES, phases.summary)
    from .adopt import adopt

    for line in adopt(args.results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
