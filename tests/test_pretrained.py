"""attnbook.pretrained: all-MiniLM-L6-v2 on attnbook's modules vs. the reference libraries.

References (independent implementations reading the same packaged files, offline):

* ``sentence_transformers.SentenceTransformer(<model dir>, device="cpu")`` for the sentence
  embeddings (tokenizer, BERT, mean pooling, normalisation);
* ``transformers.AutoModel.from_pretrained(<model dir>, attn_implementation="eager")`` with
  ``output_attentions=True`` for every layer's attention weights (the fused attention returns
  none).

Tolerance: 1e-5 absolute in float32 (issue 5). Measured on the lead's machine: embeddings
~1.5e-7, attention weights ~1.6e-6.
"""

import functools
import json
import os

# Never reach a model hub: everything is read from the packaged directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnbook import pretrained  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402

ATOL = 1e-5

SENTENCES = [
    pretrained.TIRED,
    pretrained.WIDE,
    "A man is eating food.",
    "Attention is all you need.",
    "Hello!",
    "Naïve café — déjà vu, 東京 isn't far; unbelievably tokenized words split.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the fence.",
]
# > 256 word pieces: exercises truncation at max_seq_length (sentence_bert_config.json), which
# differs from the 128 written in tokenizer.json.
LONG = " ".join(f"word{i} is here" for i in range(120))


@pytest.fixture(scope="module")
def model():
    return pretrained.load_minilm()


@pytest.fixture(scope="module")
def st_model():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(pretrained.minilm_dir()), device="cpu")


