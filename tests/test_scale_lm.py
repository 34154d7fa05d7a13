"""Chapter 11's language model (models.scale_lm): each attention option against PyTorch's own or the chapter's
reference pieces, generation with a cache equal to the whole forward pass, the cache's size, and its errors; the
stream task's windows; the stored runs' agreement with the code that made them."""

import json
import math
from importlib.resources import files
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_course.data.lm_data import Sequences
from transformer_course.experiments import scale
from transformer_course.models.alibi import alibi_bias
from transformer_course.models.rotary import rotate
from transformer_course.models.scale_lm import ScaleAttention, ScaleLM
from transformer_course.models.sliding_window import sliding_window_mask
from transformer_course.training.stream_task import StreamTask, stream, windows

OPTIONS = {
    "mha": {},
    "gqa": {"n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "rope": {"position": "rope"},
    "alibi": {"position": "alibi"},
    "window": {"position": "rope", "window": 3},
    "window_alibi_gqa": {"position": "alibi", "window": 5, "n_kv_heads": 2},
    "linear": {"attention": "linear", "position": "none"},
    "none": {"position": "none"},
}


def _model(**kw) -> ScaleLM:
    torch.manual_seed(0)
    return ScaleLM(40, 16, 4, 2, 32, **kw).double().eval()


@pytest.mark.parametrize("name", OPTIONS)
def test_generation_with_a_cache_equals_the_whole_forward_pass(name):
    model = _model(**OPTIONS[name])
    ids = torch.randint(0, 40, (2, 11), generator=torch.Generator().manual_seed(1))
    whole = model(ids)  # (2, 11, V)
    cache = model.start_cache()
    parts = [model.step(cache, ids[:, :4])] + [model.step(cache, ids[:, i : i + 1]) for i in range(4, 11)]
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=0, atol=1e-12)
    assert cache.length == 11


def test_multi_head_option_equals_pytorchs_multihead_attention():
    attn = ScaleAttention(16, 4, 4, "none", None, "softmax").double()
    torch_attn = nn.MultiheadAttention(16, 4, batch_first=True).double()
    with torch.no_grad():  # w_kv holds the keys' rows, then the values': PyTorch's in_proj order after the queries
        torch_attn.in_proj_weight.copy_(torch.cat([attn.w_q.weight, attn.w_kv.weight]))
        torch_attn.in_proj_bias.copy_(torch.cat([attn.w_q.bias, attn.w_kv.bias]))
        torch_attn.out_proj.weight.copy_(attn.w_o.weight)
        torch_attn.out_proj.bias.copy_(attn.w_o.bias)
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)  # PyTorch's mask: True = may NOT attend
    theirs, _ = torch_attn(x, x, x, attn_mask=causal, need_weights=False)
    torch.testing.assert_close(attn(x), theirs, rtol=0, atol=1e-12)


def _by_hand(attn: ScaleAttention, x, mask, bias=None, rope=False):
    """The layer written out: heads repeated for their groups, positions applied, masked softmax."""
    q, k, v = attn.project(x, 0)
    if rope:  # project already rotated: undo nothing, check it against rotate on the raw projections instead
        b, t, _ = x.shape
        raw_q = attn.w_q(x).view(b, t, attn.n_heads, attn.d_k).transpose(1, 2)
        torch.testing.assert_close(q, rotate(raw_q), rtol=0, atol=1e-12)
    k, v = k.repeat_interleave(attn.group, 1), v.repeat_interleave(attn.group, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.d_k)
    if bias is not None:
        scores = scores + bias
    weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return attn.w_o((weights @ v).transpose(1, 2).flatten(2))


