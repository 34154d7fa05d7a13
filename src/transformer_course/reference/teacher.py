"""The reference Transformer as a teacher: it translates every English sentence of the training half once, with
chapter 9's beam search, into the model cache, where the trainer's ``--teacher-share`` reads them
(``training.teacher``, which says why and how).

    python -m transformer_course.reference.teacher [--limit N]

Under an hour of two CPU cores for the 107,408 distinct sources (53 minutes on a busy machine); a second call finds
them cached.
"""

from __future__ import annotations

import argparse
import time

from ..training.teacher import TEACHER, read_teacher, teacher_file, training_sources, write_teacher

__all__ = ["teacher_translations"]


def teacher_translations(limit: int | None = None, log=print) -> dict[str, str]:
    """{English training source: the teacher's Spanish}: cached, or decoded now (two threads: minutes)."""
    if teacher_file(limit).is_file():
        return read_teacher(limit)
    import torch

    from ..evaluation.translate import beam_translations
    from . import load_reference

    sources = training_sources()[:limit]
    model, data, _ = load_reference(TEACHER["name"])
    ids = data.tokenizer.encode_batch(sources)
    start, outputs, chunk = time.perf_counter(), [], 8192
    with torch.inference_mode():
        for i in range(0, len(ids), chunk):  # in chunks, to say how far it got
            outputs += beam_translations(
                model, data, ids[i : i + chunk], TEACHER["beam"], TEACHER["alpha"], TEACHER["rows"]
            )
            log(f"{len(outputs):,} of {len(ids):,} sources, {time.perf_counter() - start:.0f} s")
    write_teacher(outputs, limit)
    return dict(zip(sources, outputs))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m transformer_course.reference.teacher", description=__doc__.split("\n")[0]
    )
    p.add_argument("--limit", type=int, help="the first N distinct sources only (a quick look)")
    args = p.parse_args(argv)
    start = time.perf_counter()
    teacher = teacher_translations(args.limit, log=lambda line: print(line, flush=True))
    print(
        f"{len(teacher):,} sources translated by {TEACHER['name']} (beam {TEACHER['beam']}, alpha {TEACHER['alpha']})"
        f" in {time.perf_counter() - start:.0f} s; {teacher_file(args.limit)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
