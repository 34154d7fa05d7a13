import datetime as dt

from transformer_course.data.dates import FORMATS, CharVocab, date_splits, date_vocabs, format_date, make_date_pairs


def test_same_seed_same_pairs_and_targets_are_iso():
    a, b = make_date_pairs(200, seed=3), make_date_pairs(200, seed=3)
    assert a == b and a != make_date_pairs(200, seed=4)
    for human, iso in a:
        assert dt.date.fromisoformat(iso).isoformat() == iso and human


def test_formats_render_the_issue_examples():
    d = dt.date(1979, 5, 3)
    rendered = {format_date(d, f) for f in FORMATS}
    assert {"3 May 1979", "03/05/79", "thursday, may 3 1979", "the 3rd of May 1979"} <= rendered
    assert format_date(dt.date(2021, 3, 2), "{weekday}, {month} {d} {yyyy}") == "tuesday, march 2 2021"


def test_held_out_dates_never_occur_in_training():
    train, test = date_splits(5000, 1000, seed=0)
    assert len(test) == 1000 and len({iso for _, iso in test}) == 1000
    assert not {iso for _, iso in train} & {iso for _, iso in test}
    assert date_splits(5000, 1000, seed=0) == (train, test)


def test_vocabularies_cover_every_format_and_round_trip():
    source, target = date_vocabs()
    for human, iso in make_date_pairs(2000, seed=1):
        assert source.unk_id not in source.encode(human)
        assert source.decode(source.encode(human)) == human and target.decode(target.encode(iso)) == iso
    assert len(target) == 4 + 11


def test_char_vocab_decode_stops_at_eos():
    v = CharVocab("abc")
    ids = [v.bos_id] + v.encode("cab") + [v.eos_id] + v.encode("a") + [v.pad_id]
    assert v.decode(ids) == "cab"