@pytest.mark.parametrize(
    ("position", "window", "kv"), [("rope", None, 4), ("alibi", None, 2), ("none", 3, 1), ("alibi", 4, 4)]
)
def test_each_option_is_the_chapters_piece(position, window, kv):
    torch.manual_seed(2)
    attn = ScaleAttention(16, 4, kv, position, window, "softmax").double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    mask = sliding_window_mask(9, window) if window else torch.ones(9, 9, dtype=torch.bool).tril()
    bias = alibi_bias(4, 9, 9) if position == "alibi" else None
    torch.testing.assert_close(attn(x), _by_hand(attn, x, mask, bias, position == "rope"), rtol=0, atol=1e-12)


def test_long_inputs_are_attended_block_by_block_to_the_same_numbers(monkeypatch):
    from transformer_course.models import scale_lm

    model = _model(position="alibi", window=7, n_kv_heads=2)
    ids = torch.randint(0, 40, (1, 50), generator=torch.Generator().manual_seed(3))
    whole = model(ids)
    monkeypatch.setattr(scale_lm, "QUERY_BLOCK", 8)
    torch.testing.assert_close(model(ids), whole, rtol=0, atol=1e-12)


def test_the_cache_holds_what_the_option_promises():
    ids = torch.randint(0, 40, (1, 30))
    held = {}
    for name in ("mha", "gqa", "mqa", "window", "linear"):
        model = _model(**OPTIONS[name])
        cache = model.start_cache()
        model.step(cache, ids[:, :20])
        for i in range(20, 30):
            model.step(cache, ids[:, i : i + 1])
        held[name] = cache.numbers()
    assert held["mha"] == 2 * 2 * 30 * 16  # keys and values, 2 layers, 30 positions, 4 heads of 4
    assert held["gqa"] * 2 == held["mha"] and held["mqa"] * 4 == held["mha"]
    assert held["window"] == 2 * 2 * 2 * 16  # the last window - 1 = 2 positions
    assert held["linear"] == 2 * 4 * (4 * 4 + 4)  # per layer and head: S (d_k, d_k) and z (d_k), whatever the length


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"position": "learned"}, "position must be one of"),
        ({"attention": "sparse"}, "attention must be one of"),
        ({"attention": "linear", "position": "rope"}, "no scores to rotate"),
        ({"attention": "linear", "position": "none", "window": 4}, "window=None"),
        ({"n_kv_heads": 3}, "not divisible"),
        ({"window": 0}, "window"),
    ],
)
def test_bad_options_say_what_is_wrong(kw, message):
    with pytest.raises(ValueError, match=message):
        ScaleLM(40, 16, 4, 2, 32, **kw)


def test_bad_ids_say_what_is_wrong():
    model = _model()
    with pytest.raises(ValueError, match="int64"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="max_len"):
        ScaleLM(40, 16, 4, 1, 32, max_len=8)(torch.zeros(1, 9, dtype=torch.int64))


def test_the_stream_and_its_windows():
    seqs = Sequences([[1, 5, 6, 2], [1, 7, 2], [1, 8, 9, 10, 2]], [1, 1, 1])
    tokens = stream(seqs)
    assert tokens.tolist() == [5, 6, 2, 7, 2, 8, 9, 10, 2]  # <bos> dropped, each sentence ends with <eos>
    assert windows(tokens, 4).tolist() == [[5, 6, 2, 7], [2, 8, 9, 10]]
    with pytest.raises(ValueError, match="no window"):
        windows(tokens, 10)


def test_the_stream_task_draws_the_same_windows_from_the_same_seed_and_resumes():
    tokens = torch.arange(100)
    a, b = StreamTask(tokens, 8, 3, seed=5), StreamTask(tokens, 8, 3, seed=5)
    first, n = a.next_batch()
    assert n == 24 and first.shape == (3, 9)
    assert torch.equal(first[:, 1:] - first[:, :-1], torch.ones(3, 8, dtype=torch.int64))  # consecutive tokens
    assert torch.equal(first, b.next_batch()[0])
    state = a.state()
    nxt = a.next_batch()[0]
    b.load_state(state)
    assert torch.equal(b.next_batch()[0], nxt)
    with pytest.raises(ValueError, match="too few"):
        StreamTask(torch.arange(5), 8, 3, seed=0)


