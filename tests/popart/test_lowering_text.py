"""TfIdfVectorizer and StringNormalizer against onnxruntime (and onnx.reference)."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import onnxruntime_reference, reference, run_lowered, single_node_model

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering import lower_model

RNG = np.random.default_rng(5)
# unigrams 2, 3, 5; bigrams (5, 6), (2, 3), (7, 8); trigram (2, 3, 5)
POOL = [2, 3, 5, 5, 6, 2, 3, 7, 8, 2, 3, 5]
COUNTS = [0, 3, 9]
INDEXES = [0, 1, 2, 3, 4, 5, 6]


def _tfidf(x, compiled, **attributes):
    model = single_node_model("TfIdfVectorizer", {"x": x}, opset=9, **attributes)
    feeds = {"x": x}
    expected = onnxruntime_reference(model, feeds)[0]
    # onnx.reference needs weights, and reads them per output column where the spec and
    # onnxruntime have one per pool n-gram: they agree when n-gram j goes to column j.
    if "weights" in attributes and attributes["ngram_indexes"] == INDEXES:
        np.testing.assert_allclose(reference(model, feeds)[0], expected)
    for each in compiled:
        (actual,) = run_lowered(model, feeds, compiled=each)
        assert actual.dtype == np.float32 and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "grams, skip", [((1, 1), 0), ((2, 2), 0), ((1, 2), 3), ((1, 3), 2), ((2, 3), 1)]
)
@pytest.mark.parametrize("shape, dtype", [((14,), np.int64), ((3, 10), np.int32)])
def test_tfidfvectorizer_integer_tokens(mode, weighted, grams, skip, shape, dtype):
    x = RNG.choice([2, 3, 5, 6, 7, 8, 9], size=shape).astype(dtype)
    extra = {"weights": list(RNG.uniform(0.5, 2, 7))} if weighted else {}
    _tfidf(
        x,
        (False, True),
        mode=mode,
        min_gram_length=grams[0],
        max_gram_length=grams[1],
        max_skip_count=skip,
        ngram_counts=COUNTS,
        ngram_indexes=INDEXES,
        pool_int64s=POOL,
        **extra,
    )


def test_tfidfvectorizer_string_tokens_run_outside_xla():
    x = np.array([["a", "b", "c", "a"], ["b", "c", "c", "a"]], object)
    attributes = {
        "mode": "TFIDF",
        "min_gram_length": 1,
        "max_gram_length": 2,
        "max_skip_count": 1,
        "ngram_counts": [0, 2],
        "ngram_indexes": [1, 0, 2, 3],
        "pool_strings": ["a", "c", "b", "c", "c", "a"],
        "weights": [1.0, 2.0, 0.5, 3.0],
    }
    _tfidf(x, (False,), **attributes)
    model = single_node_model("TfIdfVectorizer", {"x": x}, opset=9, **attributes)
    assert not lower_model(model).compilable


@pytest.mark.parametrize(
    "x",
    [
        np.array(["Monday", "tuesday", "WEDNESDAY", "monday", "Ärger"], object),
        np.array([["Monday", "monday", "Straße"]], object),
        np.array(["monday", "MONDAY"], object),
    ],
)
@pytest.mark.parametrize("action", ["LOWER", "UPPER", "NONE"])
@pytest.mark.parametrize("sensitive", [0, 1])
@pytest.mark.parametrize("stopwords", [None, ["monday"], ["Monday", "ärger"]])
def test_stringnormalizer(x, action, sensitive, stopwords):
    extra = {} if stopwords is None else {"stopwords": stopwords}
    model = single_node_model(
        "StringNormalizer",
        {"x": x},
        opset=10,
        case_change_action=action,
        is_case_sensitive=sensitive,
        locale="C.UTF-8",  # the one installed here
        **extra,
    )
    expected = onnxruntime_reference(model, {"x": x})[0]
    (actual,) = run_lowered(model, {"x": x})
    actual = np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(actual)
    assert actual.shape == expected.shape
    assert actual.tolist() == expected.tolist()


def test_stringnormalizer_is_not_compiled_and_needs_strings():
    x = np.array(["a"], object)
    model = single_node_model("StringNormalizer", {"x": x}, opset=10)
    assert not lower_model(model).compilable
    numbers = np.array([1.0], np.float32)
    with pytest.raises(popart_exception, match=r"StringNormalizer.*needs a tensor of strings"):
        run_lowered(single_node_model("StringNormalizer", {"x": numbers}, opset=10), {"x": numbers})


def _strings(model, x, **more):
    feeds = {"x": x, **more}
    expected = reference(model, feeds)
    for wanted, other in zip(expected, onnxruntime_reference(model, feeds), strict=True):
        assert np.array_equal(wanted, other)
    actual = run_lowered(model, feeds)
    for wanted, got in zip(expected, actual, strict=True):
        if got.dtype == object:
            got = np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(got)
        assert got.shape == wanted.shape and got.tolist() == wanted.tolist()


@pytest.mark.parametrize(
    "x, y",
    [
        (np.array(["a", "bé", ""], object), np.array(["1", "2", "3"], object)),
        (np.array([["a"], ["b"]], object), np.array(["x", "yz"], object)),
        (np.array("one", object), np.array(["a", "b"], object)),
    ],
)
def test_stringconcat_broadcasts(x, y):
    model = single_node_model("StringConcat", {"x": x, "y": y}, opset=20)
    _strings(model, x, y=y)


@pytest.mark.parametrize("pattern", [r"[a-z]+@[a-z]+\.com", r"\d{3}", r"(ab)*", r"é."])
def test_regexfullmatch(pattern):
    x = np.array([["ann@mail.com", "123", "abab"], ["1234", "", "éa"]], object)
    _strings(single_node_model("RegexFullMatch", {"x": x}, opset=20, pattern=pattern), x)


@pytest.mark.parametrize(
    "attributes", [{}, {"delimiter": ","}, {"delimiter": ", ", "maxsplit": 1}, {"maxsplit": 2}]
)
def test_stringsplit(attributes):
    # onnxruntime as the reference: onnx.reference keeps the trailing whitespace of the last
    # part after maxsplit splits at whitespace, which the spec removes.
    x = np.array([["a,b,,c", "  two  words here "], ["x, y, z", "  "]], object)
    model = single_node_model("StringSplit", {"x": x}, outputs=2, opset=20, **attributes)
    expected = onnxruntime_reference(model, {"x": x})
    parts, counts = run_lowered(model, {"x": x})
    parts = np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(parts)
    assert parts.tolist() == expected[0].tolist()
    np.testing.assert_array_equal(counts, expected[1])


def test_stringsplit_of_an_empty_string_at_a_delimiter_is_one_empty_part():
    # as onnx.reference (Python's split) has it; onnxruntime gives no part
    x = np.array(["", "a;b"], object)
    model = single_node_model("StringSplit", {"x": x}, outputs=2, opset=20, delimiter=";")
    expected = reference(model, {"x": x})
    parts, counts = run_lowered(model, {"x": x})
    assert [[item.decode() for item in row] for row in parts] == expected[0].tolist()
    np.testing.assert_array_equal(counts, [1, 2])


def test_string_ops_refuse_numbers():
    numbers = np.array([1.0], np.float32)
    model = single_node_model("RegexFullMatch", {"x": numbers}, opset=20, pattern="a")
    with pytest.raises(popart_exception, match=r"RegexFullMatch.*needs tensors of strings"):
        run_lowered(model, {"x": numbers})
