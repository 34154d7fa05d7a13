"""`make claims`: every number of the chapters' prose is found in what backs it (authoring/claims.py)."""

import json
import shutil
from pathlib import Path

import pytest

from transformer_course.authoring import claims

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


def test_every_number_of_the_prose_is_backed():
    report = claims.check(SOLUTIONS)
    missing = [f"{q.notebook}, cell {q.cell}: {q.text} in: {q.sentence}" for q in report.missing]
    assert not missing, "numbers in the prose that no output, run or setting backs:\n" + "\n".join(missing)
    unused = [f"{a['notebook']}: {a['number']} ({a['words']})" for a in report.unused_allowances]
    assert not unused, "allowances that match no number of the prose any more:\n" + "\n".join(unused)
    counts = report.counts()
    # most numbers are checked against something; the allow-list stays short
    assert counts["output"] > 500 and counts.get("allowed", 0) <= 25


def _scratch_copy(tmp_path, name, cell_id, old, new):
    path = tmp_path / name
    shutil.copy(ROOT / "solutions" / name, path)
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c.get("id") == cell_id)
    source = "".join(cell["source"])
    assert source.count(old) == 1
    cell["source"] = source.replace(old, new)
    path.write_text(json.dumps(nb))
    return path


def test_a_changed_number_is_named_with_its_sentence(tmp_path, capsys):
    # chapter 8b's prose quotes the seeds' mean test BLEU, 29.1; a stale 29.7 must be caught (29.4 would not: it is printed elsewhere in the notebook)
    path = _scratch_copy(
        tmp_path, "08_transformer_vs_gru.ipynb", "ch08-seeds-read", "test\nBLEU 29.1 against", "test\nBLEU 29.7 against"
    )
    assert claims.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "08_transformer_vs_gru.ipynb, cell ch08-seeds-read: 29.7 is in no output" in out
    assert "its test BLEU 29.7 against 20.3." in out
    assert out.strip().splitlines()[-1].endswith("1 not found.")


def test_an_allowance_whose_number_is_gone_fails(tmp_path, capsys):
    path = _scratch_copy(tmp_path, "05_self_attention.ipynb", "ch05-bugs-md", "about 709 in", "about 710 in")
    assert claims.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "710 is in no output" in out and "the allowance for 709" in out


@pytest.mark.parametrize(
    ("prose", "value", "decimals", "scales", "rule"),
    [
        ("took 1,921 steps", 1921, 0, (1.0,), ""),
        ("took 1,920 steps", 1920, -1, (1.0,), ""),  # 1,915 to 1,925
        ("about 579,000 tokens", 579000, -3, (1.0,), ""),  # trailing zeros are rounding
        ("71 to 93% of them", 71, 0, (1.0, 100.0), ""),  # a range's unit is its first number's too
        ("3.6 million parameters", 3.6, 1, (1.0, 1e-6), ""),
        ("1.73 ms", 1.73, 2, (1.0, 1e3), ""),
        ("in exercise 5.3 you", 5.3, 1, (1.0,), "rule"),
        ("chapters 3 and 4 use", 3, 0, (1.0,), "rule"),
        ("published in 2017", 2017, 0, (1.0,), "rule"),
        ("in the year 2000", 2000, -2, (1.0,), "rule"),  # a round year is still a year
        ("with 4 heads", 4, 0, (1.0,), "rule"),
        ("two cores gave 4.", 4, 0, (1.0,), ""),  # a measurement, not a count of things
        ("4 times as fast", 4, 0, (1.0,), ""),
    ],
)
def test_how_a_number_of_the_prose_is_read(prose, value, decimals, scales, rule):
    quote = claims.prose_numbers("nb", "cell", prose)[0]
    assert (quote.value, quote.decimals, quote.scales) == (value, decimals, scales)
    assert quote.backed_by.startswith(rule) if rule else quote.backed_by == ""


def test_math_code_and_link_targets_are_not_prose():
    quotes = claims.prose_numbers("nb", "cell", "See $d_k = 64$, `x[12]`, [a](https://x.org/1706.03762) and 57.5.")
    assert [q.text for q in quotes] == ["57.5"]


def test_numbers_are_matched_rounded_as_printed():
    evidence = claims._Evidence({"output": sorted([30.26, 578911.0, 0.882, 3621440.0])})

    def found(text):
        return evidence.find(claims.prose_numbers("nb", "cell", text)[0])

    assert found("30.3 BLEU") == "output" and not found("30.4 BLEU")
    assert found("579,000 tokens") == "output" and not found("578,000 tokens")
    assert found("88% of them") == "output" and found("3.6 million weights") == "output"
    assert not found("3.7 million weights")


def test_a_source_comment_must_name_a_stored_run():
    with pytest.raises(ValueError, match="names no stored run"):
        claims._runs_read("", "<!-- source: runs/no-such-run.json -->", claims.stored_runs())


def test_versions_are_not_measurements():
    quote = claims.prose_numbers("nb", "cell", "It ran with PyTorch 2.11 and CUDA 13.0.")
    assert [q.backed_by for q in quote] == ["rule: a software version"] * 2
    values: list[float] = []
    claims._numbers_in_text("torch 2.13.0+cpu, sacrebleu 2.6.0: BLEU 2.6", values)
    assert values == [2.6]  # the score, not the versions


def _notebook(tmp_path, source, tags, outputs):
    cell = {
        "cell_type": "code",
        "id": "c1",
        "metadata": {"tags": tags},
        "source": source,
        "outputs": outputs,
        "execution_count": 1,
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


PRINTED = [{"output_type": "stream", "name": "stdout", "text": "BLEU 18.9\n"}]
FIGURE = [{"output_type": "display_data", "data": {"text/plain": "<Figure size 650x380 with 1 Axes>"}, "metadata": {}}]


@pytest.mark.parametrize(
    ("source", "tags", "outputs", "flagged"),
    [
        ("print(bleu)", ["nbval-ignore-output"], PRINTED, True),  # read by the prose, held by nothing
        ("print(bleu)\nassert bleu > 3", ["nbval-ignore-output"], PRINTED, False),
        ("# nothing to assert: examples the text does not read\nprint(bleu)", ["nbval-ignore-output"], PRINTED, False),
        ("print(bleu)", [], PRINTED, False),  # strict nbval compares it
        ("plt.show()", ["nbval-ignore-output"], FIGURE, False),  # nothing printed
        ("x = 'assert'\nprint(bleu)", ["nbval-ignore-output"], PRINTED, True),  # the word is not an assertion
    ],
)
def test_an_ignored_output_must_be_asserted(tmp_path, source, tags, outputs, flagged):
    path = _notebook(tmp_path, source, tags, outputs)
    assert claims.unasserted_cells(path) == (["nb.ipynb, cell c1"] if flagged else [])
