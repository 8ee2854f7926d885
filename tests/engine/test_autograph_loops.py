"""Autograph `for _ in tf.range(n)` loops reading tf.data iterators, fused into device loops.

Every program runs twice, with the rewrite (`engine/autograph_loops.py`) and
without it (`OPENIPU_FUSE_ITERATOR_LOOPS=0`, autograph's own lowering, the
region running as a graph), and is checked against a numpy reference. The
region's debug log tells whether the fused program compiled to XLA.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu
from tensorflow.python.autograph.operators import control_flow
from tensorflow.python.data.ops import iterator_ops

from openipu._src.engine import autograph_loops

REGION_LOGGER = "openipu._src.engine.region"
LOOPS_LOGGER = "openipu._src.engine.autograph_loops"
FEATURES, CLASSES, BATCH = 8, 3, 4


def _read_next(iterator):
    """The iterator's next element, read in a function: an iterator made in an IPUStrategy
    scope refuses eager reads (the original's ipu_infeed_queue.IPUOwnedIterator)."""
    return tf.function(lambda: next(iterator))()


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


@pytest.fixture
def fusion(monkeypatch, caplog):
    """`fusion(enabled)` switches the rewrite; `fusion.modes()` lists the regions' modes since."""

    class Switch:
        def __call__(self, enabled: bool) -> None:
            monkeypatch.setenv(autograph_loops.FUSE_ENV, "1" if enabled else "0")
            caplog.clear()

        def modes(self) -> list[str]:
            return [
                r.getMessage().split(" runs as ")[1].split()[0]
                for r in caplog.records
                if r.name == REGION_LOGGER and " runs as " in r.getMessage()
            ]

        def reasons(self) -> list[str]:
            """What the rewrite logged, then why regions run as graphs."""
            return [
                r.getMessage() for r in caplog.records if r.name in (LOOPS_LOGGER, REGION_LOGGER)
            ]

    caplog.set_level(logging.DEBUG, logger=REGION_LOGGER)
    caplog.set_level(logging.DEBUG, logger=LOOPS_LOGGER)
    return Switch()


def _classification_data(batches: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batches * BATCH, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=batches * BATCH).astype(np.int32)
    return x, y


def _batches(x, y):
    return [(x[i : i + BATCH], y[i : i + BATCH]) for i in range(0, len(x) - BATCH + 1, BATCH)]


def _dataset(x, y) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True).repeat()


def _initial_weights(seed: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.normal(scale=0.5, size=(FEATURES, 16)).astype(np.float32),
        rng.normal(scale=0.1, size=16).astype(np.float32),
        rng.normal(scale=0.5, size=(16, CLASSES)).astype(np.float32),
        rng.normal(scale=0.1, size=CLASSES).astype(np.float32),
    ]


def _mlp() -> keras.Model:
    """Built on its first call (inside the loop), from fixed initial weights."""
    w1, b1, w2, b2 = (keras.initializers.Constant(w) for w in _initial_weights())
    return keras.Sequential(
        [
            keras.layers.Dense(16, "relu", kernel_initializer=w1, bias_initializer=b1),
            keras.layers.Dense(CLASSES, kernel_initializer=w2, bias_initializer=b2),
        ]
    )


