"""Benchmark (not a test): chapter 10's BPE from scratch against Hugging Face ``tokenizers``, on the real data.

    .venv/bin/python tests/benchmarks/bpe_agreement.py [--sizes 260 1000 2000 8000]

Both learn from the course's Tatoeba training split, English and Spanish together, as ``translation.py`` does.
For each vocabulary size it prints the seconds each took to learn, wall clock and CPU (the library uses every
core, the scratch version one; CPU time is the fairer measure on a shared machine), whether the merge lists and
vocabularies are identical, the agreement on the validation sentences (the fraction segmented identically) with
every sentence that differs, and the tokens per word and per character of the English and of the Spanish
validation sentences: how the vocabulary size changes sequence length, the factor that turns a per-token
perplexity into a per-word one. Size 260 is the bytes alone (no merge).
"""

from __future__ import annotations

import argparse
import os

from transformer_course.data.bpe import compare_with_library, tokens_per_word
from transformer_course.data.tatoeba import tatoeba_split


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[260, 1000, 2000, 8000])
    args = p.parse_args()
    split = tatoeba_split()
    train = [en for en, _ in split.train] + [es for _, es in split.train]
    english = sorted({en for en, _ in split.valid})  # distinct: an English sentence has several translations
    spanish = [es for _, es in split.valid]
    print(
        f"{len(train):,} training sentences ({len(split.train):,} pairs), {len(english):,} + {len(spanish):,} "
        f"validation sentences (English + Spanish), {os.cpu_count()} cores"
    )
    print("\n      learning: wall s      CPU s")
    print(
        "size  scratch library scratch library  merges  vocab  agreement differ | tokens/word en, es | per char en, es"
    )
    failures = []
    for size in args.sizes:
        result = compare_with_library(train, english + spanish, size)
        en, es = tokens_per_word(result.scratch, english), tokens_per_word(result.scratch, spanish)
        same = lambda flag: "same" if flag else "DIFFER"
        print(
            f"{size:>4}  {result.seconds_scratch:>7.1f} {result.seconds_library:>7.1f} {result.cpu_scratch:>7.1f} "
            f"{result.cpu_library:>7.1f}  {same(result.same_merges):>6}  {same(result.same_vocab):>5}  "
            f"{result.agreement:>9.2%} {len(result.differing):>6} |        {en.per_word:.3f}, {es.per_word:.3f} |"
            f"    {en.per_char:.3f}, {es.per_char:.3f}"
        )
        failures += [(size, d) for d in result.differing]
    print(f"\n{len(failures)} differing segmentation(s)")
    for size, (text, ours, theirs) in failures:
        print(f"  [{size}] {text!r}\n      scratch: {ours}\n      library: {theirs}")


if __name__ == "__main__":
    main()
