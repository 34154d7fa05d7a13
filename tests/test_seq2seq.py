import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from transformer_course.data import make_batch
from transformer_course.experiments import toy_experiments
from transformer_course.models import bahdanau, seq2seq
from transformer_course.training import model_cache


def _mask(lengths, t):
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


def test_encoder_final_state_matches_pytorch_packed_gru():
    torch.manual_seed(0)
    enc = seq2seq.Encoder(11, 4, 6).double()
    src, lengths = torch.randint(0, 11, (3, 7)), [7, 3, 1]
    states, final = enc(src, _mask(lengths, 7))
    packed = pack_padded_sequence(enc.embedding(src), torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    _, h_n = enc.rnn(packed)
    assert states.shape == (3, 7, 6)
    torch.testing.assert_close(final, h_n[0], atol=1e-12, rtol=0)


def test_teacher_forcing_equals_pytorch_gru_over_shifted_targets():
    torch.manual_seed(0)
    step = seq2seq.DecoderStep(9, 4, 5).double()
    gru = nn.GRU(4, 5, batch_first=True).double()
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        getattr(gru, name + "_l0").data.copy_(getattr(step.cell, name))
    h0, targets = torch.randn(2, 5, dtype=torch.float64), torch.randint(3, 9, (2, 6))
    logits = seq2seq.teacher_forcing(step, h0, targets, bos_id=1)
    inputs = torch.cat([torch.ones(2, 1, dtype=torch.long), targets[:, :-1]], dim=1)
    outputs, _ = gru(step.embedding(inputs), h0[None])
    torch.testing.assert_close(logits, step.out(outputs), atol=1e-12, rtol=0)


def test_greedy_decode_feeds_back_its_argmax():
    torch.manual_seed(0)
    step = seq2seq.DecoderStep(9, 4, 5).double()
    h0 = torch.randn(3, 5, dtype=torch.float64)
    logits = seq2seq.greedy_decode(step, h0, bos_id=1, max_len=5)
    tokens = logits.argmax(-1)
    # feeding the chosen tokens back with teacher forcing gives the same logits
    torch.testing.assert_close(seq2seq.teacher_forcing(step, h0, tokens, bos_id=1), logits, atol=1e-12, rtol=0)


def test_padding_does_not_change_the_model_output():
    torch.manual_seed(0)
    model = seq2seq.Seq2Seq(12, 8, 4, 6).double()
    short = make_batch([[4, 5, 6]], [[3, 4]], 0, 2)
    padded = make_batch([[4, 5, 6], [4, 5, 6, 7, 8, 9]], [[3, 4], [3, 4]], 0, 2)
    torch.testing.assert_close(
        model(padded.src, padded.src_mask, padded.tgt)[:1],
        model(short.src, short.src_mask, short.tgt),
        atol=1e-12,
        rtol=0,
    )


def test_training_reduces_the_loss_and_the_cache_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_COURSE_CACHE", str(tmp_path))
    batch = make_batch([[4, 5, 6, 7], [7, 6, 5]], [[4, 5, 6, 7], [7, 6, 5]], 0, 2)

    def fit(model):
        return toy_experiments.train_toy(model, [batch], steps=60, lr=1e-2)

    build = lambda: seq2seq.Seq2Seq(8, 8, 8, 16)
    model, history, loaded = model_cache.cached_training("toy", {"steps": 60}, "two pairs", build, fit, (seq2seq,))
    assert not loaded and history["loss"][-1] < 0.2 * history["loss"][0]
    again, history2, loaded2 = model_cache.cached_training("toy", {"steps": 60}, "two pairs", build, fit, (seq2seq,))
    assert loaded2 and history2 == history
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    tokens, _ = model.generate(batch.src, batch.src_mask, 5)
    assert tokens[:, :5].tolist()[0][:5] == [4, 5, 6, 7, 2]


def test_the_fused_forward_equals_teacher_forcing_step_by_step():
    torch.manual_seed(0)
    model = seq2seq.Seq2Seq(12, 9, 4, 6).double()
    batch = make_batch([[4, 5, 6], [4, 5, 6, 7, 8]], [[3, 4, 5], [3]], 0, 2)
    _, final = model.encoder(batch.src, batch.src_mask)
    stepwise = seq2seq.teacher_forcing(model.decoder, final, batch.tgt, model.bos_id)
    torch.testing.assert_close(model(batch.src, batch.src_mask, batch.tgt), stepwise, atol=1e-12, rtol=0)


def test_generation_stops_once_every_sequence_has_ended():
    torch.manual_seed(0)
    model = seq2seq.Seq2Seq(8, 8, 4, 6)
    with torch.no_grad():
        model.decoder.out.bias.fill_(-100.0)
        model.decoder.out.bias[2] = 100.0  # the model always says <eos>
    batch = make_batch([[4, 5, 6], [4, 5]], [[3], [3]], 0, 2)
    tokens, _ = model.generate(batch.src, batch.src_mask, 10)
    assert tokens.tolist() == [[2], [2]]


@pytest.mark.parametrize("attention", [False, True])
def test_greedy_rows_that_wrote_eos_leave_the_batch(attention):
    torch.manual_seed(0)
    model = (bahdanau.AttentionSeq2Seq(12, 9, 4, 6, 5) if attention else seq2seq.Seq2Seq(12, 9, 4, 6)).double().eval()
    # (seeded: with these weights the rows write <eos> after 1, 2 or 3 tokens, or after 3 to 8 with attention)
    batch = make_batch([[4, 5, 6], [4, 5, 6, 7, 8], [9, 3], [7, 7, 7, 7], [5], [11, 10, 9]], [[3]] * 6, 0, 2)
    rows = []
    model.decoder.register_forward_pre_hook(lambda module, args: rows.append(len(args[0])))
    tokens, weights = model.generate(batch.src, batch.src_mask, 8)
    # The reference: every row steps to the end, and what follows its first <eos> is then replaced.
    h, s = model.encoder(batch.src, batch.src_mask)
    state, y, ref, ref_w = s, torch.ones(6, dtype=torch.long), [], []
    with torch.no_grad():
        for _ in range(8):
            if attention:
                logits, state, w = model.decoder(y, state, h, batch.src_mask)
                ref_w.append(w)
            else:
                logits, state = model.decoder(y, state)
            y = logits.argmax(-1)
            ref.append(y)
    ref = torch.stack(ref, dim=1)
    ends = [row.index(2) + 1 if 2 in row else 8 for row in ref.tolist()]  # tokens written, <eos> included
    assert len(set(ends)) > 2 and tokens.shape == (6, max(ends))
    # Each step ran the rows that had not written <eos> yet, and no more (the hook saw the reference's steps too).
    assert rows[: max(ends)] == [sum(n >= t for n in ends) for t in range(1, max(ends) + 1)]
    for row, n in enumerate(ends):
        assert tokens[row, :n].tolist() == ref[row, :n].tolist() and (tokens[row, n:] == 2).all()
        if attention:
            torch.testing.assert_close(weights[row, :n], torch.stack(ref_w, dim=1)[row, :n], atol=1e-12, rtol=0)
            assert (weights[row, n:] == 0).all()