def _loss(model, x, y):
    logits = model(x, training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def _train_step(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        loss = _loss(model, x, y)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    return loss


def _numpy_sgd(weights, batches, learning_rate):
    """Losses per step and final weights of the MLP trained with plain SGD, in numpy."""
    w1, b1, w2, b2 = (w.astype(np.float64) for w in weights)
    losses = []
    for x, y in batches:
        hidden = x @ w1 + b1
        active = np.maximum(hidden, 0)
        logits = active @ w2 + b2
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        losses.append(-np.log(probabilities[rows, y]).mean())
        grad_logits = probabilities.copy()
        grad_logits[rows, y] -= 1
        grad_logits /= len(y)
        grad_hidden = (grad_logits @ w2.T) * (hidden > 0)
        w2 = w2 - learning_rate * active.T @ grad_logits
        b2 = b2 - learning_rate * grad_logits.sum(axis=0)
        w1 = w1 - learning_rate * x.T @ grad_hidden
        b1 = b1 - learning_rate * grad_hidden.sum(axis=0)
    return np.array(losses), [w1, b1, w2, b2]


def _training_program(strategy, make_optimizer, mode=ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL):
    """The published program shape; returns `run(steps)` -> the outfeed's losses, and the model."""
    x, y = _classification_data(10)
    with strategy.scope():
        model, optimizer = _mlp(), make_optimizer()
        iterator = iter(_dataset(x, y))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)

        @tf.function(jit_compile=True)
        def training_loop(iterator, steps):
            for _ in tf.range(steps):
                features, labels = next(iterator)
                outfeed.enqueue(_train_step(model, optimizer, features, labels))

    def run(steps):
        strategy.run(training_loop, args=[iterator, steps])
        return outfeed.dequeue().numpy()

    return run, model, iterator


def test_keras_sgd_loop_is_one_xla_computation_and_matches_numpy(strategy, fusion):
    x, y = _classification_data(10)
    batches = _batches(x, y)
    for enabled in (True, False):
        fusion(enabled)
        run, model, iterator = _training_program(strategy, lambda: keras.optimizers.SGD(0.1))
        first = run(tf.constant(6))
        skipped = _read_next(iterator)  # the iterator stays the source of truth between calls
        second = run(tf.constant(5))
        np.testing.assert_array_equal(skipped[0].numpy(), batches[6][0])

        expected_losses, expected_weights = _numpy_sgd(
            _initial_weights(), batches[:6] + batches[7:] + batches[:2], 0.1
        )
        np.testing.assert_allclose(np.concatenate([first, second]), expected_losses, rtol=1e-4)
        for ours, theirs in zip(model.get_weights(), expected_weights, strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
        assert set(fusion.modes()) == ({"xla"} if enabled else {"graph"}), fusion.modes()


def test_keras_adam_slots_created_in_the_loop_match_the_unfused_program(strategy, fusion):
    results = {}
    for enabled in (True, False):
        fusion(enabled)
        run, model, _ = _training_program(strategy, lambda: keras.optimizers.Adam(0.01))
        losses = np.concatenate([run(tf.constant(4)), run(tf.constant(7))])
        results[enabled] = losses, model.get_weights()
        assert set(fusion.modes()) == ({"xla"} if enabled else {"graph"})
    (fused_losses, fused_weights), (losses, weights) = results[True], results[False]
    assert fused_losses.shape == (11,)
    np.testing.assert_allclose(fused_losses, losses, rtol=1e-5)
    for ours, theirs in zip(fused_weights, weights, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_last_mode_outfeed_and_zero_steps(strategy, fusion):
    x, y = _classification_data(10)
    batches = _batches(x, y)
    expected_losses, _ = _numpy_sgd(_initial_weights(), batches[:5], 0.1)
    for enabled in (True, False):
        fusion(enabled)
        run, _, iterator = _training_program(
            strategy, lambda: keras.optimizers.SGD(0.1), ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST
        )
        np.testing.assert_allclose(run(tf.constant(3)), expected_losses[2], rtol=1e-4)
        np.testing.assert_allclose(run(tf.constant(2)), expected_losses[4], rtol=1e-4)
        with pytest.raises(tf.errors.FailedPreconditionError, match="Trying to get the last value"):
            run(tf.constant(0))
        np.testing.assert_array_equal(_read_next(iterator)[0].numpy(), batches[5][0])


def _counting_dataset(count: int, width: int = 2) -> tf.data.Dataset:
    values = np.arange(count * width, dtype=np.float32).reshape(count, width)
    return tf.data.Dataset.from_tensor_slices(values).repeat()


@pytest.mark.parametrize("enabled", [True, False])
def test_several_reads_dict_elements_and_two_iterators(strategy, fusion, enabled):
    pairs = np.arange(60, dtype=np.float32).reshape(30, 2)
    labels = np.arange(30, dtype=np.int32) * 10
    fusion(enabled)
    with strategy.scope():
        first = iter(_counting_dataset(30))
        second = iter(tf.data.Dataset.from_tensor_slices({"pair": pairs, "label": labels}).repeat())
        total = tf.Variable(0.0)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def loop(first, second, steps):
            for step in tf.range(steps):
                a = next(first)
                element = next(second)
                b = first.get_next()
                total.assign_add(tf.reduce_sum(a) - tf.reduce_sum(b))
                outfeed.enqueue(
                    {
                        "a": a,
                        "b": b,
                        "pair": element["pair"],
                        "label": element["label"] + tf.cast(step, tf.int32),
                    }
                )

        strategy.run(loop, args=[first, second, tf.constant(4)])
        strategy.run(loop, args=[first, second, tf.constant(2)])
    out = {key: value.numpy() for key, value in outfeed.dequeue().items()}
    reads = np.arange(60, dtype=np.float32).reshape(30, 2)
    np.testing.assert_array_equal(out["a"], reads[0:12:2])
    np.testing.assert_array_equal(out["b"], reads[1:12:2])
    np.testing.assert_array_equal(out["pair"], pairs[:6])
    np.testing.assert_array_equal(out["label"], labels[:6] + [0, 1, 2, 3, 0, 1])
    assert float(total.numpy()) == -4.0 * 6
    np.testing.assert_array_equal(_read_next(first).numpy(), reads[12])
    assert int(_read_next(second)["label"]) == labels[6]
    assert set(fusion.modes()) == ({"xla"} if enabled else {"graph"})


@pytest.mark.parametrize("enabled", [True, False])
def test_static_range_python_int_steps_and_loops_in_sequence(strategy, fusion, enabled):
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(enabled)
    with strategy.scope():
        iterator = iter(_counting_dataset(20))
        later = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def loops(iterator, steps):
            total = tf.zeros([2])
            for _ in tf.range(4):
                total += next(iterator)
            for _ in tf.range(steps):
                later.enqueue(next(iterator))
            return total

        total = strategy.run(loops, args=[iterator, 3])
    np.testing.assert_array_equal(total.numpy(), values[:4].sum(axis=0))
    np.testing.assert_array_equal(later.dequeue().numpy(), values[4:7])
    np.testing.assert_array_equal(_read_next(iterator).numpy(), values[7])
    assert set(fusion.modes()) == ({"xla"} if enabled else {"graph"})


def test_next_after_a_fused_loop_reads_the_following_element(strategy, fusion):
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(True)
    with strategy.scope():
        iterator = iter(_counting_dataset(20))

        @tf.function(jit_compile=True)
        def loop(iterator, steps):
            total = tf.zeros([2])
            for _ in tf.range(steps):
                total += next(iterator)
            return total, next(iterator)

        total, after = strategy.run(loop, args=[iterator, tf.constant(3)])
    np.testing.assert_array_equal(total.numpy(), values[:3].sum(axis=0))
    np.testing.assert_array_equal(after.numpy(), values[3])
    np.testing.assert_array_equal(_read_next(iterator).numpy(), values[4])
    assert any("is fused" in reason for reason in fusion.reasons())
    assert fusion.modes() == ["graph"]  # the read after the loop is a host op


# Programs the rewrite leaves to autograph: (body, reason in the log, expected totals of 3 calls).


def _in_a_conditional(iterator, steps):
    total = tf.zeros([2])
    if steps > 0:
        for _ in tf.range(steps):
            total += next(iterator)
    return total


def _in_another_loop(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(2):
        for _ in tf.range(steps):
            total += next(iterator)
    return total


def _outer_and_inner_reads(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(steps):
        total += next(iterator)
        for _ in tf.range(1):
            total += 10.0 * next(iterator)
    return total


def _trip_count_from_the_region(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(steps * 2 - steps):
        total += next(iterator)
    return total


def _with_break(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(100):
        total += next(iterator)
        if total[0] >= 0 or steps < 0:  # after the first element
            break
    return total


def _read_before_the_loop(iterator, steps):
    total = 100.0 * next(iterator)
    for _ in tf.range(steps):
        total += next(iterator)
    return total


def _read_in_a_conditional_in_the_body(iterator, steps):
    total = tf.zeros([2])
    for step in tf.range(steps):
        if step >= 0:
            total += next(iterator)
    return total


FALLBACKS = {
    "loop in a conditional": (_in_a_conditional, "not at the top level"),
    "loop in another loop": (_in_another_loop, "reads no tf.data iterator"),
    "reads in an inner loop too": (_outer_and_inner_reads, "in nested control flow"),
    "trip count computed in the region": (_trip_count_from_the_region, "inside the region"),
    "break": (_with_break, "extra loop test"),
    "iterator read before the loop": (_read_before_the_loop, "earlier in the region"),
    "read in a conditional": (_read_in_a_conditional_in_the_body, "reads no tf.data iterator"),
}


def _expected_fallback_totals(name: str, values: np.ndarray, steps: list[int]) -> list:
    totals, position = [], 0
    for count in steps:
        if name == "loop in another loop":
            totals.append(values[position : position + 2 * count].sum(axis=0))
            position += 2 * count
        elif name == "reads in an inner loop too":
            picked = values[position : position + 2 * count]
            totals.append(picked[0::2].sum(axis=0) + 10.0 * picked[1::2].sum(axis=0))
            position += 2 * count
        elif name == "break":
            totals.append(values[position])
            position += 1
        elif name == "iterator read before the loop":
            totals.append(
                100.0 * values[position] + values[position + 1 : position + 1 + count].sum(axis=0)
            )
            position += 1 + count
        else:
            totals.append(values[position : position + count].sum(axis=0))
            position += count
    return totals


@pytest.mark.parametrize("name", list(FALLBACKS))
def test_programs_the_rewrite_leaves_alone_give_the_same_results(strategy, fusion, name):
    body, reason = FALLBACKS[name]
    values = np.arange(200, dtype=np.float32).reshape(100, 2)
    steps = [3, 2, 4]
    expected = _expected_fallback_totals(name, values, steps)
    for enabled in (True, False):
        fusion(enabled)
        with strategy.scope():
            iterator = iter(_counting_dataset(100))
            loop = tf.function(body, jit_compile=True)
            totals = [
                strategy.run(loop, args=[iterator, tf.constant(count)]).numpy() for count in steps
            ]
        for ours, theirs in zip(totals, expected, strict=True):
            np.testing.assert_array_equal(ours, theirs)
        assert set(fusion.modes()) == {"graph"}
        if enabled:
            assert not any("is fused" in r for r in fusion.reasons()), fusion.reasons()
            assert any(reason in r for r in fusion.reasons()), fusion.reasons()


def test_dataset_of_unknown_shapes_is_read_per_iteration(strategy, fusion):
    values = np.arange(30, dtype=np.float32).reshape(15, 2)
    dataset = tf.data.Dataset.from_tensor_slices(values).batch(4).repeat()  # partial batches
    fusion(True)
    with strategy.scope():
        iterator = iter(dataset)

        @tf.function(jit_compile=True)
        def loop(iterator, steps):
            total = tf.zeros([2])
            for _ in tf.range(steps):
                total += tf.reduce_sum(next(iterator), axis=0)
            return total

        total = strategy.run(loop, args=[iterator, tf.constant(5)])
    np.testing.assert_array_equal(total.numpy(), values.sum(axis=0) + values[:4].sum(axis=0))
    assert any("not dense tensors of static shapes" in r for r in fusion.reasons())
    assert fusion.modes() == ["graph"]


def test_iterator_created_in_the_function_is_not_fused(strategy, fusion):
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(True)
    with strategy.scope():

        @tf.function(jit_compile=True)
        def loop(steps):
            iterator = iter(_counting_dataset(20))
            total = tf.zeros([2])
            for _ in tf.range(steps):
                total += next(iterator)
            return total

        total = strategy.run(loop, args=[tf.constant(3)])
    np.testing.assert_array_equal(total.numpy(), values[:3].sum(axis=0))
    assert any("created inside the region" in r for r in fusion.reasons())


def test_hooks_only_exist_while_a_region_is_traced(strategy, fusion):
    original_for = control_flow._tf_range_for_stmt
    original_next = iterator_ops.OwnedIterator._next_internal
    seen = []
    fusion(True)
    with strategy.scope():
        iterator = iter(_counting_dataset(4))

        @tf.function(jit_compile=True)
        def loop(iterator):
            seen.append(control_flow._tf_range_for_stmt is original_for)
            total = tf.zeros([2])
            for _ in tf.range(2):
                total += next(iterator)
            return total

        strategy.run(loop, args=[iterator])
    assert seen and not any(seen)
    assert control_flow._tf_range_for_stmt is original_for
    assert iterator_ops.OwnedIterator._next_internal is original_next

    plain_iterator = iter(_counting_dataset(4))

    @tf.function
    def plain(iterator):
        total = tf.zeros([2])
        for _ in tf.range(3):
            total += next(iterator)
        return total

    np.testing.assert_array_equal(plain(plain_iterator).numpy(), [6.0, 9.0])


def _losses_in_a_tensor_array_of_steps(iterator, steps):
    sums = tf.TensorArray(tf.float32, size=steps)
    for step in tf.range(steps):
        sums = sums.write(step, tf.reduce_sum(next(iterator)))
    return sums.stack()


def _range_also_used_as_a_tensor(iterator, steps):
    indices = tf.range(steps)
    total = tf.zeros([2])
    for _ in indices:
        total += next(iterator)
    return total * tf.cast(tf.reduce_sum(indices), tf.float32)


def _steps_used_as_a_shape(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(steps):
        total += next(iterator)
    return total + tf.reduce_sum(tf.ones([steps]))


def _static_loop_and_steps_as_a_shape(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(2):
        total += next(iterator)
    return total + tf.reduce_sum(tf.ones([steps]))


def _steps_used_as_a_shape_in_the_body(iterator, steps):
    total = tf.zeros([2])
    for _ in tf.range(steps):
        total += next(iterator) + tf.reduce_sum(tf.ones([steps])) - tf.cast(steps, tf.float32)
    return total


# name: (body, expected result from the elements it reads and the steps, why it is a graph)
RUN_TIME_SHAPES = {
    "tensor array of steps": (
        _losses_in_a_tensor_array_of_steps,
        lambda values, steps: values[:steps].sum(axis=1),
        "is used by TensorArray",
    ),
    "range used as a tensor": (
        _range_also_used_as_a_tensor,
        lambda values, steps: values[:steps].sum(axis=0) * sum(range(steps)),
        "is used by range",
    ),
    "steps used as a shape": (
        _steps_used_as_a_shape,
        lambda values, steps: values[:steps].sum(axis=0) + steps,
        "is used by",
    ),
    "static loop, steps used as a shape": (
        _static_loop_and_steps_as_a_shape,
        lambda values, steps: values[:2].sum(axis=0) + steps,
        "is used by ones",
    ),
    "steps used as a shape in the body": (
        _steps_used_as_a_shape_in_the_body,
        lambda values, steps: values[:steps].sum(axis=0),
        "the body of the loop over range:0 uses",
    ),
}


@pytest.mark.parametrize("name", list(RUN_TIME_SHAPES))
def test_run_time_values_used_as_shapes_keep_the_region_a_graph(strategy, fusion, name):
    """XLA needs static shapes: a fused region where steps may be a shape runs as a graph."""
    body, expected, reason = RUN_TIME_SHAPES[name]
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(True)
    with strategy.scope():
        iterator = iter(_counting_dataset(20))
        loop = tf.function(body, jit_compile=True)
        first = strategy.run(loop, args=[iterator, tf.constant(3)])
        position = 2 if name.startswith("static") else 3
        second = strategy.run(loop, args=[iterator, tf.constant(4)])
    np.testing.assert_array_equal(first.numpy(), expected(values, 3))
    np.testing.assert_array_equal(second.numpy(), expected(values[position:], 4))
    assert any("is fused" in r for r in fusion.reasons())
    assert fusion.modes() == ["graph"]
    assert any(reason in r for r in fusion.reasons()), fusion.reasons()


def test_other_threads_keep_autograph_lowering_while_a_region_is_traced(strategy, fusion):
    """The hooks are process-wide attributes, but act only for the thread tracing the region."""
    import threading

    other_thread_ops = []

    def trace_plain_function():
        iterator = iter(_counting_dataset(4))

        @tf.function
        def plain(iterator):
            total = tf.zeros([2])
            for _ in tf.range(3):
                total += next(iterator)
            return total

        graph = plain.get_concrete_function(iterator).graph
        while_op = next(
            op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")
        )
        body = graph._get_function(while_op.get_attr("body").name).definition  # noqa: SLF001
        other_thread_ops.extend(node.op for node in body.node_def)

    fusion(True)
    with strategy.scope():
        iterator = iter(_counting_dataset(4))

        @tf.function(jit_compile=True)
        def loop(iterator):
            total = tf.zeros([2])
            for _ in tf.range(2):
                thread = threading.Thread(target=trace_plain_function)
                thread.start()
                thread.join()
                total += next(iterator)
            return total

        np.testing.assert_array_equal(strategy.run(loop, args=[iterator]).numpy(), [2.0, 4.0])
    assert "IteratorGetNext" in other_thread_ops
    assert any("is fused" in r for r in fusion.reasons())


@pytest.mark.parametrize("enabled", [True, False])
def test_a_dataset_that_runs_out_raises_out_of_range(strategy, fusion, enabled):
    """Fused, an execution runs all its iterations or none (its data is read first, as an IPU
    program's infeed would be); unfused, the iterations that had data run before the error."""
    values = np.arange(10, dtype=np.float32).reshape(5, 2)
    fusion(enabled)
    with strategy.scope():
        iterator = iter(tf.data.Dataset.from_tensor_slices(values))  # five elements, no repeat
        total = tf.Variable(tf.zeros([2]))

        @tf.function(jit_compile=True)
        def loop(iterator, steps):
            for _ in tf.range(steps):
                total.assign_add(next(iterator))

        strategy.run(loop, args=[iterator, tf.constant(3)])
        np.testing.assert_array_equal(total.numpy(), values[:3].sum(axis=0))
        with pytest.raises(tf.errors.OutOfRangeError):
            strategy.run(loop, args=[iterator, tf.constant(3)])
    ran = values[:3] if enabled else values
    np.testing.assert_array_equal(total.numpy(), ran.sum(axis=0))
    with pytest.raises(tf.errors.OutOfRangeError):
        _read_next(iterator)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_value_first_defined_in_the_loop_is_returned(strategy, fusion, enabled):
    """Autograph stages such a body once more in a scratch graph to learn the value's type."""
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(enabled)
    with strategy.scope():
        iterator = iter(_counting_dataset(20))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def loop(iterator, steps):
            for _ in tf.range(steps):
                last = next(iterator) * 2.0
                outfeed.enqueue(last)
            return last

        last = strategy.run(loop, args=[iterator, tf.constant(3)])
    np.testing.assert_array_equal(last.numpy(), values[2] * 2.0)
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), values[:3] * 2.0)
    assert set(fusion.modes()) == ({"xla"} if enabled else {"graph"})


def test_one_iterator_through_two_handles_is_read_in_program_order(strategy, fusion):
    """Fused, the host reads in the loop's order. (Unfused, TensorFlow orders reads through
    different handles of one iterator in no particular way.)"""
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(True)
    with strategy.scope():
        iterator = iter(_counting_dataset(20))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def loop(as_argument, steps):
            for _ in tf.range(steps):
                first = next(as_argument)
                second = next(iterator)  # the same iterator, captured from Python
                third = next(as_argument)
                outfeed.enqueue((first, second, third))

        strategy.run(loop, args=[iterator, tf.constant(2)])
        strategy.run(loop, args=[iterator, tf.constant(1)])
    first, second, third = (t.numpy() for t in outfeed.dequeue())
    np.testing.assert_array_equal(first, values[[0, 3, 6]])
    np.testing.assert_array_equal(second, values[[1, 4, 7]])
    np.testing.assert_array_equal(third, values[[2, 5, 8]])
    assert set(fusion.modes()) == {"xla"}


@pytest.mark.parametrize("enabled", [True, False])
def test_device_loop_with_an_outfeed_inside_a_fused_loop(strategy, fusion, enabled):
    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    fusion(enabled)
    with strategy.scope():
        iterator = iter(_counting_dataset(20))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def loop(iterator, steps):
            for _ in tf.range(steps):
                element = next(iterator)

                def body(count, element):
                    outfeed.enqueue(count + element)
                    return count + 1.0, element

                ipu.loops.repeat(2, body, [0.0, element])

        strategy.run(loop, args=[iterator, tf.constant(3)])
    expected = [values[i] + offset for i in range(3) for offset in (0.0, 1.0)]
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), expected)
    assert set(fusion.modes()) == ({"xla"} if enabled else {"graph"})