def test_loss_by_position_averages_the_windows():
    model = _model()
    tokens = torch.randint(0, 40, (200,), generator=torch.Generator().manual_seed(4))
    by_position = scale.mean_nll(model.float(), tokens, 9, rows=3)
    cut = windows(tokens, 10)
    expected = model.nll(cut).double().mean(0)
    torch.testing.assert_close(by_position, expected, rtol=0, atol=1e-6)


def test_every_variant_builds_and_a_bad_one_is_named():
    for name in scale.VARIANTS:
        assert isinstance(scale.build(name), ScaleLM)
    with pytest.raises(ValueError, match="variant must be one of"):
        scale.build("moe")


STORED = sorted(Path(str(files("transformer_course.runs"))).glob("scale-*-seed*.json"))


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_each_stored_run_was_made_by_the_code_as_it_is(path):
    run = json.loads(path.read_text())
    variant = run["variant"]
    assert run["settings"] == {
        **scale.SIZES, **scale.SCHEDULE, **scale.VARIANTS[variant],
        "context": scale.CONTEXT, "rows": scale.ROWS, "vocab": scale.VOCAB,
    }  # fmt: skip
    assert run["steps"] == scale.STEPS and f"--variant {variant}" in run["command"]
    assert run["parameters"] == sum(p.numel() for p in scale.build(variant).parameters())
    assert len(run["test"]["by_position"]) == scale.LONG
    assert set(run["test"]["by_length"]) == {str(n) for n in scale.LENGTHS}
    assert run["cache_numbers_per_token"] == scale.cache_numbers_per_token(scale.build(variant))


def test_all_variants_have_three_seeds():
    made = {(json.loads(p.read_text())["variant"], p.stem.rsplit("seed", 1)[1]) for p in STORED}
    assert made == {(v, s) for v in scale.VARIANTS for s in "012"}


def test_the_speed_measurement_times_one_token_steps_and_reads_the_cache():
    from transformer_course.experiments import scale_speed

    model = _model(position="rope", window=3)
    seconds, held = scale_speed.measure(model.float(), 6, new=2)
    assert seconds > 0 and held == 2 * 2 * 2 * 16  # the window's last 2 positions, 2 layers, keys and values


def _stored(name):
    return json.loads(files("transformer_course.runs").joinpath(f"{name}.json").read_text())


def test_the_stored_speed_run_covers_every_length_and_its_caches_are_what_the_models_hold():
    from transformer_course.experiments import scale_speed

    run = _stored("scale-speed")
    assert set(run["ms_per_token"]) == set(scale_speed.SPEED_VARIANTS)
    for variant, by_length in run["cache_numbers"].items():
        assert set(by_length) == {str(n) for n in scale_speed.LENGTHS}
        per_token = scale.cache_numbers_per_token(scale.build(variant))
        for n, held in by_length.items():
            if variant == "linear":  # a fixed state: 3 layers, 8 heads, S (16, 16) and z (16,)
                assert held == 3 * 8 * (16 * 16 + 16)
            elif variant == "window16":  # the last 15 positions
                assert held == per_token * 15
            else:
                assert held == per_token * (int(n) + scale_speed.NEW)


def test_the_stored_memory_run_shows_the_scores_growing_quadratically_and_the_tiles_not():
    run = _stored("scale-memory")
    assert run["lengths"] == [256, 1024, 4096, 16384]
    pick = {(r["method"], r["n"], r["causal"]): r["extra_mib"] for r in run["runs"]}
    for causal in (False, True):
        plain, tiled = pick["plain", 16384, causal], pick["tiled", 16384, causal]
        assert tiled <= plain / 20  # the chapter's bar
        assert plain / pick["plain", 4096, causal] > 10  # 4 x the length: about 16 x the memory
        assert tiled / pick["tiled", 4096, causal] < 6  # about 4 x
