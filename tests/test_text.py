"""Tests for attnbook.text: the corpus, the character tokenizer, batches and n-gram baselines.

References: the King James Bible's well-known first and last verses, hand-counted bigram and
unigram probabilities on a five-token text, and windows of ``arange`` ids (whose targets are
known without the code).
"""

import importlib.metadata
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnbook.text import (
    CORPUS,
    CharTokenizer,
    bigram_loss,
    corpus_path,
    get_batch,
    load_corpus,
    ngram_counts,
    split_ids,
    unigram_loss,
)

ROOT = Path(__file__).resolve().parent.parent


# --- the corpus -----------------------------------------------------------------------------


def test_corpus_package_is_installed_at_the_pinned_version():
    assert importlib.metadata.version(CORPUS.package) == CORPUS.version
    pins = ROOT.joinpath("requirements.txt").read_text().splitlines()
    assert f"{CORPUS.package}=={CORPUS.version}" in pins
    assert corpus_path().is_file()


def test_load_corpus_reads_the_kjv_in_order_one_verse_per_line():
    text = load_corpus()
    lines = text.split("\n")
    assert lines[0] == "In the beginning God created the heaven and the earth."
    assert lines[-1] == "The grace of our Lord Jesus Christ be with you all. Amen."
    assert 31000 < len(lines) < 31200  # the KJV has about 31,100 verses
    assert "  " not in text and "\t" not in text and "\r" not in text
    assert all(line == line.strip() and line for line in lines)


def test_load_corpus_max_chars_is_a_prefix():
    assert load_corpus(max_chars=20) == "In the beginning God"
    with pytest.raises(ValueError, match="max_chars"):
        load_corpus(max_chars=0)
    with pytest.raises(TypeError, match="max_chars"):
        load_corpus(max_chars=2.0)


# --- the tokenizer --------------------------------------------------------------------------


def test_tokenizer_vocabulary_is_sorted_and_round_trips():
    tok = CharTokenizer("banana bread")
    assert tok.chars == " abdenr"
    assert tok.vocab_size == 7
    ids = tok.encode("bread")
    np.testing.assert_array_equal(ids, [2, 6, 4, 1, 3])  # positions in " abdenr"
    assert ids.dtype == np.int64
    assert tok.decode(ids) == "bread"
    assert tok.decode(torch.tensor([1, 5, 1])) == "ana"
    assert tok.decode([]) == ""


def test_tokenizer_names_unknown_characters():
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"\['z', 'é'\]"):
        tok.encode("abzéa")
    with pytest.raises(ValueError, match="vocab_size=3"):
        tok.decode([0, 3])
    with pytest.raises(TypeError, match="integers"):
        tok.decode(np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="str"):
        tok.encode(b"ab")
    with pytest.raises(ValueError, match="empty"):
        CharTokenizer("")


# --- splits and batches ---------------------------------------------------------------------


def test_split_ids_is_contiguous_with_the_end_held_out():
    ids = np.arange(100)
    train, val = split_ids(ids, val_fraction=0.1)
    np.testing.assert_array_equal(train, np.arange(90))
    np.testing.assert_array_equal(val, np.arange(90, 100))
    with pytest.raises(ValueError, match="val_fraction"):
        split_ids(ids, val_fraction=1.0)
    with pytest.raises(ValueError, match="empty"):
        split_ids(np.arange(3), val_fraction=0.01)


