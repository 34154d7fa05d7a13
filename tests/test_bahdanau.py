import torch

from transformer_course.data import make_batch
from transformer_course.models import bahdanau


def _mask(lengths, t):
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


def test_additive_score_matches_the_formula_entry_by_entry():
    g = torch.Generator().manual_seed(0)
    s, h = torch.randn(2, 3, generator=g, dtype=torch.float64), torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    W, U, v = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((6, 3), (6, 5), (6,)))
    scores = bahdanau.additive_score(s, h, W, U, v)
    for b in range(2):
        for j in range(4):
            assert torch.isclose(scores[b, j], v @ torch.tanh(W @ s[b] + U @ h[b, j]))


def test_weights_sum_to_one_and_ignore_padding():
    scores, h = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 5, 4, dtype=torch.float64)
    mask = _mask([5, 2, 1], 5)
    context, weights = bahdanau.attention_context(scores, h, mask)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, dtype=torch.float64))
    assert (weights[~mask] == 0).all()
    torch.testing.assert_close(context[2], h[2, 0])  # a single real token gets all the weight
    h2 = h.clone()
    h2[~mask] = 1e6  # what is hidden cannot change the context
    torch.testing.assert_close(bahdanau.attention_context(scores, h2, mask)[0], context)


def test_multiplicative_score():
    s, h, W = torch.randn(2, 3), torch.randn(2, 4, 5), torch.randn(3, 5)
    torch.testing.assert_close(bahdanau.multiplicative_score(s, h, W), torch.einsum("bi,ij,btj->bt", s, W, h))


def test_precomputed_keys_give_the_same_step():
    torch.manual_seed(0)
    step = bahdanau.AttentionDecoderStep(7, 3, 4, 5, 6).double()
    y, s, h = torch.tensor([3, 4]), torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 6, 5, dtype=torch.float64)
    mask = _mask([6, 2], 6)
    plain = step(y, s, h, mask)
    fast = step(y, s, h, mask, step.U(h))
    for a, b in zip(plain, fast):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_model_is_unchanged_by_padding_and_its_weights_are_distributions():
    torch.manual_seed(0)
    model = bahdanau.AttentionSeq2Seq(12, 8, 4, 6, 5).double()
    short = make_batch([[4, 5, 6]], [[3, 4]], 0, 2)
    padded = make_batch([[4, 5, 6], [4, 5, 6, 7, 8, 9]], [[3, 4], [3, 4]], 0, 2)
    logits, weights = model(padded.src, padded.src_mask, padded.tgt)
    logits_short, weights_short = model(short.src, short.src_mask, short.tgt)
    torch.testing.assert_close(logits[:1], logits_short, atol=1e-12, rtol=0)
    torch.testing.assert_close(weights[:1, :, :3], weights_short, atol=1e-12, rtol=0)
    assert weights.shape == (2, 3, 6) and (weights[0, :, 3:] == 0).all()
    tokens, gen_weights = model.generate(padded.src, padded.src_mask, 4)
    assert tokens.shape == (2, 4) and gen_weights.shape == (2, 4, 6)


def test_gru_update_is_the_gru_cell():
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(5, 4).double()
    x, s = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    mine = bahdanau.gru_update(x @ cell.weight_ih.T + cell.bias_ih, s @ cell.weight_hh.T + cell.bias_hh, s)
    torch.testing.assert_close(mine, cell(x, s), atol=1e-14, rtol=0)


def _step_by_step(model, batch):
    """Logits and weights of the decoder called one step at a time, as chapter 4 writes it."""
    h, s = model.encoder(batch.src, batch.src_mask)
    inputs = torch.cat([torch.ones(len(batch), 1, dtype=torch.long), batch.tgt[:, :-1]], dim=1)
    logits, weights = [], []
    for t in range(batch.tgt.shape[1]):
        step_logits, s, w = model.decoder(inputs[:, t], s, h, batch.src_mask)
        logits.append(step_logits)
        weights.append(w)
    return torch.stack(logits, 1), torch.stack(weights, 1)


def test_the_model_forward_equals_its_decoder_steps_and_the_readout_can_be_tied():
    torch.manual_seed(0)
    for kwargs in ({}, {"d_readout": 4, "tie": True}, {"d_readout": 3}, {"bidirectional": True}):
        model = bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5, **kwargs).double()
        batch = make_batch([[4, 5, 6], [4, 5, 6, 7, 8]], [[3, 4, 5], [3]], 0, 2)
        fast_logits, fast_weights = model(batch.src, batch.src_mask, batch.tgt)
        step_logits, step_weights = _step_by_step(model, batch)
        torch.testing.assert_close(fast_logits, step_logits, atol=1e-12, rtol=0)
        torch.testing.assert_close(fast_weights, step_weights, atol=1e-12, rtol=0)
        # ... and the same gradients, which is what training sees
        probe = torch.randn_like(fast_logits)
        fast_grads = torch.autograd.grad((fast_logits * probe).sum(), list(model.parameters()))
        step_grads = torch.autograd.grad((_step_by_step(model, batch)[0] * probe).sum(), list(model.parameters()))
        for a, b in zip(fast_grads, step_grads):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    tied = bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5, d_readout=4, tie=True)
    assert tied.decoder.out.weight is tied.decoder.embedding.weight