@pytest.fixture(scope="module")
def hf_attentions():
    """sentence -> (tokens, (layers, heads, T, T) float32 weights, last hidden state (T, d))
    from transformers' BertModel with eager attention; memoised for the module."""
    from transformers import AutoModel, AutoTokenizer

    d = str(pretrained.minilm_dir())
    m = AutoModel.from_pretrained(d, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(d)
    assert m.config._attn_implementation == "eager"

    @functools.lru_cache(maxsize=None)
    def run(sentence):
        enc = tok(sentence, return_tensors="pt")
        with torch.no_grad():
            out = m(**enc, output_attentions=True)
        w = torch.stack([a[0] for a in out.attentions]).numpy()  # (layers, H, T, T)
        return (
            tok.convert_ids_to_tokens(enc["input_ids"][0].tolist()),
            w,
            out.last_hidden_state[0].numpy(),
        )

    return run


# -- the equality tests with the real model ---------------------------------------------------


@pytest.mark.slow  # loading sentence-transformers takes ~5 s
def test_embeddings_equal_sentence_transformers(model, st_model):
    """A padded batch, and a > 256-piece input (truncated), vs sentence-transformers."""
    ours = np.concatenate([model.encode(SENTENCES), model.encode([LONG])])
    ref = np.concatenate(
        [
            st_model.encode(SENTENCES, convert_to_numpy=True),
            st_model.encode([LONG], convert_to_numpy=True),
        ]
    )
    assert ours.shape == (len(SENTENCES) + 1, 384) and ours.dtype == np.float32
    assert np.isfinite(ours).all()
    diff = float(np.abs(ours - ref).max())
    print(f"largest |embedding - sentence-transformers| = {diff:.3g}")
    assert diff <= ATOL, diff
    # unit length (Normalize module), in float64
    assert_close(
        np.linalg.norm(ours.astype(np.float64), axis=1), np.ones(len(ours)), atol=1e-6, rtol=0
    )
    # the pair is not trivially identical: the last word changes the embedding
    assert np.abs(ours[0] - ours[1]).max() > 1e-3


@pytest.mark.slow  # loading sentence-transformers takes ~5 s
def test_token_ids_equal_reference_tokenizer(model, st_model):
    """Word pieces, [CLS]/[SEP], padding and truncation at 256 as sentence-transformers does."""
    ids, mask, tokens = model.tokenize(SENTENCES + [LONG])
    feats = st_model.tokenize(SENTENCES + [LONG])
    ref_ids, ref_mask = feats["input_ids"], feats["attention_mask"]
    assert ids.shape == ref_ids.shape
    assert torch.equal(ids, ref_ids.to(ids.dtype)) and torch.equal(mask, ref_mask.to(mask.dtype))
    assert len(tokens[-1]) == 256 and tokens[-1][0] == "[CLS]" and tokens[-1][-1] == "[SEP]"
    assert tokens[0][:3] == ["[CLS]", "the", "animal"]


def test_attention_weights_equal_transformers_eager(model, hf_attentions):
    """Every layer's and head's weights vs BertModel(output_attentions=True), and the states."""
    worst = 0.0
    for s in SENTENCES:
        tokens, w = model.attentions(s)
        ref_tokens, ref_w, ref_h = hf_attentions(s)
        assert tokens == ref_tokens
        T = len(tokens)
        assert w.shape == (6, 12, T, T) and w.dtype == np.float32
        assert np.isfinite(w).all()
        assert_close(w.sum(-1), np.ones((6, 12, T), dtype=np.float32), atol=1e-5, rtol=0)
        worst = max(worst, float(np.abs(w - ref_w).max()))
        ids, mask, _ = model.tokenize([s])
        with torch.no_grad():
            h = model(ids, mask)[0]
        assert_close(h.numpy(), ref_h, atol=1e-4, rtol=0)
    print(f"largest |attention weight - transformers eager| = {worst:.3g}")
    assert worst <= ATOL, worst


def test_padding_does_not_change_embeddings(model):
    """A short sentence alone and padded in a batch with longer ones: same embedding."""
    alone = np.concatenate([model.encode([s]) for s in SENTENCES])
    batched = model.encode(SENTENCES)
    assert len(set(len(t) for t in model.tokenize(SENTENCES)[2])) > 3  # real padding

    assert np.abs(alone - batched).max() <= 1e-6


def test_forward_with_weights_equals_transformer_block(model):
    """The weight-returning layer step computes exactly TransformerBlock.forward."""
    ids, mask, _ = model.tokenize(SENTENCES[:3])
    with torch.no_grad():
        plain = model(ids, mask)
        with_w, weights = model(ids, mask, need_weights=True)
    assert torch.equal(plain, with_w)
    assert len(weights) == 6 and weights[0].shape == (3, 12, ids.shape[1], ids.shape[1])
    # padding keys get weight exactly 0 (keep-mask replaces their scores)
    pad = ~mask.bool()  # (B, T)
    assert pad.any()
    for w in weights:
        assert torch.isfinite(w).all()
        assert torch.all(w.masked_select(pad[:, None, None, :].expand_as(w)) == 0)


# -- the book's helpers -----------------------------------------------------------------------


def test_attention_of_token_is_the_reference_row(model, hf_attentions):
    tokens, row = pretrained.attention_of_token(pretrained.TIRED, "it", model=model)
    ref_tokens, ref_w, _ = hf_attentions(pretrained.TIRED)
    i = ref_tokens.index("it")
    assert tokens == ref_tokens
    assert row.shape == (6, 12, len(tokens))
    assert np.abs(row - ref_w[:, :, i, :]).max() <= ATOL
    assert_close(row.sum(-1), np.ones((6, 12), dtype=np.float32), atol=1e-5, rtol=0)


def test_referent_attention_matches_reference_and_report(model, hf_attentions):
    """Weights of "it" on "animal"/"street" in both sentences, from transformers' weights."""
    ra = pretrained.referent_attention(model=model)
    assert ra.weights.shape == (2, 2, 6, 12)
    for si, s in enumerate((pretrained.TIRED, pretrained.WIDE)):
        toks, ref_w, _ = hf_attentions(s)
        qi = toks.index("it")
        for ci, c in enumerate(("animal", "street")):
            assert np.abs(ra.weights[si, ci] - ref_w[:, :, qi, toks.index(c)]).max() <= ATOL
    ref_pref = ra.weights[:, 0].astype(np.float64) - ra.weights[:, 1]
    assert_close(ra.preference, ref_pref, atol=1e-7, rtol=0)
    assert_close(ra.shift, ref_pref[1] - ref_pref[0], atol=1e-7, rtol=0)
    flips = ra.flipped_heads()
    for layer, head, p0, p1 in flips:
        assert p0 * p1 < 0
        assert p0 == pytest.approx(float(ref_pref[0, layer, head]), abs=1e-6)
    n_expected = int(
        ((ref_pref[0] > 0) & (ref_pref[1] < 0) | (ref_pref[0] < 0) & (ref_pref[1] > 0)).sum()
    )
    assert len(flips) == n_expected
    # a margin can only remove heads
    assert set(ra.flipped_heads(0.05)) <= set(flips)


def test_referent_attention_hand_built():
    """flipped_heads on weights whose answer is known by construction."""
    w = np.zeros((2, 2, 1, 3), dtype=np.float32)  # (sentences, candidates, layers, heads)
    w[0, :, 0, 0], w[1, :, 0, 0] = (0.6, 0.1), (0.1, 0.5)  # animal -> street: flips
    w[0, :, 0, 1], w[1, :, 0, 1] = (0.3, 0.2), (0.4, 0.1)  # animal both times
    w[0, :, 0, 2], w[1, :, 0, 2] = (0.20, 0.19), (0.19, 0.20)  # tiny flip
    ra = pretrained.ReferentAttention(("a", "b"), "it", ("animal", "street"), (("a",), ("b",)), w)
    heads = [(layer, head) for layer, head, _, _ in ra.flipped_heads()]
    assert heads == [(0, 0), (0, 2)]
    assert [(lay, h) for lay, h, _, _ in ra.flipped_heads(margin=0.05)] == [(0, 0)]
    assert ra.shift[0, 0] == pytest.approx(-0.4 - 0.5, abs=1e-6)
    with pytest.raises(ValueError, match="margin"):
        ra.flipped_heads(-0.1)
    with pytest.raises(TypeError, match="margin"):
        ra.flipped_heads("0.1")
    with pytest.raises(ValueError, match="two candidates"):
        _ = pretrained.ReferentAttention(
            ("a",), "it", ("x",), (("a",),), np.zeros((1, 1, 1, 1))
        ).preference


# -- loading, caching, bad input ---------------------------------------------------------------


def test_load_minilm_is_cached_frozen_and_built_from_attnbook(model):
    from attnbook.blocks import TransformerBlock
    from attnbook.layers import LayerNorm, MultiHeadAttention

    assert pretrained.load_minilm() is model
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())
    assert all(
        isinstance(layer, TransformerBlock) and not layer.norm_first for layer in model.layers
    )
    assert isinstance(model.layers[0].self_attn, MultiHeadAttention)
    assert isinstance(model.embeddings.norm, LayerNorm) and model.embeddings.norm.eps == 1e-12
    hf_cfg = json.loads((pretrained.minilm_dir() / "config.json").read_text())
    c = model.config
    assert (c.d_model, c.n_heads, c.n_layers, c.d_ff, c.vocab_size, c.max_seq_len) == (
        hf_cfg["hidden_size"],
        hf_cfg["num_attention_heads"],
        hf_cfg["num_hidden_layers"],
        hf_cfg["intermediate_size"],
        hf_cfg["vocab_size"],
        hf_cfg["max_position_embeddings"],
    )
    assert model.max_seq_length == 256


