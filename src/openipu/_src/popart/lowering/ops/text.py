"""Text: TfIdfVectorizer, StringNormalizer, StringConcat, RegexFullMatch, StringSplit.

Tensors of strings are TensorFlow's, which XLA cannot compile: those nodes run outside XLA
(TfIdfVectorizer of integer tokens compiles).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import to_numpy_function


@register_op("TfIdfVectorizer", since=9)
class TfIdfVectorizer(Op):
    """Counts the pool's n-grams in each row, then weighs them.

    An n-gram takes n tokens ``skip + 1`` apart, for skips 0..max_skip_count; unigrams count
    once (no skip applies to them). Pool n-grams are listed by length: those of length n start
    at item ngram_counts[n - 1] of the pool, and ngram_indexes gives each its output column.
    """

    def setup(self) -> None:
        attrs = self.attrs
        if attrs.mode not in ("TF", "IDF", "TFIDF"):
            self.bad_attribute("mode", f"must be TF, IDF or TFIDF, not {attrs.mode!r}")
        strings = attrs.get("pool_strings")
        integers = attrs.get("pool_int64s")
        if bool(strings) == bool(integers):
            self.bad_attribute("pool_int64s", "or pool_strings must be given (one of them)")
        self.compilable = not strings
        pool = np.array(strings, object) if strings else np.array(integers, np.int64)
        starts = [int(start) for start in attrs.ngram_counts]
        # Pool n-grams by length: n -> [count, n] array
        self.grams: dict[int, np.ndarray] = {}
        for length, start in enumerate(starts, start=1):
            end = starts[length] if length < len(starts) else len(pool)
            if (end - start) % length:
                self.bad_attribute("ngram_counts", f"splits {length}-grams off a partial gram")
            self.grams[length] = pool[start:end].reshape(-1, length)
        total = sum(len(grams) for grams in self.grams.values())
        indexes = [int(index) for index in attrs.ngram_indexes]
        if len(indexes) != total or min(indexes, default=0) < 0:
            self.bad_attribute("ngram_indexes", f"needs {total} non-negative output columns")
        self.width = max(indexes, default=-1) + 1
        # [pool n-grams, output columns]: where each n-gram's count goes
        self.columns = np.zeros((total, self.width), np.float32)
        self.columns[np.arange(total), indexes] = 1
        # One weight per pool n-gram (not per output column), as the spec says.
        weights = attrs.get("weights")
        if weights and len(weights) != total:
            self.bad_attribute("weights", f"needs one weight per pool n-gram ({total})")
        self.weights = np.array(weights, np.float32) if weights else None

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        attrs = self.attrs
        rows = x if x.shape.rank == 2 else tf.reshape(x, [1, -1])
        length = rows.shape[1]
        counts = []
        for n, grams in self.grams.items():
            found = tf.zeros([tf.shape(rows)[0], len(grams)], tf.float32)
            if attrs.min_gram_length <= n <= attrs.max_gram_length and len(grams):
                pool = tf.constant(grams.astype(object) if grams.dtype == object else grams)
                if pool.dtype != tf.string:
                    pool = tf.cast(pool, rows.dtype)
                for skip in range(attrs.max_skip_count + 1 if n > 1 else 1):
                    span = (skip + 1) * (n - 1)
                    if span >= length:
                        break
                    starts = length - span
                    # [B, starts, n]: token j of the n-gram at each start
                    tokens = tf.stack(
                        [rows[:, j * (skip + 1) : j * (skip + 1) + starts] for j in range(n)], -1
                    )
                    equal = tf.equal(tokens[:, :, None, :], pool[None, None])
                    matches = tf.reduce_all(equal, axis=-1)  # [B, starts, count]
                    found += tf.reduce_sum(tf.cast(matches, tf.float32), axis=1)
            counts.append(found)
        frequencies = tf.concat(counts, axis=1)  # [B, pool n-grams]
        if attrs.mode == "IDF":
            frequencies = tf.cast(frequencies > 0, tf.float32)
        if attrs.mode != "TF" and self.weights is not None:
            frequencies = frequencies * tf.constant(self.weights)
        frequencies = tf.matmul(frequencies, tf.constant(self.columns))
        return frequencies if x.shape.rank == 2 else tf.reshape(frequencies, [-1])


def change_case(values: np.ndarray, action: str) -> np.ndarray:
    """LOWER or UPPER, one character at a time as onnxruntime (towlower/towupper): a character
    whose full Unicode mapping has several characters (ß -> SS) is kept."""

    def change(character: str) -> str:
        changed = character.lower() if action == "LOWER" else character.upper()
        return changed if len(changed) == 1 else character

    def convert(item: bytes) -> bytes:
        return "".join(change(c) for c in item.decode("utf-8")).encode("utf-8")

    return np.array([convert(item) for item in values.reshape(-1)], object).reshape(values.shape)


@register_op("StringNormalizer", since=10)
class StringNormalizer(Op):
    """Removes stop words (whole elements) and changes case; an input left empty becomes
    one empty string."""

    compilable = False  # strings, and the output length depends on the values

    def setup(self) -> None:
        action = self.attrs.case_change_action
        if action not in ("LOWER", "UPPER", "NONE"):
            self.bad_attribute("case_change_action", f"must be LOWER, UPPER or NONE: {action!r}")

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        if x.dtype != tf.string:
            raise self.error(f"needs a tensor of strings, not {x.dtype.name}")
        if x.shape.rank == 2 and x.shape[0] != 1:
            raise self.error(f"needs shape [C] or [1, C], not {x.shape.as_list()}")
        flat = tf.reshape(x, [-1])
        stopwords = list(self.attrs.get("stopwords") or [])
        if stopwords:
            sensitive = bool(self.attrs.is_case_sensitive)

            def key(values: tf.Tensor) -> tf.Tensor:
                return values if sensitive else tf.strings.lower(values, encoding="utf-8")

            stops = key(tf.constant(stopwords))
            stop = tf.reduce_any(tf.equal(key(flat)[:, None], stops[None, :]), axis=1)
            flat = tf.boolean_mask(flat, tf.logical_not(stop))
        action = self.attrs.case_change_action
        if action != "NONE":
            (flat,) = to_numpy_function(
                lambda values: change_case(values, action), [flat], [tf.string]
            )
        # Nothing left: one empty string.
        flat = tf.cond(tf.size(flat) > 0, lambda: flat, lambda: tf.constant([""]))
        return flat if x.shape.rank == 1 else tf.reshape(flat, [1, -1])


class StringOp(Op):
    """An op of string tensors: TensorFlow runs them, XLA cannot."""

    compilable = False

    def strings(self, *values: tf.Tensor) -> None:
        for value in values:
            if value.dtype != tf.string:
                raise self.error(f"needs tensors of strings, not {value.dtype.name}")


@register_op("StringConcat", since=20)
class StringConcat(StringOp):
    def compute(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        self.strings(x, y)
        shape = tf.broadcast_dynamic_shape(tf.shape(x), tf.shape(y))
        return tf.strings.join([tf.broadcast_to(x, shape), tf.broadcast_to(y, shape)])


@register_op("RegexFullMatch", since=20)
class RegexFullMatch(StringOp):
    """Whether each whole string matches ``pattern`` (RE2 syntax, as the spec and TensorFlow)."""

    def compute(self, x: tf.Tensor) -> tf.Tensor:
        self.strings(x)
        return tf.strings.regex_full_match(x, self.attrs.pattern)


def split_strings(values: np.ndarray, delimiter: str | None, maxsplit: int | None):
    """Python's str.split of each string, padded with "" to the longest: (parts, counts). An
    empty string is one empty part, as onnx.reference has it (onnxruntime: no part)."""
    limit = -1 if maxsplit is None else maxsplit

    def split(text: str) -> list[str]:
        if delimiter:
            return text.split(delimiter, limit)
        # At whitespace runs, without leading or trailing whitespace (the last part's too)
        return [part.strip() for part in text.split(None, limit)]

    parts = [split(item.decode("utf-8")) for item in values.reshape(-1)]
    width = max((len(part) for part in parts), default=0)
    table = np.full((len(parts), width), b"", object)
    for row, pieces in enumerate(parts):
        table[row, : len(pieces)] = [piece.encode("utf-8") for piece in pieces]
    counts = np.array([len(pieces) for pieces in parts], np.int64).reshape(values.shape)
    return table.reshape(*values.shape, width), counts


@register_op("StringSplit", since=20)
class StringSplit(StringOp):
    """Splits each string at ``delimiter`` (at runs of whitespace without one), at most
    ``maxsplit`` times: the parts padded with "" to the most parts, and each string's count."""

    def compute(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        self.strings(x)
        delimiter, maxsplit = self.attrs.get("delimiter"), self.attrs.get("maxsplit")
        parts, counts = to_numpy_function(
            lambda values: split_strings(values, delimiter, maxsplit), [x], [tf.string, tf.int64]
        )
        parts.set_shape([*x.shape, None])
        counts.set_shape(x.shape)
        return parts, counts