def test_a_tied_readout_must_match_the_embedding():
    import pytest

    with pytest.raises(ValueError, match="d_readout"):
        bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5, d_readout=3, tie=True)
    with pytest.raises(ValueError, match="readout"):
        bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5, tie=True)


def test_the_bidirectional_encoder_is_a_gru_each_way_that_skips_padding():
    # Checked against two one-way torch.nn.GRUs that get its weights, each run on one unpadded sentence: the
    # forward one left to right, the backward one on the sentence reversed (its states then reversed back).
    torch.manual_seed(0)
    encoder = bahdanau.BidirectionalEncoder(12, 4, 6).double()
    forward, backward = (torch.nn.GRU(4, 6, batch_first=True).double() for _ in range(2))
    for gru, suffix in ((forward, ""), (backward, "_reverse")):
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(gru, name).data.copy_(getattr(encoder.rnn, name + suffix))
    sentences = [[4, 5, 6], [4, 5, 6, 7, 8, 9], [7]]
    batch = make_batch(sentences, [[3]] * 3, 0, 2)
    states, s0 = encoder(batch.src, batch.src_mask)
    assert states.shape == (3, 6, 12) and s0.shape == (3, 6)
    for b, sentence in enumerate(sentences):
        x = encoder.embedding(torch.tensor([sentence]))  # (1, T, E)
        fwd, fwd_last = forward(x)
        bwd, bwd_last = backward(x.flip(1))
        torch.testing.assert_close(states[b, : len(sentence)], torch.cat([fwd, bwd.flip(1)], -1)[0], atol=1e-12, rtol=0)
        assert (states[b, len(sentence) :] == 0).all()  # padding: no state
        expected_s0 = torch.tanh(encoder.init(torch.cat([fwd_last[0, 0], bwd_last[0, 0]])))
        torch.testing.assert_close(s0[b], expected_s0, atol=1e-12, rtol=0)


def test_the_backward_direction_sees_the_future():
    torch.manual_seed(0)
    encoder = bahdanau.BidirectionalEncoder(12, 4, 6).double()
    a = make_batch([[4, 5, 6, 7]], [[3]], 0, 2)
    b = make_batch([[4, 5, 6, 8]], [[3]], 0, 2)  # only the last word differs
    (h_a, _), (h_b, _) = encoder(a.src, a.src_mask), encoder(b.src, b.src_mask)
    torch.testing.assert_close(h_a[:, :3, :6], h_b[:, :3, :6], atol=0, rtol=0)  # forward: the past only
    assert (h_a[:, 0, 6:] - h_b[:, 0, 6:]).abs().max() > 1e-6  # backward: the first word's state has read the last
    # a one-way encoder's first state has not
    one_way = bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5).double().encoder
    torch.testing.assert_close(one_way(a.src, a.src_mask)[0][:, 0], one_way(b.src, b.src_mask)[0][:, 0])


def test_the_default_model_is_unchanged_by_the_bidirectional_option():
    import json
    from importlib.resources import files

    from transformer_course.models.seq2seq import Encoder
    from transformer_course.training.configs import CONFIGS
    from transformer_course.training.kinds import build_model, typed

    torch.manual_seed(0)
    default = bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5, d_readout=4, tie=True)
    torch.manual_seed(0)
    explicit = bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5, d_readout=4, tie=True, bidirectional=False)
    assert type(default.encoder) is Encoder
    for (name, p), (name2, q) in zip(default.state_dict().items(), explicit.state_dict().items()):
        assert name == name2 and torch.equal(p, q)
    # chapter 4's five-minute model has the parameters its stored runs counted (8,000 tokens); the bidirectional
    # one adds the backward GRU, the 2H-wide context's share of the decoder and the first state's layer
    run = json.loads(files("transformer_course.runs").joinpath("bahdanau-cpu-5min-seed0.json").read_text())
    counts = {}
    for name in ("bahdanau-cpu", "bahdanau-bi-cpu"):
        counts[name] = sum(p.numel() for p in build_model(typed(CONFIGS[name]), 8000).parameters())
    assert counts["bahdanau-cpu"] == run["parameters"]
    E, H, A, R = 128, 256, 128, 128
    extra = 3 * H * (E + H) + 3 * H * 2 + (2 * H * H + H) + 3 * H * H + H * A + H * R
    assert counts["bahdanau-bi-cpu"] - counts["bahdanau-cpu"] == extra