def test_encode_edge_cases_and_bad_input(model):
    one = model.encode("Hello!")
    assert one.shape == (1, 384)
    assert np.array_equal(one, model.encode(["Hello!"]))
    assert model.encode([]).shape == (0, 384)
    with pytest.raises(TypeError, match=r"sentences\[1\]"):
        model.encode(["fine", 3])
    with pytest.raises(TypeError, match="sentences"):
        model.encode(42)
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(TypeError, match="batch_size"):
        model.encode(["a"], batch_size=2.0)
    with pytest.raises(TypeError, match="sentence"):
        model.attentions(["not", "a", "string"])
    with pytest.raises(ValueError, match="banana"):
        pretrained.attention_of_token(pretrained.TIRED, "banana", model=model)
    with pytest.raises(ValueError, match="occurrence"):
        pretrained.attention_of_token(pretrained.TIRED, "it", occurrence=1, model=model)
    with pytest.raises(TypeError, match="occurrence"):
        pretrained.attention_of_token(pretrained.TIRED, "it", occurrence=0.0, model=model)
    with pytest.raises(TypeError, match="candidates"):
        pretrained.referent_attention(candidates="animal", model=model)
    ids, mask, _ = model.tokenize(["a b c"])
    with pytest.raises(ValueError, match=r"attention_mask must be \(B, S\) = \(1, \d+\) like"):
        model(ids, mask[:, :-1])
    with pytest.raises(ValueError, match=r"attention_mask .* must hold only 0 and 1; found \[2\]"):
        model(ids, mask * 2)  # accepted before: any nonzero read as a token
    with pytest.raises(ValueError, match=r"ids must lie in \[0, vocab_size=\d+\)"):
        model(torch.full((1, 3), 10**6))  # was an IndexError inside the embedding
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros((1, 513), dtype=torch.int64))
    with pytest.raises(TypeError, match="ids"):
        model(torch.zeros((1, 3)))
    with pytest.raises(ValueError, match="ids"):
        model(torch.zeros(3, dtype=torch.int64))