def test_get_batch_targets_are_the_next_tokens():
    ids = np.arange(1000)  # each id names its own position
    x, y = get_batch(ids, 16, 8, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.int64
    torch.testing.assert_close(y, x + 1)  # the token after each one
    torch.testing.assert_close(x - x[:, :1], torch.arange(16).expand(8, 16))  # windows
    assert int(y.max()) <= 999
    x2, _ = get_batch(ids, 16, 8, torch.Generator().manual_seed(0))
    torch.testing.assert_close(x, x2)


def test_get_batch_reaches_the_last_token_and_not_beyond():
    ids = np.arange(6)
    seen = set()
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        _, y = get_batch(ids, 4, 4, gen)
        seen.update(y[:, -1].tolist())
    assert seen == {4, 5}  # windows start at 0 or 1; the last target is id 5


def test_get_batch_rejects_bad_arguments():
    gen = torch.Generator()
    with pytest.raises(ValueError, match="ids"):
        get_batch(np.arange(4), 4, 2, gen)  # needs block_size + 1 ids
    with pytest.raises(TypeError, match="generator"):
        get_batch(np.arange(10), 4, 2, 0)
    with pytest.raises(TypeError, match="ids"):
        get_batch(np.linspace(0, 1, 10), 4, 2, gen)
    with pytest.raises(ValueError, match="batch_size"):
        get_batch(np.arange(10), 4, 0, gen)


# --- baselines ------------------------------------------------------------------------------


def test_bigram_and_unigram_losses_match_hand_counts():
    train = [0, 1, 0, 1, 1]  # bigrams: 0->1 twice, 1->0 once, 1->1 once
    val = [0, 1, 1]
    # add-one: p(1|0) = (2+1)/(2+2) = 3/4, p(1|1) = (1+1)/(2+2) = 1/2
    expected = -(math.log(3 / 4) + math.log(1 / 2)) / 2
    assert bigram_loss(train, val, 2) == pytest.approx(expected, rel=1e-12)
    # add-one unigram: p(0) = 3/7, p(1) = 4/7
    expected = -(math.log(3 / 7) + 2 * math.log(4 / 7)) / 3
    assert unigram_loss(train, val, 2) == pytest.approx(expected, rel=1e-12)
    # alpha = 0.5: p(1|0) = 2.5/3, p(1|1) = 1.5/3
    expected = -(math.log(2.5 / 3) + math.log(1.5 / 3)) / 2
    assert bigram_loss(train, val, 2, alpha=0.5) == pytest.approx(expected, rel=1e-12)


def test_unseen_token_costs_log_of_its_smoothed_share():
    # token 2 never occurs in training: p(2 | 0) = 1 / (count(0, .) + 3)
    assert bigram_loss([0, 1, 0, 1], [0, 2], 3) == pytest.approx(math.log(2 + 3))


def test_ngram_counts_and_errors():
    c = ngram_counts([0, 1, 0, 1, 1], 2, 2)
    np.testing.assert_array_equal(c, [[0, 2], [1, 1]])
    np.testing.assert_array_equal(ngram_counts([2, 2, 0], 3, 1), [1, 0, 2])
    with pytest.raises(ValueError, match="vocab_size"):
        bigram_loss([0, 1], [0, 5], 2)
    with pytest.raises(ValueError, match="alpha"):
        bigram_loss([0, 1], [0, 1], 2, alpha=0.0)
    with pytest.raises(ValueError, match="order"):
        ngram_counts([0, 1], 2, 3)


def test_bigram_beats_unigram_on_the_corpus_prefix():
    text = load_corpus(max_chars=200_000)
    tok = CharTokenizer(text)
    train, val = split_ids(tok.encode(text))
    uni = unigram_loss(train, val, tok.vocab_size)
    bi = bigram_loss(train, val, tok.vocab_size)
    assert bi < uni < math.log(tok.vocab_size)


# --- hostile review: table sizes, names in messages, huge alpha ----------------------------


@pytest.mark.parametrize("fn", [bigram_loss, lambda t, v, V: ngram_counts(t, V, 2)])
def test_bigram_tables_above_the_limit_are_refused_before_allocating(fn):
    # 10**5 squared float64 counts are 8e10 bytes (74.5 GiB); 2**32 overflowed C long
    with pytest.raises(ValueError, match=r"vocab_size 100000 .* 8e\+10 bytes"):
        fn([0, 1, 2], [0, 1], 10**5)
    with pytest.raises(ValueError, match="vocab_size 4294967296"):
        fn([0, 1, 2], [0, 1], 2**32)
    with pytest.raises(ValueError, match="vocab_size 4097 is above the limit 4096"):
        fn([0, 1, 2], [0, 1], 4097)


def test_unigram_tables_above_the_limit_are_refused():
    with pytest.raises(ValueError, match=r"vocab_size 4294967296 .* 3.44e\+10 bytes"):
        unigram_loss([0, 1, 2], [0, 1], 2**32)


@pytest.mark.parametrize("fn", [unigram_loss, bigram_loss])
def test_baseline_errors_name_the_argument(fn):
    with pytest.raises(ValueError, match=r"val_ids must lie in \[0, vocab_size=3\)"):
        fn([0, 1, 2], [0, 5], 3)
    with pytest.raises(ValueError, match=r"train_ids must lie in \[0, vocab_size=3\)"):
        fn([0, 7, 2], [0, 1], 3)
    with pytest.raises(ValueError, match="val_ids must be >= 0"):
        fn([0, 1, 2], [0, -1], 3)


@pytest.mark.parametrize("fn", [unigram_loss, bigram_loss])
def test_huge_alpha_gives_the_uniform_loss(fn):
    # alpha -> inf: every smoothed probability -> 1/V, so the loss -> log V (was inf: the sum
    # of the counts overflowed)
    assert fn([0, 1], [0, 1], 3, alpha=1e308) == pytest.approx(math.log(3), rel=1e-12)
    assert fn([0, 1, 1, 0], [1, 0, 2], 3, alpha=1.7e308) == pytest.approx(math.log(3), rel=1e-12)


def test_tiny_alpha_stays_finite():
    # p(2 | 0) = alpha / (2 + 3 alpha): the loss is log(2 / alpha) for alpha = 5e-324
    expected = math.log(2) - math.log(5e-324)
    assert bigram_loss([0, 1, 0, 1], [0, 2], 3, alpha=5e-324) == pytest.approx(expected, rel=1e-12)


def test_get_batch_names_block_size_when_ids_are_short():
    with pytest.raises(ValueError, match=r"ids must hold at least 5 ids \(block_size 4 \+ 1\)"):
        get_batch(np.arange(4), 4, 2, torch.Generator())


def test_tokenizer_refuses_lone_surrogates_naming_the_argument():
    # 'a\ud800' is not text: UTF-32 cannot encode it (it was a UnicodeEncodeError)
    with pytest.raises(ValueError, match=r"s holds a lone surrogate '\\ud800' at index 1"):
        CharTokenizer("ab").encode("a\ud800")
    with pytest.raises(ValueError, match="text holds a lone surrogate"):
        CharTokenizer("ab\udfff")
    with pytest.raises(TypeError, match="s must be a string"):
        CharTokenizer("ab").encode(None)


def test_get_batch_refuses_uint64_ids_beyond_int64():
    # 2**63 cast to int64 is -2**63: the windows held negative ids
    with pytest.raises(ValueError, match=r"ids must be <= 9223372036854775807"):
        get_batch(np.array([2**63] * 5, np.uint64), 3, 1, torch.Generator().manual_seed(0))
    x, y = get_batch(np.arange(5, dtype=np.uint64), 3, 1, torch.Generator().manual_seed(0))
    assert x.dtype == torch.int64 and (y - x).tolist() == [[1, 1, 1]]
