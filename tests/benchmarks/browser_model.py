"""Benchmark (not a test): the reference Transformer in the built book's page (issue 52), against PyTorch, and its cost.

    .venv/bin/jupyter-book build . --path-output /tmp/book          # or any built book
    OMP_NUM_THREADS=1 .venv/bin/python tests/benchmarks/browser_model.py /tmp/book/_build/html [--sentences 200]

In headless Chromium (the test suite's, network cut off), the page book/try.html opened from file://:
- agreement: for test sentences (every n-th of the test set, 200 by default), 50 unusual inputs (empty, one
  character, 200 characters, numbers, emoji, Spanish, made-up words, other scripts, ...) and 4 near ties (test
  sentences whose output float16 rounding changes), the page's
  ``courseModel.translate`` (pieces, greedy output, beam-4 output) against PyTorch on the same float16 weights (the
  page's) and on the stored float32 weights; and PyTorch float16 against PyTorch stored, which counts what the
  rounding alone changes. Refusals (nothing typed, too long) count as agreeing when both sides refuse alike;
- the greedy attention maps' largest difference from PyTorch's (float16 weights), over the first 20 sentences;
- the figures: the page weight the model adds (book/_static/model), the first translation after the try page's load
  event (a 10-word sentence, greedy and beam 4; the page loads the weights with itself), the same on chapter 9's
  page (which loads them on the first translation), and the time of one 10-word sentence at beam 4 once loaded
  (the median of 10 sentences).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for test_browser's Chromium settings
from test_browser import ARGS, CHROMIUM
from transformer_course.evaluation.attention_maps import attention_maps
from transformer_course.reference import browser as contract

TEN_WORDS = [
    "I think we should go home before it starts raining.",
    "My brother bought a new car for his wife yesterday.",
    "Tom said that he would be late for the meeting.",
    "Can you tell me where the nearest train station is?",
    "She has been studying French for three years now.",
    "We went to the beach with our friends last weekend.",
    "The children are playing in the garden with the dog.",
    "I don't know why he didn't come to the party.",
    "It was so cold that the lake froze last night.",
    "Please turn off the lights when you leave the room.",
]
LONG = (
    "Tom said that he would come back to the old house by the river tomorrow morning, because his sister wanted "
    "to see the garden again before the winter, and we all agreed that it was a very good idea."
)[:200]
UNUSUAL = [
    "",
    " ",
    "\n\t",
    "a",
    "I",
    "?",
    "7",
    "Tom",
    "Hello",
    "Thanks!",
    LONG,
    LONG[:150],
    "x" * 301,
    "\U0001f600" * 40,
    "I have 3 cats and 12 dogs.",
    "It costs $4.99, not 5 euros.",
    "Call me at 555-0199 after 6:30 pm.",
    "In 1492 Columbus sailed 3,000 miles.",
    "2 + 2 = 4",
    "I love pizza \U0001f355!",
    "\U0001f600\U0001f44d",
    "Good morning \u2600\ufe0f and good night \U0001f319.",
    "¿Dónde está la estación de tren?",
    "Me gusta mucho la música.",
    "Bonjour, je m'appelle Marie.",
    "Ich habe keine Zeit.",
    "The zorblax flumphed the quiggly snargle.",
    "Flibbertigibbet is a wonderful word.",
    "Supercalifragilisticexpialidocious!",
    "Kraków, Zoë and Ærøskøbing are names.",
    "Привет, как дела?",
    "我爱你。",
    "Γεια σου κόσμε.",
    "Tom <eos> went home.",
    "<unk> <pad> <bos>",
    "TOM IS VERY ANGRY!",
    "tom is very angry",
    "the the the the the the",
    "Tom,Mary,John,Alice",
    "  Tom   is\there. ",
    "Visit https://example.com/page?id=3 now.",
    "e-mail: tom@example.com",
    "He said \u201chello\u201d \u2014 twice.",
    "It's 25\u00b0C outside.",
    "Tom\u00a0is\u200bhere.",
    "\ufeffHello there.",
    "Don't! Won't! Can't!",
    "I'm I'll I'd I've you're",
    "Let's eat, Grandma.",
    "A.B.C.D.E.F.G.",
]


# Test sentences where float16 weights change PyTorch's output (found by --whole-test-set): the page must follow them
NEAR_TIES = [
    "She attributed her success to good luck.",
    "We lost sight of them over half an hour ago.",
    "He lay in agony until the doctor arrived.",
    "Mary mixed the ingredients to make a cake.",
]


def python_side(model, tokenizer, texts, beam):
    out = []
    for text in texts:
        try:
            out.append(contract.translate(model, tokenizer, text, beam))
        except contract.InputRefused as refused:
            out.append({"refused": str(refused)})
    return out


def page_side(page, texts, beam, details=False):
    return page.evaluate(
        """async ([texts, beam, details]) => {
             const out = [];
             for (const text of texts) {
               try { out.push(await window.courseModel.translate(text, {beam, details})); }
               catch (error) { out.push({refused: error.message}); }
             }
             return out;
           }""",
        [texts, beam, details],
    )


def agree(a, b, key):
    return sum((x.get("refused") == y.get("refused")) and x.get(key) == y.get(key) for x, y in zip(a, b))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("html", type=Path, help="the built book's folder of HTML pages (_build/html)")
    p.add_argument("--sentences", type=int, default=200, help="test sentences (default 200)")
    p.add_argument(
        "--whole-test-set",
        action="store_true",
        help="then count, over the whole test set (PyTorch alone, batched), the translations that rounding the "
        "weights to float16 changes, greedy and beam 4",
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    from playwright.sync_api import sync_playwright

    from transformer_course.data.tatoeba import multi_reference, tatoeba_split

    test = [en for en, _ in multi_reference(tatoeba_split().test)]
    step = max(1, len(test) // args.sentences)
    texts = test[::step][: args.sentences] + UNUSUAL + NEAR_TIES  # the near ties: counted with the unusual ones
    stored, tokenizer = contract.load_translator("transformer-ref")
    rounded = contract.rounded_model(stored)
    model_dir = args.html / "_static" / "model"
    weight = sum(f.stat().st_size for f in model_dir.iterdir())
    print(f"page weight added: {weight / 1e6:.2f} MB ({', '.join(sorted(f.name for f in model_dir.iterdir()))})")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page()
        page.route("**/*", lambda r: r.abort() if not r.request.url.startswith("file:") else r.continue_())
        started = time.perf_counter()
        page.goto((args.html / "book" / "try.html").as_uri(), wait_until="load")
        loaded = time.perf_counter()
        first = page.evaluate(
            """async (text) => { const t0 = performance.now(); await window.courseModel.translate(text, {beam: 1});
                 const t1 = performance.now(); await window.courseModel.translate(text, {beam: 4});
                 return [t1 - t0, performance.now() - t1, courseModel.where, t1]; }""",
            TEN_WORDS[0],
        )
        print(
            f"page load (file://, load event): {loaded - started:.2f} s; first translation after it, greedy: "
            f"{first[0] / 1000:.2f} s (weights decoded in the {first[2]}), then beam 4: {first[1] / 1000:.2f} s; "
            f"from the start of navigation to the first translation: {first[3] / 1000:.2f} s"
        )
        times = page.evaluate(
            """async (texts) => { const out = [];
                 for (const text of texts) { const t0 = performance.now();
                   await window.courseModel.translate(text, {beam: 4}); out.push(performance.now() - t0); }
                 return out; }""",
            TEN_WORDS,
        )
        greedy_times = page.evaluate(
            """async (texts) => { const out = [];
                 for (const text of texts) { const t0 = performance.now();
                   await window.courseModel.translate(text, {beam: 1}); out.push(performance.now() - t0); }
                 return out; }""",
            TEN_WORDS,
        )
        print(
            f"10-word sentence, once loaded: beam 4 median {statistics.median(times):.0f} ms "
            f"(min {min(times):.0f}, max {max(times):.0f}); greedy median {statistics.median(greedy_times):.0f} ms"
        )
        lazy = browser.new_page()  # chapter 9: the weights load on the first translation, not with the page
        lazy.route("**/*", lambda r: r.abort() if not r.request.url.startswith("file:") else r.continue_())
        lazy.goto((args.html / "solutions" / "09_evaluation.html").as_uri(), wait_until="load")
        cold = lazy.evaluate(
            """async (text) => { const t0 = performance.now(); await window.courseModel.translate(text, {beam: 4});
                 return performance.now() - t0; }""",
            TEN_WORDS[1],
        )
        lazy.close()
        print(
            f"chapter 9's page, weights not loaded yet: first translation (beam 4, loading included) {cold / 1000:.2f} s"
        )
        clock = time.perf_counter()
        shown = {beam: page_side(page, texts, beam) for beam in (1, 4)}
        print(f"the page translated {len(texts)} inputs twice in {time.perf_counter() - clock:.0f} s")
        worst = 0.0
        for text in texts[:20]:
            (answer,) = page_side(page, [text], 1, details=True)
            maps = attention_maps(rounded, answer["ids"], [rounded.bos_id] + answer["tokens"])
            for kind, want in maps.items():
                for layer, heads in enumerate(answer["maps"][kind]):
                    for head, rows in enumerate(heads):
                        for q, row in enumerate(rows):
                            diff = (torch.tensor(row, dtype=torch.float64) - want[layer, head, q, : len(row)]).abs()
                            worst = max(worst, float(diff.max()))
        browser.close()
    print(f"attention maps, greedy, first 20 sentences: largest difference from PyTorch (float16 weights) {worst:.2e}")

    n = len(texts)
    tests = args.sentences
    for beam in (1, 4):
        f16, full = python_side(rounded, tokenizer, texts, beam), python_side(stored, tokenizer, texts, beam)
        page = shown[beam]
        name = "greedy" if beam == 1 else "beam 4"
        for label, other in (("PyTorch float16", f16), ("PyTorch stored float32", full)):
            print(
                f"{name}: page vs {label}: pieces {agree(page, other, 'pieces')}/{n}, outputs "
                f"{agree(page, other, 'output')}/{n} (test sentences {agree(page[:tests], other[:tests], 'output')}"
                f"/{tests}, unusual and near ties {agree(page[tests:], other[tests:], 'output')}/{n - tests})"
            )
        rounding = [t for t, a, b in zip(texts, f16, full) if a != b]
        print(f"{name}: PyTorch float16 vs stored: {n - len(rounding)}/{n} the same; differing: {rounding[:5]}")
        mismatch = [(t, a, b) for t, a, b in zip(texts, page, f16) if a != b]
        if mismatch:
            print(json.dumps(mismatch[:5], ensure_ascii=False))
    if args.whole_test_set:
        rounding_on_the_test_set(stored, rounded, tokenizer, test)
    return 0


def rounding_on_the_test_set(stored, rounded, tokenizer, test: list[str]) -> None:
    """How many of the test set's translations float16 weights change (decoded in batches, both models alike)."""
    from types import SimpleNamespace

    from transformer_course.evaluation.translate import beam_translations, greedy_translations

    data = SimpleNamespace(tokenizer=tokenizer)
    ids = tokenizer.encode_batch(test)
    with torch.no_grad():
        for name, run in (
            ("greedy", lambda m: greedy_translations(m, data, ids)),
            ("beam 4", lambda m: beam_translations(m, data, ids, 4, contract.ALPHA)),
        ):
            clock = time.perf_counter()
            a, b = run(rounded), run(stored)
            changed = [(t, x, y) for t, x, y in zip(test, a, b) if x != y]
            print(
                f"whole test set, {name}: float16 weights change {len(changed)} of {len(test)} translations "
                f"({time.perf_counter() - clock:.0f} s); e.g. {json.dumps(changed[:2], ensure_ascii=False)}"
            )


if __name__ == "__main__":
    sys.exit(main())