def test_encoder_constructor_arguments():
    hf_cfg = json.loads((pretrained.minilm_dir() / "config.json").read_text())
    cfg, _ = pretrained.bert_config_from_hf(hf_cfg)
    with pytest.raises(ValueError, match="max_seq_length"):
        pretrained.BertEncoder(cfg, max_seq_length=1)
    with pytest.raises(TypeError, match="max_seq_length"):
        pretrained.BertEncoder(cfg, max_seq_length=8.0)
    with pytest.raises(TypeError, match="pad_token_id"):
        pretrained.BertEncoder(cfg, pad_token_id=None)
    with pytest.raises(ValueError, match="tokenizer"):
        pretrained.BertEncoder(cfg).encode(["a"])


def test_bert_config_from_hf_rejects_what_it_cannot_build():
    hf_cfg = json.loads((pretrained.minilm_dir() / "config.json").read_text())
    cfg, n_types = pretrained.bert_config_from_hf(hf_cfg)
    assert n_types == 2 and cfg.eps == 1e-12 and cfg.ffn == "gelu" and not cfg.norm_first
    for change, word in (
        ({"model_type": "roberta"}, "model_type"),
        ({"hidden_act": "gelu_new"}, "hidden_act"),
        ({"position_embedding_type": "relative_key"}, "position_embedding"),
    ):
        with pytest.raises(ValueError, match=word):
            pretrained.bert_config_from_hf({**hf_cfg, **change})
    with pytest.raises(ValueError, match="intermediate_size"):
        pretrained.bert_config_from_hf(
            {k: v for k, v in hf_cfg.items() if k != "intermediate_size"}
        )


def test_load_rejects_missing_files_and_wrong_shapes(tmp_path):
    from safetensors.torch import save_file

    with pytest.raises(FileNotFoundError, match="config.json"):
        pretrained.load_minilm(str(tmp_path))
    src = pretrained.minilm_dir()
    for f in ("config.json", "tokenizer.json", "sentence_bert_config.json"):
        (tmp_path / f).symlink_to(src / f)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").symlink_to(src / "1_Pooling" / "config.json")
    save_file(
        {"encoder.layer.0.attention.self.query.weight": torch.zeros(384, 383)},
        str(tmp_path / "model.safetensors"),
    )
    with pytest.raises(ValueError, match=r"\(384, 383\)"):
        pretrained.load_minilm(str(tmp_path))


# -- hidden states, cosine similarity and senses (chapter 2, "the three steps") --------------


@pytest.fixture(scope="module")
def hf_hidden():
    """sentence -> (tokens, (layers + 1, T, d) float32 hidden states) from transformers'
    BertModel with ``output_hidden_states=True`` (embedding output first); memoised."""
    from transformers import AutoModel, AutoTokenizer

    d = str(pretrained.minilm_dir())
    m = AutoModel.from_pretrained(d).eval()
    tok = AutoTokenizer.from_pretrained(d)

    @functools.lru_cache(maxsize=None)
    def run(sentence):
        enc = tok(sentence, return_tensors="pt")
        with torch.no_grad():
            out = m(**enc, output_hidden_states=True)
        h = torch.stack([x[0] for x in out.hidden_states]).numpy()  # (layers + 1, T, d)
        return tok.convert_ids_to_tokens(enc["input_ids"][0].tolist()), h

    return run


def test_hidden_states_equal_transformers(model, hf_hidden):
    for s in [*SENTENCES[:4], *pretrained.APPLE_CONTEXTS]:
        tokens, h = model.hidden_states(s)
        ref_tokens, ref_h = hf_hidden(s)
        assert tokens == ref_tokens
        assert h.shape == (7, len(tokens), 384) and h.dtype == np.float32
        assert np.isfinite(h).all()
        assert_close(h, ref_h, atol=1e-4, rtol=0)
        ids, mask, _ = model.tokenize([s])
        with torch.no_grad():
            last = model(ids, mask)[0].numpy()
        assert_close(h[-1], last, atol=1e-6, rtol=0)  # the same computation as forward


