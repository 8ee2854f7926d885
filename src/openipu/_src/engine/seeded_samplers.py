"""Candidate samplers with a fixed seed in compiled programs sample alike every run.

The original's IPU candidate samplers (`tf.random.uniform_candidate_sampler`,
`log_uniform_candidate_sampler`) seed each run from the op's seeds when those are set
(compiler/plugin/poplar/kernels/poprand/candidate_sampler.cc: a constant seed unless both
are 0), so a program samples the same candidates run after run. TensorFlow's kernels keep
a generator that advances. So while a region is built, a seeded sampler is built from
stateless random numbers instead, with TensorFlow's sampling rules (range_sampler.cc): with
replacement, `num_sampled` independent draws; without, draws until that many distinct
values, counting the tries; expected counts `p * num_sampled`, or `1 - (1 - p) ** tries`.
An unseeded sampler keeps TensorFlow's kernel, which samples anew every run, as the IPU's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

SAMPLERS = frozenset({"UniformCandidateSampler", "LogUniformCandidateSampler"})


def rewrite(op: tf.Operation, inputs: tuple[tf.Tensor, ...]) -> list[tf.Tensor] | None:
    """A seeded sampler's outputs from stateless random numbers; None to keep the op."""
    seed = op.get_attr("seed") + op.get_attr("seed2")
    if seed == 0:
        return None
    log_uniform = op.type == "LogUniformCandidateSampler"
    sampled = op.get_attr("num_sampled")
    range_max = op.get_attr("range_max")
    base = tf.constant(seed % (2**63), tf.int64)
    log_range = tf.constant(math.log(range_max + 1), tf.float64)

    def draw(shape: list[int], index: tf.Tensor) -> tf.Tensor:
        key = tf.stack([base, tf.cast(index, tf.int64)])
        if not log_uniform:
            return tf.random.stateless_uniform(
                shape, key, minval=0, maxval=range_max, dtype=tf.int64
            )
        # range_sampler.cc LogUniformSampler: exp(u * log(range + 1)) - 1, modulo the range.
        u = tf.random.stateless_uniform(shape, key, dtype=tf.float64)
        value = tf.cast(tf.exp(u * log_range), tf.int64) - 1
        return tf.math.floormod(value, range_max)

    def probability(values: tf.Tensor) -> tf.Tensor:
        if not log_uniform:
            return tf.fill(tf.shape(values), tf.constant(1.0 / range_max, tf.float32))
        values = tf.cast(values, tf.float64)
        ratio = tf.math.log((values + 2.0) / (values + 1.0)) / log_range
        return tf.cast(ratio, tf.float32)

    if op.get_attr("unique"):
        candidates, tries = _distinct_draws(draw, sampled)
    else:
        candidates, tries = draw([sampled], tf.constant(0)), tf.constant(sampled)

    def expected_count(values: tf.Tensor) -> tf.Tensor:
        p = probability(values)
        if not op.get_attr("unique"):
            return p * float(sampled)
        # range_sampler.cc ExpectedCountHelper: 1 - (1 - p) ** tries, stably.
        return tf.where(
            tf.equal(tries, sampled),
            p * float(sampled),
            -tf.math.expm1(tf.cast(tries, tf.float32) * tf.math.log1p(-p)),
        )

    true_classes = tf.cast(inputs[0], tf.int64)
    return [candidates, expected_count(true_classes), expected_count(candidates)]


def _distinct_draws(
    draw: Callable[[list[int], tf.Tensor], tf.Tensor], count: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """Draws values in turn until `count` distinct ones: them, and the draws it took.

    The draws come in chunks, each examined at once (a loop of one draw per iteration ran
    thousands of iterations, more than TensorFlow's graph loops take here)."""
    chunk = max(count, 16)
    earlier = tf.linalg.band_part(tf.ones([chunk, chunk], tf.bool), -1, 0)  # i >= j
    earlier = tf.logical_and(earlier, tf.logical_not(tf.eye(chunk, dtype=tf.bool)))  # i > j
    slots = tf.range(count)

    def step(
        picked: tf.Tensor, tries: tf.Tensor, batch: tf.Tensor, index: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        values = draw([chunk], index)
        seen = tf.reduce_any(tf.equal(values[:, None], batch[None, :]), axis=1)
        repeated = tf.reduce_any(
            tf.logical_and(tf.equal(values[:, None], values[None, :]), earlier), axis=1
        )
        new = tf.logical_and(tf.logical_not(seen), tf.logical_not(repeated))
        rank = tf.cumsum(tf.cast(new, tf.int32))  # the new values up to each draw
        slot = picked + rank - 1
        taken = tf.logical_and(new, slot < count)
        # Each new value taken fills the next free slot.
        placed = tf.logical_and(taken[:, None], tf.equal(slot[:, None], slots[None, :]))
        filled = tf.reduce_any(placed, axis=0)
        values_at = tf.reduce_sum(tf.where(placed, values[:, None], tf.zeros([], tf.int64)), 0)
        batch = tf.where(filled, values_at, batch)
        # The draws used: up to the one that completes the batch, or the whole chunk.
        last = tf.logical_and(new, tf.equal(slot, count - 1))
        used = tf.where(
            tf.reduce_any(last), tf.cast(tf.argmax(tf.cast(last, tf.int32)), tf.int32) + 1, chunk
        )
        picked = tf.minimum(picked + rank[-1], count)
        return picked, tries + used, batch, index + 1

    _, tries, batch, _ = tf.while_loop(
        lambda picked, *_: picked < count,
        step,
        [tf.constant(0), tf.constant(0), tf.fill([count], tf.constant(-1, tf.int64)), 0],
        name="seeded_candidate_sampler",
    )
    return batch, tries
