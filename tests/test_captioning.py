import pytest
import torch

from transformer_course.experiments import captioning
from transformer_course.experiments.captioning import BOS, EOS, Captioner, make_captions


def test_images_captions_and_spans_have_the_documented_shapes():
    data = make_captions(50, seed=3)
    assert data.images.shape == (50, 1, 16, 64) and data.images.dtype == torch.float32
    assert 0 <= data.images.min() and data.images.max() <= 1
    assert data.spans.shape == (50, 4, 2)
    for caption, spans in zip(data.captions, data.spans):
        digits = caption.split()
        assert 2 <= len(digits) <= 4 and all(len(d) == 1 and d.isdigit() for d in digits)
        real = spans[: len(digits)]
        assert not real.isnan().any() and spans[len(digits) :].isnan().all()
        assert (real[:, 0] < real[:, 1]).all() and (real[1:, 0] > real[:-1, 0]).all()  # left to right
    assert len(set(data.captions)) > 40  # the captions vary


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data():
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the images do not depend on the default dtype
    try:
        a = make_captions(20, seed=1)
    finally:
        torch.set_default_dtype(dtype)
    b, c = make_captions(20, seed=1), make_captions(20, seed=2)
    assert torch.equal(a.images, b.images) and a.captions == b.captions
    torch.testing.assert_close(a.spans, b.spans, equal_nan=True, rtol=0, atol=0)
    assert not torch.equal(a.images, c.images)


def test_targets_are_the_digits_then_eos_then_padding():
    data = make_captions(30, seed=0)
    targets = data.targets()
    for caption, row in zip(data.captions, targets.tolist()):
        ids = [int(d) for d in caption.split()]
        assert row[: len(ids) + 1] == ids + [EOS] and all(t == -100 for t in row[len(ids) + 1 :])


def test_ink_lies_inside_the_digit_spans():
    data = make_captions(40, seed=4, noise=0.0)
    for image, spans in zip(data.images[:, 0], data.spans):
        columns = torch.arange(64)
        inside = torch.zeros(64, dtype=torch.bool)
        for lo, hi in spans[~spans[:, 0].isnan()].tolist():
            inside |= (columns >= lo - 1) & (columns <= hi + 1)
        assert image[:, ~inside].max() < 0.3  # no stroke outside the digits (a jittered dot's tail at most)
        assert image[:, inside].max() > 0.9


def test_the_glyphs_are_ten_distinct_bitmaps():
    bitmaps = captioning.glyph_bitmaps()
    assert bitmaps.shape == (10, 7, 5)
    flat = bitmaps.flatten(1).int()
    differ = (flat[:, None] != flat[None]).sum(-1)  # (10, 10) cells in which two glyphs differ
    assert (differ + 100 * torch.eye(10, dtype=torch.long)).min() >= 3
    assert all(len(rows) == 7 and all(len(r) == 5 for r in rows) for rows in captioning.GLYPHS.values())


def test_attention_weights_are_distributions_over_the_regions():
    data = make_captions(6, seed=0)
    model = Captioner()
    logits, weights = model(data.images, data.targets())
    L = data.targets().shape[1]
    assert logits.shape == (6, L, 12) and weights.shape == (6, L, 16)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, L))
    tokens, gen_weights = model.generate(data.images, max_len=5)
    assert tokens.shape == (6, 5) and gen_weights.shape == (6, 5, 16)
    torch.testing.assert_close(gen_weights.sum(-1), torch.ones(6, 5))


def test_teacher_forcing_starts_from_bos_and_feeds_the_previous_digit():
    data = make_captions(4, seed=5)
    model = Captioner().eval()
    targets = data.targets()
    logits, weights = model(data.images, targets)
    h, s = model.encode(data.images)
    y = torch.full((4,), BOS)
    for t in range(targets.shape[1]):  # the same numbers, one decoder step at a time
        step_logits, s, w = model.decoder(y, s, h)
        torch.testing.assert_close(step_logits, logits[:, t])
        torch.testing.assert_close(w, weights[:, t])
        y = targets[:, t].clamp(min=0)


def test_decode_stops_at_eos():
    assert captioning.decode(torch.tensor([[3, 7, 1, EOS, 4], [0, EOS, EOS, 9, 9]])) == ["3 7 1", "0"]


def test_a_few_training_steps_reduce_the_loss_and_are_deterministic():
    threads, dtype = torch.get_num_threads(), torch.get_default_dtype()
    a = captioning.train_captioner(seed=0, steps=40, n_train=256)
    b = captioning.train_captioner(seed=0, steps=40, n_train=256)
    assert a.losses == b.losses  # the same seed, the same run
    assert sum(a.losses[-5:]) / 5 < sum(a.losses[:5]) / 5 - 0.2
    assert torch.get_num_threads() == threads and torch.get_default_dtype() == dtype  # both put back
    data = make_captions(20, seed=99)
    assert 0 <= captioning.caption_accuracy(a.model, data) <= 1
    assert 0 <= captioning.attention_on_digit_rate(a.model, data) <= 1


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="n must be at least 1"):
        make_captions(0, seed=0)
    with pytest.raises(ValueError, match="min_digits <= max_digits"):
        make_captions(5, seed=0, min_digits=3, max_digits=2)
    with pytest.raises(ValueError, match="holds 4"):
        make_captions(5, seed=0, max_digits=5)
    with pytest.raises(ValueError, match=r"images must have shape \(B, 1, 16, 64\)"):
        Captioner().generate(torch.zeros(2, 16, 64))
    with pytest.raises(ValueError, match="must be positive"):
        captioning.train_captioner(steps=0)