def test_cosine_similarity_hand_values_and_float64_formula():
    # By hand: [1, 0] vs [1, 1] -> 1/sqrt(2); [3, 4] vs [4, 3] -> 24/25; opposite -> -1.
    got = pretrained.cosine_similarity([[1, 0], [3, 4], [1, 2]], [[1, 1], [4, 3], [-2, -4]])
    assert_close(got, np.array([2**-0.5, 24 / 25, -1.0]), atol=1e-15, rtol=0)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 1, 16)).astype(np.float32)
    b = rng.standard_normal((3, 16))
    got = pretrained.cosine_similarity(a, b)  # broadcasts to (5, 3)
    assert got.shape == (5, 3) and got.dtype == np.float64
    ref = np.array(
        [
            [np.dot(x, y) / np.sqrt(np.dot(x, x) * np.dot(y, y)) for y in b.astype(np.float64)]
            for x in a[:, 0].astype(np.float64)
        ]
    )
    assert_close(got, ref, atol=1e-14, rtol=0)


@pytest.mark.parametrize(
    "a, b, exc, match",
    [
        ([1.0, 0.0], [1.0, 0.0, 0.0], ValueError, "same length"),
        (1.0, [1.0], ValueError, "same length"),
        (np.ones((2, 3)), np.ones((4, 3)), ValueError, "do not broadcast"),
        ([0.0, 0.0], [1.0, 0.0], ValueError, "a of shape .* zero vector"),
        ([1.0, 0.0], [np.nan, 0.0], ValueError, "b of shape"),
        (["x", "y"], [1.0, 0.0], TypeError, "a must"),
    ],
)
def test_cosine_similarity_rejects_bad_input(a, b, exc, match):
    with pytest.raises(exc, match=match):
        pretrained.cosine_similarity(a, b)


def test_sense_similarity_equals_independent_recomputation(model, hf_hidden):
    """Anchors and cosines recomputed from transformers' hidden states, in float64."""
    r = pretrained.sense_similarity()
    n = len(pretrained.APPLE_CONTEXTS)
    assert r.similarity.shape == (n, 2, 7) and r.similarity.dtype == np.float64
    assert r.anchor_sentences[1][0] == "Tell me about the company."
    for si, sense in enumerate(pretrained.SENSES):
        vecs = []
        for t in pretrained.ANCHOR_TEMPLATES:
            tokens, h = hf_hidden(t.format(sense))
            vecs.append(h[:, tokens.index(sense)].astype(np.float64))  # (7, d)
        anchor = np.mean(vecs, axis=0)  # (7, d)
        for ci, c in enumerate(pretrained.APPLE_CONTEXTS):
            tokens, h = hf_hidden(c)
            v = h[:, tokens.index("apple")].astype(np.float64)  # (7, d)
            ref = (v * anchor).sum(-1) / (
                np.linalg.norm(v, axis=-1) * np.linalg.norm(anchor, axis=-1)
            )
            assert_close(r.similarity[ci, si], ref, atol=1e-5, rtol=0)
    assert_close(r.margin, r.similarity[:, 0] - r.similarity[:, 1], atol=0, rtol=0)


