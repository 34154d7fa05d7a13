"""Benchmark (not a test): why a teacher's translations are easier to learn from than people's (chapter 9).

    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/distillation_stats.py --human W.pt --teacher W.pt \
        --out src/transformer_course/runs/distillation-stats.json

The training half of Tatoeba, as people translated it and as the reference Transformer does (training.teacher):
how many different Spanish targets one English source has, how many different BPE pieces the targets use, and their
mean length. Then two five-minute students (the weights the trainer's ``--save`` wrote: one trained on the human
targets, one on the teacher's), each scored the same way: the mean entropy (nats) of its next-piece distribution
while it writes its own greedy translations of the validation set, and the share of validation sentences where
beam search (K = 4, alpha = 0.6) changes its output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

import torch


def targets_stats(pairs, teacher, tokenizer) -> dict:
    out = {}
    for side in ("human", "teacher"):
        by_source = defaultdict(set)
        for en, es in pairs:
            by_source[en].add(es if side == "human" else teacher[en])
        ids = tokenizer.encode_batch([es if side == "human" else teacher[en] for en, es in pairs])
        out[side] = {
            "pairs": len(pairs),
            "sources": len(by_source),
            "distinct_targets": sum(len(v) for v in by_source.values()),
            "sources_with_several_targets": sum(len(v) > 1 for v in by_source.values()),
            "mean_distinct_targets_per_source": sum(len(v) for v in by_source.values()) / len(by_source),
            "piece_types": len({t for row in ids for t in row}),
            "mean_length": sum(map(len, ids)) / len(ids),
        }
    human = defaultdict(set)
    for en, es in pairs:
        human[en].add(es)
    out["teacher"]["sources_where_it_writes_a_human_target"] = sum(teacher[en] in v for en, v in human.items())
    return out


@torch.no_grad()
def student_stats(model, data, alpha: float = 0.6) -> dict:
    from transformer_course.data.batching import length_batches, pad_sequences
    from transformer_course.decoding.confidence import entropies
    from transformer_course.decoding.search import max_output_length
    from transformer_course.evaluation.translate import beam_translations, greedy_translations

    sources = data.valid_ids
    greedy = greedy_translations(model, data, sources)
    beam = beam_translations(model, data, sources, 4, alpha)
    entropy, count = 0.0, 0
    tok = data.tokenizer
    for group in length_batches([len(s) for s in sources], 256, shuffle=False):
        src, mask = pad_sequences([sources[i] for i in group], tok.pad_id)
        limit = max_output_length(src.shape[1])
        out, _ = model.generate(src, mask, limit)  # (B, L) greedy, padded after <eos>
        for row in range(len(group)):
            seq = out[row].tolist()
            n = seq.index(tok.eos_id) + 1 if tok.eos_id in seq else len(seq)
            tgt = torch.tensor([seq[:n]])
            logits = model(src[row : row + 1], mask[row : row + 1], tgt)  # (1, n, V), teacher-forced
            entropy += entropies(logits.float()).sum().item()  # exercise 9.5's, summed over the n pieces
            count += n
    return {
        "valid_sentences": len(sources),
        "mean_entropy_nats": entropy / count,
        "beam_changes_share": sum(g != b for g, b in zip(greedy, beam)) / len(sources),
    }


def main() -> None:
    from transformer_course.data.tatoeba import tatoeba_split
    from transformer_course.data.translation import data_for
    from transformer_course.training.configs import CONFIGS
    from transformer_course.training.kinds import build_model, typed
    from transformer_course.training.teacher import TEACHER, read_teacher

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--human", required=True, help="weights of a student trained on the human targets")
    p.add_argument("--teacher", required=True, help="weights of a student trained on the teacher's targets")
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(2)
    config = typed(CONFIGS["transformer-cpu"])
    data = data_for(config)
    record = {
        "command": "OMP_NUM_THREADS=2 python tests/benchmarks/distillation_stats.py " + " ".join(sys.argv[1:]),
        "teacher": TEACHER,
        "targets": targets_stats(tatoeba_split().train, read_teacher(), data.tokenizer),
        "students": {},
    }
    print(json.dumps(record["targets"], indent=1), flush=True)
    for side in ("human", "teacher"):
        model = build_model(config, len(data.tokenizer))
        model.load_state_dict(torch.load(getattr(args, side), weights_only=True))
        record["students"][side] = {"weights": getattr(args, side), **student_stats(model.eval(), data)}
        print(side, record["students"][side], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