def test_word_vectors_and_uncased_apple(model, hf_hidden):
    # "Apple" and "apple" are one word piece; at the embedding output (layer 0) two contexts
    # with "apple" at the same position give the same vector (nothing has mixed in yet).
    a = pretrained.word_vectors("I ate an apple.", "apple", model=model)
    b = pretrained.word_vectors("I saw an Apple.", "apple", model=model)
    assert a.shape == (7, 384)
    assert_close(a[0], b[0], atol=1e-6, rtol=0)
    assert np.abs(a[1:] - b[1:]).max() > 1e-2  # the layers see the context
    tokens, h = hf_hidden("I ate an apple.")
    assert_close(a, h[:, tokens.index("apple")], atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(contexts=()), ValueError, "contexts must not be empty"),
        (dict(contexts="I ate an apple."), TypeError, "contexts"),
        (dict(senses=("fruit", 3)), TypeError, r"senses\[1\]"),
        (dict(templates=("no slot",)), ValueError, r"templates\[0\]"),
        (dict(word=b"apple"), TypeError, "word"),
        (dict(contexts=("I ate a pear.",)), ValueError, "'apple' is not among"),
    ],
)
def test_sense_similarity_rejects_bad_input(model, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pretrained.sense_similarity(model=model, **kwargs)
    with pytest.raises(TypeError, match="sentence must be a string"):
        model.hidden_states(["I ate an apple."])
    with pytest.raises(TypeError, match="occurrence"):
        pretrained.word_vectors("I ate an apple.", "apple", occurrence=0.0, model=model)
    with pytest.raises(ValueError, match="occurrence 1"):
        pretrained.word_vectors("I ate an apple.", "apple", occurrence=1, model=model)
    with pytest.raises(ValueError, match="fewer than two|need two"):
        _ = pretrained.SenseSimilarity(
            ("x",), "apple", ("fruit",), (("a",),), np.zeros((1, 1, 7))
        ).margin


def test_cosine_similarity_at_extreme_magnitudes():
    # The cosine does not depend on a vector's length: by hand 1 for parallel vectors and
    # 1/sqrt(2) for [1, 1] vs [1, 0], whatever the common factor. 1e200 squared overflowed
    # (nan), 1e-200 squared underflowed (a "zero vector"), 1e-160 squared lost digits.
    assert pretrained.cosine_similarity([1e200], [1e200]) == 1.0
    assert pretrained.cosine_similarity([-1e200, 0.0], [1e200, 0.0]) == -1.0
    assert pretrained.cosine_similarity([1e-200, 0.0], [1.0, 0.0]) == 1.0
    got = pretrained.cosine_similarity([1e-160, 1e-160], [1e-160, 0.0])
    assert abs(got - 2**-0.5) < 1e-15
    got = pretrained.cosine_similarity([[1e-300, 1e-300], [3e300, 4e300]], [[1.0, 0.0], [4.0, 3.0]])
    assert_close(got, np.array([2**-0.5, 24 / 25]), atol=1e-15, rtol=0)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (
            lambda m: pretrained.word_vectors("I ate an apple.", "apple", model="minilm"),
            TypeError,
            "model must be a BertEncoder",
        ),
        (lambda m: pretrained.sense_similarity(model=3), TypeError, "model must be a BertEncoder"),
        (
            lambda m: pretrained.attention_of_token("it is", "it", model=[m]),
            TypeError,
            "model must be a BertEncoder",
        ),
        (
            lambda m: pretrained.referent_attention(model="x"),
            TypeError,
            "model must be a BertEncoder",
        ),
        (
            lambda m: pretrained.word_vectors("apple", None, model=m),
            TypeError,
            "word must be a string, got None",
        ),
        (
            lambda m: pretrained.word_vectors(None, "apple", model=m),
            TypeError,
            "sentence must be a string",
        ),
        (
            lambda m: pretrained.sense_similarity(templates=["the {} and {x}"], model=m),
            ValueError,
            r"templates\[0\] must hold exactly one '\{\}' and no other",
        ),
        (
            lambda m: pretrained.sense_similarity(templates=["ok {}.", "{} {0}"], model=m),
            ValueError,
            r"templates\[1\] must hold exactly one",
        ),
        (
            lambda m: pretrained.sense_similarity(templates=["{0}"], model=m),
            ValueError,
            r"templates\[0\]",
        ),
        (
            lambda m: pretrained.sense_similarity(templates=["{}}"], model=m),
            ValueError,
            r"templates\[0\] is not a format string",
        ),
        (
            lambda m: pretrained.sense_similarity(templates=["{{}}"], model=m),
            ValueError,
            r"templates\[0\] must hold exactly one",
        ),
        (
            lambda m: m.hidden_states("a\ud800"),
            ValueError,
            r"sentence holds a lone surrogate '\\ud800' at index 1",
        ),
        (lambda m: m.attentions("\udfff"), ValueError, "sentence holds a lone surrogate"),
        (
            lambda m: m.encode(["fine", "a\ud800"]),
            ValueError,
            r"sentences\[1\] holds a lone surrogate",
        ),
        (
            lambda m: pretrained.sense_similarity(contexts=["an apple\ud800"], model=m),
            ValueError,
            r"contexts\[0\] holds a lone surrogate",
        ),
    ],
)
def test_bad_model_word_templates_and_surrogates_are_named(model, call, exc, match):
    with pytest.raises(exc, match=match):
        call(model)


def test_templates_may_hold_literal_braces(model):
    # A literal brace pair '{{' '}}' around the one '{}' is allowed (it is not a field).
    r = pretrained.sense_similarity(
        contexts=("I ate an apple.",),
        senses=("fruit",),
        templates=("{{note}} the {}.",),
        model=model,
    )
    assert r.anchor_sentences == (("{note} the fruit.",),)
