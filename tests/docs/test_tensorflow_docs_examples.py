"""The original's TensorFlow documentation examples, ported as user programs.

Each test follows one example of graphcore/tensorflow
`tensorflow/compiler/plugin/poplar/docs/*.py`: the same API calls, structure and
options, on small synthetic data of the shapes and dtypes the example downloads
(MNIST, CIFAR-10, Shakespeare), with fewer steps. Results are checked against numpy
or stock TensorFlow computing the same thing, or against what the .rst documents.

TF1 examples (`tf.disable_v2_behavior()` in the original) build their graph in a fresh
`tf.Graph()` (the `tf1_graph` fixture) and run it in a `tf.compat.v1.Session`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.saved_model.model_utils.mode_keys import EstimatorModeKeys as ModeKeys

from openipu._src.errors import HardwareOnlyError

v1 = tf.compat.v1


def _configure(ipus: int, on_demand: bool = False) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    if on_demand:
        config.device_connection.enable_remote_buffers = True
        config.device_connection.type = ipu.config.DeviceConnectionType.ON_DEMAND
    config.configure_ipu_system()


def _mnist_like(n: int, seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
    y = rng.randint(0, 10, size=(n,)).astype(np.uint8)
    return x, y


def _cifar_like(n: int, seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.randint(0, 256, size=(n, 32, 32, 3)).astype(np.uint8)
    y = rng.randint(0, 10, size=(n, 1)).astype(np.uint8)
    return x, y


def _mnist_dataset(batch_size=32, shuffle_seed=7):
    x_train, y_train = _mnist_like(256)
    x_train = x_train / 255.0
    ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(256, seed=shuffle_seed)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(lambda d, lbl: (tf.cast(d, tf.float32), tf.cast(lbl, tf.int32)))
    return ds.repeat()


def _reference_losses(make_model, weights, steps, lr=0.01, batch_size=32):
    """The same SGD training in stock TensorFlow on the CPU: the loss of each step."""
    model = make_model()
    model.build((None, 28, 28))
    model.set_weights(weights)
    opt = tf.keras.optimizers.SGD(lr)
    losses = []
    iterator = iter(_mnist_dataset(batch_size))

    @tf.function(jit_compile=True)
    def step(features, labels):
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = tf.reduce_mean(
                tf.keras.losses.sparse_categorical_crossentropy(labels, predictions)
            )
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for _ in range(steps):
        losses.append(float(step(*next(iterator))))
    return np.array(losses)


# targeting_tf2_example1.py / targeting_tf2_example2.py


def test_targeting_tf2_example1_strategy_run_of_a_jit_function():
    """targeting_tf2_example1.py: a jit-compiled matmul run through IPUStrategy.run."""
    _configure(1)
    lhs = tf.constant(np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3))
    rhs = tf.constant(np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2))

    @tf.function(jit_compile=True)
    def product(x, y):
        return tf.matmul(x, y)

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        got = strategy.run(product, args=(lhs, rhs))
    np.testing.assert_allclose(got.numpy(), [[22.0, 28.0], [49.0, 64.0]])


def test_targeting_tf2_example2_eager_op_on_the_ipu_device():
    """targeting_tf2_example2.py: an eager matmul under tf.device('/device:IPU:0')."""
    _configure(1)
    lhs = tf.constant([[2.0, 0.0, 1.0], [1.0, 3.0, -1.0]])
    rhs = tf.constant([[1.0, 2.0], [0.5, 4.0], [3.0, -6.0]])
    with tf.device("/device:IPU:0"):
        got = tf.matmul(lhs, rhs)
    np.testing.assert_allclose(got.numpy(), lhs.numpy() @ rhs.numpy(), rtol=1e-6)


# targeting_tf2_example3.py, outfeed_iterator_example.py, outfeed_example.py


def _relu_mlp():
    return tf.keras.Sequential(
        [
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(16, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )


def _softmax_mlp():
    return tf.keras.Sequential(
        [
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(24, activation="relu"),
            tf.keras.layers.Dense(10, activation="softmax"),
        ]
    )


def _train_with_outfeed_loop(make_model, total_steps, steps_per_execution):
    """The training loop of targeting_tf2_example3 and outfeed_iterator_example."""

    @tf.function(jit_compile=True)
    def training_loop(iterator, steps, outfeed, model, optimizer):
        for _ in tf.range(steps):
            features, labels = next(iterator)
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                loss = tf.reduce_mean(
                    tf.keras.losses.sparse_categorical_crossentropy(labels, predictions)
                )
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            outfeed.enqueue(loss)

    _configure(1)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.build((None, 28, 28))
        initial_weights = model.get_weights()
        opt = tf.keras.optimizers.SGD(0.01)
        iterator = iter(_mnist_dataset().prefetch(16))
        outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        losses, means = [], []
        for _ in range(0, total_steps, steps_per_execution):
            strategy.run(
                training_loop, args=(iterator, steps_per_execution, outfeed_queue, model, opt)
            )
            step_losses = [float(loss) for loss in outfeed_queue]
            assert len(step_losses) == steps_per_execution
            means.append(sum(step_losses) / steps_per_execution)
            losses.extend(step_losses)
    return initial_weights, np.array(losses), means


def test_targeting_tf2_example3_training_loop_with_outfeed():
    """targeting_tf2_example3.py: a Keras model trained in an on-device loop, losses outfed.

    As in the example, the logits go to a loss expecting probabilities: the training is
    numerically fragile, so the reference also compiles its step with XLA.
    """
    weights, losses, means = _train_with_outfeed_loop(_relu_mlp, 20, 10)
    expected = _reference_losses(_relu_mlp, weights, 20)
    np.testing.assert_allclose(losses, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(means, expected.reshape(2, 10).mean(axis=1), rtol=1e-4)


def test_outfeed_iterator_example_losses_equal_stock_training():
    """outfeed_iterator_example.py: iterating the outfeed after each execution."""
    weights, losses, _ = _train_with_outfeed_loop(_softmax_mlp, 20, 10)
    np.testing.assert_allclose(
        losses, _reference_losses(_softmax_mlp, weights, 20), rtol=1e-4, atol=1e-5
    )


def test_outfeed_example_dequeued_by_a_thread_while_training():
    """outfeed_example.py: a host thread dequeues the losses while the device loop runs."""
    num_iterations = 12
    _configure(1)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    @tf.function(jit_compile=True)
    def training_step(iterations, iterator, in_model, optimizer):
        for _ in tf.range(iterations):
            features, labels = next(iterator)
            with tf.GradientTape() as tape:
                predictions = in_model(features, training=True)
                loss = tf.reduce_mean(
                    tf.keras.losses.sparse_categorical_crossentropy(labels, predictions)
                )
                grads = tape.gradient(loss, in_model.trainable_variables)
                optimizer.apply_gradients(zip(grads, in_model.trainable_variables, strict=True))
            outfeed_queue.enqueue(loss)

    strategy = ipu.ipu_strategy.IPUStrategyV1()
    with strategy.scope():
        model = _softmax_mlp()
        model.build((None, 28, 28))
        weights = model.get_weights()
        opt = tf.keras.optimizers.SGD(0.01)
        train_iterator = iter(_mnist_dataset())
        seen = []

        def dequeue_thread_fn():
            while len(seen) != num_iterations:
                for loss in outfeed_queue:
                    seen.append(float(loss.numpy()))

        dequeue_thread = threading.Thread(target=dequeue_thread_fn, daemon=True)
        dequeue_thread.start()
        strategy.run(training_step, args=[num_iterations, train_iterator, model, opt])
        dequeue_thread.join(timeout=60)
    assert not dequeue_thread.is_alive()
    np.testing.assert_allclose(
        seen, _reference_losses(_softmax_mlp, weights, num_iterations), rtol=1e-4, atol=1e-5
    )


# function_block1.py, function_block2.py, function_block3.py


def _run_tf1(graph, fetches, init=True, feed_dict=None):
    with v1.Session(graph=graph) as session:
        if init:
            session.run(v1.global_variables_initializer())
        return session.run(fetches, feed_dict)


def test_function_block1_one_outlined_function_reused_with_its_variable(tf1_graph):
    """function_block1.py: an outlined function creating a variable, called twice.

    functions.rst says each invocation uses the same variable. The original traces the
    function at each call into a FuncGraph sharing the outer graph's variable store, so
    as written (no reuse) the second call raises stock TensorFlow's "already exists"
    error; with `reuse=AUTO_REUSE` both calls use the one variable, as documented.
    """
    _configure(1)
    batch = v1.placeholder(np.float32, [4, 64])

    def model(a_batch, reuse):
        @ipu.outlined_function
        def func(a):
            with v1.variable_scope("vs", use_resource=True, reuse=reuse):
                w = v1.get_variable(
                    "w", shape=[64, 64], initializer=v1.glorot_uniform_initializer(dtype=tf.float32)
                )
            return tf.matmul(a, w)

        partial = func(a_batch)
        return func(partial)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        with pytest.raises(ValueError, match="Variable vs/w already exists"):
            ipu.ipu_compiler.compile(lambda b: model(b, None), [batch])

    with tf.Graph().as_default() as graph:
        batch = v1.placeholder(np.float32, [4, 64])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            out = ipu.ipu_compiler.compile(lambda b: model(b, v1.AUTO_REUSE), [batch])
        variables = v1.global_variables()
        assert [v.op.name for v in variables] == ["vs/w"]
        x = np.random.RandomState(1).rand(4, 64).astype(np.float32)
        got, w = _run_tf1(graph, [out[0], variables[0]], feed_dict={batch: x})
    np.testing.assert_allclose(got, x @ w @ w, rtol=1e-4, atol=1e-5)


def test_function_block2_variable_scope_captured_by_closure(tf1_graph):
    """function_block2.py: an outlined function per call, each in its own variable scope."""
    _configure(1)
    batch = v1.placeholder(np.float32, [4, 64])

    def model(a_batch):
        def func(a, variable_scope_name):
            @ipu.outlined_function
            def f(a):
                with v1.variable_scope(variable_scope_name, use_resource=True):
                    w = v1.get_variable(
                        "w",
                        shape=[64, 64],
                        initializer=v1.glorot_uniform_initializer(dtype=tf.float32),
                    )
                return tf.matmul(a, w)

            return f(a)

        partial = func(a_batch, "block1")
        return func(partial, "block2")

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        out = ipu.ipu_compiler.compile(model, [batch])
    variables = {v.op.name: v for v in v1.global_variables()}
    assert sorted(variables) == ["block1/w", "block2/w"]
    x = np.random.RandomState(2).rand(4, 64).astype(np.float32)
    got, w1, w2 = _run_tf1(
        tf1_graph, [out[0], variables["block1/w"], variables["block2/w"]], feed_dict={batch: x}
    )
    np.testing.assert_allclose(got, x @ w1 @ w2, rtol=1e-4, atol=1e-5)


def test_function_block3_variables_passed_as_inputs(tf1_graph):
    """function_block3.py: variables created outside, passed to the outlined function."""
    _configure(1)
    batch = v1.placeholder(np.float32, [4, 64])

    def model(a_batch):
        @ipu.outlined_function
        def func(lhs, rhs):
            return tf.matmul(lhs, rhs)

        with v1.variable_scope("vs", use_resource=True):
            w1 = v1.get_variable(
                "w1", shape=[64, 64], initializer=v1.glorot_uniform_initializer(dtype=tf.float32)
            )
            w2 = v1.get_variable(
                "w2", shape=[64, 64], initializer=v1.glorot_uniform_initializer(dtype=tf.float32)
            )
        partial = func(a_batch, w1)
        return func(partial, w2)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        out = ipu.ipu_compiler.compile(model, [batch])
    variables = {v.op.name: v for v in v1.global_variables()}
    x = np.random.RandomState(3).rand(4, 64).astype(np.float32)
    got, w1, w2 = _run_tf1(
        tf1_graph, [out[0], variables["vs/w1"], variables["vs/w2"]], feed_dict={batch: x}
    )
    np.testing.assert_allclose(got, x @ w1 @ w2, rtol=1e-4, atol=1e-5)


# function_example1.py, function_example2.py


def _numpy_layer_norm(x, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon)


def test_function_example1_outlined_layer_norm_gelu_in_a_loop(tf1_graph):
    """function_example1.py: matmul + layer_norm + gelu outlined, called twice per step."""
    size, steps = 32, 4
    ds = tf.data.Dataset.from_tensors(tf.constant(1.0, shape=[size, size])).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(ds)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        w1 = v1.get_variable(
            "w1", shape=[size, size], initializer=v1.glorot_uniform_initializer(dtype=tf.float32)
        )
        w2 = v1.get_variable(
            "w2", shape=[size, size], initializer=v1.glorot_uniform_initializer(dtype=tf.float32)
        )

        @ipu.outlined_function
        def func(a, b):
            y = tf.matmul(a, b)
            y = ipu.normalization_ops.layer_norm(y)
            return ipu.nn_ops.gelu(y)

        x = func(x, w1)
        x = func(x, w2)
        return outfeed_queue.enqueue(x)

    def my_net():
        return ipu.loops.repeat(steps, body, [], infeed_queue)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run_loop = ipu.ipu_compiler.compile(my_net, inputs=[])
    dequeue_outfeed = outfeed_queue.dequeue()
    _configure(1)
    weights = {v.op.name: v for v in v1.global_variables()}
    with v1.Session() as sess:
        sess.run(infeed_queue.initializer)
        sess.run(v1.global_variables_initializer())
        sess.run(run_loop)
        result = sess.run(dequeue_outfeed)
        w1, w2 = sess.run([weights["w1"], weights["w2"]])

    def gelu(x):  # the tanh approximation
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))

    x = np.ones([size, size], np.float32)
    for w in (w1, w2):
        x = gelu(_numpy_layer_norm(x @ w, 1.53e-5))
    assert result.shape == (steps, size, size)
    for step in range(steps):
        np.testing.assert_allclose(result[step], x, rtol=1e-3, atol=1e-4)


def test_function_example2_serialised_matmul_reduce(tf1_graph):
    """function_example2.py: a matmul + reduce_mean serialised into 10 outlined slices."""
    rows, steps, num_splits = 200, 3, 10
    rng = np.random.RandomState(4)
    data = rng.rand(rows, 64).astype(np.float32)
    ds = tf.data.Dataset.from_tensors(tf.constant(data)).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(ds)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        w = v1.get_variable(
            "w", shape=[64, 128], initializer=v1.glorot_uniform_initializer(dtype=tf.float32)
        )
        x_shape = tf.shape(x)
        slice_size = x_shape[0] // num_splits

        @ipu.outlined_function
        def func(partial_x, w):
            return tf.reduce_mean(tf.matmul(partial_x, w), axis=1)

        result_slices = []
        for i in range(num_splits):
            x_slice = tf.slice(x, [i * slice_size, 0], [slice_size, x_shape[1]])
            result_slices.append(func(x_slice, w))
        return outfeed_queue.enqueue(tf.stack(result_slices))

    def my_net():
        return ipu.loops.repeat(steps, body, [], infeed_queue)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run_loop = ipu.ipu_compiler.compile(my_net, inputs=[])
    dequeue_outfeed = outfeed_queue.dequeue()
    _configure(1)
    (w_var,) = v1.global_variables()
    with v1.Session() as sess:
        sess.run(infeed_queue.initializer)
        sess.run(v1.global_variables_initializer())
        sess.run(run_loop)
        output = sess.run(dequeue_outfeed)
        w = sess.run(w_var)
    expected = (data @ w).mean(axis=1).reshape(num_splits, rows // num_splits)
    assert output.shape == (steps, num_splits, rows // num_splits)
    for step in range(steps):
        np.testing.assert_allclose(output[step], expected, rtol=1e-4, atol=1e-5)


# host_embedding_example.py


def test_host_embedding_example_gru_language_model(tf1_graph):
    """host_embedding_example.py: a host embedding feeding a PopnnGRU, replicated twice.

    The example imports `rnn_ops` from `tensorflow.python.ipu`, which the SDK's
    TensorFlow no longer has (the original's tree has no tensorflow/python/ipu/rnn_ops.py):
    the layer is taken from its new home, ipu_tensorflow_addons.
    """
    from ipu_tensorflow_addons.v1.layers import PopnnGRU

    sequence_length, batch_size, replication_factor = 12, 4, 2
    units, vocab_used = 16, 40
    text_as_int = np.random.RandomState(5).randint(0, vocab_used, size=4000).astype(np.int32)

    ds = tf.data.Dataset.from_tensor_slices(text_as_int)
    ds = ds.batch(sequence_length, drop_remainder=True)
    ds = ds.shuffle(batch_size * batch_size, seed=1)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(ds)

    lr = 0.0001
    optimizer = ipu.cross_replica_optimizer.CrossReplicaOptimizer(
        v1.train.MomentumOptimizer(lr, 0.99)
    )
    embedding = ipu.embedding_ops.create_host_embedding(
        "char_embedding",
        shape=[256, units],
        dtype=tf.float32,
        partition_strategy="TOKEN",
        optimizer_spec=ipu.embedding_ops.HostEmbeddingOptimizerSpec(lr),
    )

    def gru(partials):
        gru_ = PopnnGRU(units)
        partial_t = tf.transpose(partials, [1, 0, 2])
        gru_outputs_t, _ = gru_(partial_t)
        return tf.transpose(gru_outputs_t, [1, 0, 2])

    def model(sequence):
        partial = embedding.lookup(sequence)
        partial = gru(partial)
        partial = tf.reshape(partial, [partial.shape[0], -1])
        partial = v1.layers.dense(partial, 256)
        return tf.nn.softmax(partial)

    def evaluation(sequence):
        label = tf.slice(sequence, [0, sequence_length - 1], [-1, 1])
        sequence = tf.slice(sequence, [0, 0], [-1, sequence_length - 1])
        return tf.keras.losses.sparse_categorical_crossentropy(label, model(sequence))

    def training(loss, sequence):
        loss = evaluation(sequence)
        mean_loss = tf.math.reduce_mean(loss)
        train = optimizer.minimize(loss)
        return mean_loss, train

    def my_net():
        loss = tf.constant(0.0, shape=[])
        return ipu.loops.repeat(3, training, [loss], infeed_queue)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run_loop = ipu.ipu_compiler.compile(my_net, inputs=[])
    _configure(replication_factor)
    table = embedding.get_embedding_tensor()
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(infeed_queue.initializer)
        before = sess.run(table)
        losses = []
        with embedding.register(sess):
            for _ in range(3):
                losses.append(np.asarray(sess.run(run_loop)).ravel()[0])
        after = sess.run(table)
    # A softmax over 256 classes of a freshly initialised model: the loss is near ln(256).
    np.testing.assert_allclose(losses, np.log(256.0), atol=0.5)
    # The host updates only the rows of the characters looked up (the last one of a
    # sequence is only a label): the rows of unused tokens are unchanged.
    np.testing.assert_array_equal(after[vocab_used:], before[vocab_used:])
    assert not np.array_equal(after[:vocab_used], before[:vocab_used])


# ipu_estimator_example.py, ipu_pipeline_estimator_example.py


def _generator_input_fn(x_train, y_train, batch_size):
    def input_fn():
        def generator():
            return zip(x_train, y_train, strict=True)

        types = (x_train.dtype, y_train.dtype)
        shapes = (x_train.shape[1:], y_train.shape[1:])
        dataset = v1.data.Dataset.from_generator(generator, types, shapes)
        dataset = dataset.prefetch(len(x_train)).cache()
        dataset = dataset.repeat()
        dataset = dataset.shuffle(len(x_train))
        return dataset.batch(batch_size, drop_remainder=True)

    return input_fn


def _calc_batch_size(num_examples, batches_per_loop, batch_size):
    while num_examples % (batch_size * batches_per_loop) != 0:
        batch_size -= 1
    return batch_size


def _normalise(x, y):
    return x.astype("float32") / 255.0, y.astype("int32")


def _checkpoint_eval_loss(model_dir, build_logits, x_test, y_test):
    """Stock TensorFlow on the CPU: the test loss and accuracy of the final checkpoint."""
    with tf.Graph().as_default():
        logits = build_logits(tf.constant(x_test))
        loss = v1.losses.sparse_softmax_cross_entropy(labels=y_test, logits=logits)
        saver = v1.train.Saver(v1.global_variables())
        with v1.Session() as session:
            saver.restore(session, tf.train.latest_checkpoint(model_dir))
            loss_value, logit_values = session.run([loss, logits])
    accuracy = np.mean(np.argmax(logit_values, axis=-1) == y_test.ravel())
    return loss_value, accuracy


def _estimator_run_config(model_dir, ipus: int, iterations_per_loop: int, **ipu_run_config):
    """The estimator examples' RunConfig: `ipus` IPUs, summaries every step."""
    ipu_options = ipu.config.IPUConfig()
    ipu_options.auto_select_ipus = ipus
    return ipu.ipu_run_config.RunConfig(
        ipu_run_config=ipu.ipu_run_config.IPURunConfig(
            iterations_per_loop=iterations_per_loop, ipu_options=ipu_options, **ipu_run_config
        ),
        log_step_count_steps=2,
        save_summary_steps=1,
        model_dir=str(model_dir),
    )


def _train_then_evaluate(estimator, model_dir, train, test, batch_size, training_steps,
                         batches_per_loop, build_logits):  # fmt: skip
    """The estimator examples: train on CIFAR-like data (`train`: samples, seed), then
    evaluate on `test`, whose metrics must be the final checkpoint's. Returns the
    evaluation's batch size."""
    x_train, y_train = _normalise(*_cifar_like(*train))
    estimator.train(
        input_fn=_generator_input_fn(x_train, y_train, batch_size), steps=training_steps
    )
    assert tf.train.load_variable(str(model_dir), "global_step") == training_steps
    x_test, y_test = _normalise(*_cifar_like(*test))
    test_batch_size = _calc_batch_size(len(x_test), batches_per_loop, batch_size)

    def input_fn():
        dataset = v1.data.Dataset.from_tensor_slices((x_test, y_test))
        return dataset.batch(test_batch_size, drop_remainder=True)

    metrics = estimator.evaluate(input_fn=input_fn, steps=len(x_test) // test_batch_size)
    expected_loss, expected_accuracy = _checkpoint_eval_loss(
        str(model_dir), build_logits, x_test, y_test
    )
    np.testing.assert_allclose(metrics["loss"], expected_loss, rtol=1e-4)
    np.testing.assert_allclose(metrics["accuracy"], expected_accuracy, rtol=1e-6)
    return test_batch_size


def _cifar_cnn():
    layers = tf.keras.layers
    model = tf.keras.Sequential()
    model.add(layers.Conv2D(4, (3, 3), padding="same"))
    model.add(layers.Activation("relu"))
    model.add(layers.Conv2D(4, (3, 3)))
    model.add(layers.Activation("relu"))
    model.add(layers.MaxPooling2D(pool_size=(2, 2)))
    model.add(layers.Dropout(0.25))
    model.add(layers.Conv2D(8, (3, 3), padding="same"))
    model.add(layers.Activation("relu"))
    model.add(layers.Conv2D(8, (3, 3)))
    model.add(layers.Activation("relu"))
    model.add(layers.MaxPooling2D(pool_size=(2, 2)))
    model.add(layers.Dropout(0.25))
    model.add(layers.Flatten())
    model.add(layers.Dense(16))
    model.add(layers.Activation("relu"))
    model.add(layers.Dropout(0.5))
    model.add(layers.Dense(10))
    return model


def test_ipu_estimator_example_cifar_cnn_train_then_evaluate(tmp_path):
    """ipu_estimator_example.py: IPUEstimator training and evaluating a small CNN."""
    batch_size, iterations_per_loop, training_steps, replicas = 8, 4, 8, 1

    def model_fn(features, labels, mode, params):
        logits = _cifar_cnn()(features, training=mode == ModeKeys.TRAIN)
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == ModeKeys.EVAL:
            predictions = tf.argmax(input=logits, axis=-1)
            eval_metric_ops = {
                "accuracy": v1.metrics.accuracy(labels=labels, predictions=predictions)
            }
            return ipu.ipu_estimator.IPUEstimatorSpec(
                mode, loss=loss, eval_metric_ops=eval_metric_ops
            )
        if mode == ModeKeys.TRAIN:
            optimizer = v1.train.GradientDescentOptimizer(params["learning_rate"])
            if params["replicas"] > 1:
                optimizer = ipu.cross_replica_optimizer.CrossReplicaOptimizer(optimizer)
            train_op = optimizer.minimize(loss=loss)
            return ipu.ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)
        raise NotImplementedError(mode)

    estimator = ipu.ipu_estimator.IPUEstimator(
        config=_estimator_run_config(
            tmp_path, replicas, iterations_per_loop, num_replicas=replicas
        ),
        model_fn=model_fn,
        params={"learning_rate": 0.01, "replicas": replicas},
    )
    test_batch_size = _train_then_evaluate(
        estimator, tmp_path, (64, 0), (32, 1), batch_size, training_steps,
        replicas * iterations_per_loop, lambda x: _cifar_cnn()(x, training=False),
    )  # fmt: skip
    assert test_batch_size == 8


def _pipeline_stages(is_training, mode):
    layers = tf.keras.layers

    def stage1(features, labels):
        partial = layers.Conv2D(4, (3, 3), padding="same")(features)
        partial = layers.Activation("relu")(partial)
        partial = layers.Conv2D(4, (3, 3))(partial)
        partial = layers.Activation("relu")(partial)
        partial = layers.MaxPooling2D(pool_size=(2, 2))(partial)
        partial = layers.Dropout(0.25)(partial, training=is_training)
        return partial, labels

    def stage2(partial, labels):
        partial = layers.Conv2D(8, (3, 3), padding="same")(partial)
        partial = layers.Activation("relu")(partial)
        partial = layers.Conv2D(8, (3, 3))(partial)
        partial = layers.Activation("relu")(partial)
        partial = layers.MaxPooling2D(pool_size=(2, 2))(partial)
        partial = layers.Dropout(0.25)(partial, training=is_training)
        partial = layers.Flatten()(partial)
        partial = layers.Dense(16)(partial)
        partial = layers.Activation("relu")(partial)
        partial = layers.Dropout(0.5)(partial, training=is_training)
        logits = layers.Dense(10)(partial)
        if mode is None:
            return logits
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == ModeKeys.TRAIN:
            return loss
        if mode == ModeKeys.EVAL:
            predictions = tf.argmax(input=logits, axis=1, output_type=tf.int32)
            return loss, predictions, labels
        raise NotImplementedError(mode)

    return stage1, stage2


def test_ipu_pipeline_estimator_example_two_stage_cnn(tmp_path):
    """ipu_pipeline_estimator_example.py: IPUPipelineEstimator over two IPUs."""
    batch_size, accumulation, iterations_per_loop, training_steps = 4, 4, 4, 8

    def model_fn(mode, params):
        stage1, stage2 = _pipeline_stages(mode == ModeKeys.TRAIN, mode)

        def optimizer_function(loss):
            optimizer = v1.train.GradientDescentOptimizer(params["learning_rate"])
            return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        def eval_metrics_fn(loss, predictions, labels):
            return {
                "loss": loss,
                "accuracy": v1.metrics.accuracy(predictions=predictions, labels=labels),
            }

        return ipu.ipu_pipeline_estimator.IPUPipelineEstimatorSpec(
            mode,
            computational_stages=[stage1, stage2],
            optimizer_function=optimizer_function,
            eval_metrics_fn=eval_metrics_fn,
            gradient_accumulation_count=params["gradient_accumulation_count"],
        )

    estimator = ipu.ipu_pipeline_estimator.IPUPipelineEstimator(
        config=_estimator_run_config(tmp_path, 2, iterations_per_loop, num_shards=2),
        model_fn=model_fn,
        params={"learning_rate": 0.01, "gradient_accumulation_count": accumulation},
    )

    def logits(x):
        stage1, stage2 = _pipeline_stages(False, None)
        return stage2(*stage1(x, None))

    _train_then_evaluate(
        estimator, tmp_path, (32, 2), (16, 3), batch_size, training_steps,
        iterations_per_loop, logits,
    )  # fmt: skip


# perf_training_example.py


def test_perf_training_example_infeed_outfeed_dict_in_tf2():
    """perf_training_example.py: loops.repeat over an infeed, outfeeding a dict, in TF2."""
    ds = tf.data.Dataset.from_tensors(tf.constant(1.0, shape=[800]))
    ds = ds.map(lambda x: [x, x])
    ds = ds.repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(ds)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(counter, x1, x2):
        outfeed_queue.enqueue({"d1": x1 + x2, "d2": x1 - x2})
        return counter + 1

    @tf.function(jit_compile=True)
    def my_net():
        return ipu.loops.repeat(10, body, [0], infeed_queue)

    _configure(1)
    strategy = ipu.ipu_strategy.IPUStrategyV1()
    with strategy.scope():
        infeed_queue.initializer  # noqa: B018 - as the example: a no-op in TF2
        count_out = strategy.run(my_net)
        result = outfeed_queue.dequeue()
    assert int(np.asarray(count_out).ravel()[0]) == 10
    np.testing.assert_array_equal(result["d1"], np.full([10, 800], 2.0, np.float32))
    np.testing.assert_array_equal(result["d2"], np.zeros([10, 800], np.float32))


# pre_compile_example.py (run by pre_compile_example_runner.py)

PRE_COMPILE_PROGRAM = """
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

cfg = ipu.utils.IPUConfig()
cfg.auto_select_ipus = 1
cfg.device_connection.type = ipu.utils.DeviceConnectionType.PRE_COMPILE
cfg.device_connection.version = "ipu2"
cfg.device_connection.enable_remote_buffers = True
cfg.configure_ipu_system()

rng = np.random.RandomState(0)
x_train = rng.randint(0, 256, size=(320, 28, 28)).astype(np.uint8) / 255.0
y_train = rng.randint(0, 10, size=(320,)).astype(np.uint8)
ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(320)
ds = ds.batch(32, drop_remainder=True)
ds = ds.map(lambda d, l: (tf.cast(d, tf.float32), tf.cast(l, tf.float32))).repeat()

strategy = ipu.ipu_strategy.IPUStrategyV1()
with strategy.scope():
    model = keras.Sequential([
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                  optimizer=tf.keras.optimizers.SGD(), steps_per_execution=10)
    history = model.fit(ds, steps_per_epoch=20)
print("LOSS", history.history["loss"])
"""


@pytest.mark.slow
def test_pre_compile_example_traces_its_programs_and_returns_zeros(tmp_path):
    """pre_compile_example.py with its runner: PRE_COMPILE mode and an executable cache."""
    cache_dir = tmp_path / "cache"  # nonexistent: the run must create it, as the runner checks
    env = dict(os.environ)
    env["TF_POPLAR_FLAGS"] = f"--executable_cache_path={cache_dir} " + env.get(
        "TF_POPLAR_FLAGS", ""
    ).replace("--use_ipu_model", "")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PRE_COMPILE_PROGRAM)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # compiling.rst: "any numerical results returned are set to zero". (The original also
    # leaves a Poplar executable per program in the cache; openipu's cache is TensorFlow's
    # persistent XLA cache, filled when a program runs, and a pre-compiled one never runs.)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("LOSS")]
    assert json.loads(line.split(" ", 1)[1]) == [0.0]


# exporting_*_example.py


def _load_and_call(directory, value):
    loaded = tf.saved_model.load(str(directory))
    signature = loaded.signatures["serving_default"]
    outputs = signature(tf.constant(value))
    (output,) = outputs.values()
    return output.numpy()


def test_exporting_model_example_single_step(tmp_path):
    """exporting_model_example.py: serving.export_single_step of x * 2, then run it."""
    saved_model_directory = tmp_path / "my_saved_model_ipu" / "001"

    @tf.function
    def predict_step(x):
        return x * 2

    _configure(1, on_demand=True)
    input_shape = (4,)
    signature = (tf.TensorSpec(shape=input_shape, dtype=np.float32),)
    iterations = 4
    runtime_func = ipu.serving.export_single_step(
        predict_step, str(saved_model_directory), iterations, signature
    )
    assert (saved_model_directory / "saved_model.pb").exists()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for i in range(iterations):
            input_data = np.ones(input_shape, dtype=np.float32) * i
            got = runtime_func(input_data)
            np.testing.assert_array_equal(np.asarray(got).ravel(), input_data * 2)
    got = _load_and_call(saved_model_directory, np.full(input_shape, 3.0, np.float32))
    np.testing.assert_array_equal(got, np.full(input_shape, 6.0))


def test_exporting_model_preprocessing_postprocessing_example(tmp_path):
    """exporting_model_preprocessing_postprocessing_example.py: abs, x * 2, sum compiled."""
    saved_model_directory = tmp_path / "my_saved_model_ipu" / "003"

    @tf.function
    def predict_step(x):
        return tf.reduce_sum(tf.abs(x) * 2)

    _configure(1, on_demand=True)
    input_shape = (4,)
    signature = (tf.TensorSpec(shape=input_shape, dtype=np.float32),)
    iterations = 4
    runtime_func = ipu.serving.export_single_step(
        predict_step, str(saved_model_directory), iterations, signature
    )
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for i in range(iterations):
            input_data = np.ones(input_shape, dtype=np.float32) * (-1.0 * i)
            np.testing.assert_allclose(np.asarray(runtime_func(input_data)).ravel(), [8.0 * i])


def _string_preprocessing():
    @tf.function
    def preprocessing_step(x):
        def transform_fn(item):
            return tf.constant(1.0) if item == "graphcore" else tf.random.uniform(shape=())

        return tf.stack([transform_fn(elem) for elem in tf.unstack(x)])

    return preprocessing_step


WORDS = [
    ["graphcore", "red", "blue", "yellow", "graphcore", "purple"],
    ["apple", "banana", "graphcore", "orange", "pineapple", "graphcore"],
]


def _check_string_model(runtime_func, exact, low, high):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for words in WORDS:
            got = np.asarray(runtime_func(tf.constant(words, dtype=tf.string))).ravel()
            is_graphcore = np.array([w == "graphcore" for w in words])
            np.testing.assert_allclose(got[is_graphcore], exact)
            assert np.all((got[~is_graphcore] >= low) & (got[~is_graphcore] < high))


def test_exporting_model_preprocessing_postprocessing_cpu_example(tmp_path):
    """exporting_model_preprocessing_postprocessing_cpu_example.py: string pre/post on CPU."""
    saved_model_directory = tmp_path / "my_saved_model_ipu" / "004"

    @tf.function
    def predict_step(x):
        return x * 2

    @tf.function
    def postprocessing_step(x):
        return tf.abs(x)

    _configure(1, on_demand=True)
    input_shape = (6,)
    runtime_func = ipu.serving.export_single_step(
        predict_step,
        str(saved_model_directory),
        4,
        (tf.TensorSpec(shape=input_shape, dtype=np.float32),),
        preprocessing_step=_string_preprocessing(),
        preprocessing_step_signature=(tf.TensorSpec(shape=input_shape, dtype=tf.string),),
        postprocessing_step=postprocessing_step,
        postprocessing_step_signature=(tf.TensorSpec(shape=input_shape, dtype=np.float32),),
    )
    # "graphcore" -> 1.0 -> 2.0; other words -> uniform [0, 1) -> [0, 2).
    _check_string_model(runtime_func, 2.0, 0.0, 2.0)


def test_exporting_pipelined_model_example(tmp_path):
    """exporting_pipelined_model_example.py: serving.export_pipeline of two stages."""
    saved_model_directory = tmp_path / "my_saved_model_ipu" / "002"

    def stage1(x):
        return x * 2

    def stage2(x):
        return x + 3

    _configure(2, on_demand=True)
    input_shape = (4,)
    iterations = 4
    runtime_func = ipu.serving.export_pipeline(
        [stage1, stage2],
        str(saved_model_directory),
        iterations=iterations,
        device_mapping=[0, 1],
        predict_step_signature=(tf.TensorSpec(shape=input_shape, dtype=np.float32),),
    )
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for i in range(iterations):
            input_data = np.ones(input_shape, dtype=np.float32) * i
            got = np.asarray(runtime_func(input_data)).ravel()
            np.testing.assert_array_equal(got, input_data * 2 + 3)
    got = _load_and_call(saved_model_directory, np.full(input_shape, 1.0, np.float32))
    np.testing.assert_array_equal(got, np.full(input_shape, 5.0))


def test_exporting_pipelined_model_preprocessing_postprocessing_example(tmp_path):
    """exporting_pipelined_model_preprocessing_postprocessing_example.py: four stages."""
    saved_model_directory = tmp_path / "my_saved_model_ipu" / "005"

    def preprocessing_stage(x):
        return tf.abs(x)

    def stage1(x):
        return x * 2

    def stage2(x):
        return x + 3

    def postprocessing_stage(x):
        return tf.reduce_sum(x)

    _configure(4, on_demand=True)
    input_shape = (4,)
    iterations = 8
    runtime_func = ipu.serving.export_pipeline(
        [preprocessing_stage, stage1, stage2, postprocessing_stage],
        str(saved_model_directory),
        iterations=iterations,
        device_mapping=[0, 1, 2, 3],
        predict_step_signature=(tf.TensorSpec(shape=input_shape, dtype=np.float32),),
    )
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for i in range(iterations):
            input_data = np.ones(input_shape, dtype=np.float32) * (-1.0 * i)
            got = np.asarray(runtime_func(input_data)).ravel()
            np.testing.assert_allclose(got, [4 * (2.0 * i + 3)])


@pytest.mark.slow
def test_exporting_pipelined_model_preprocessing_postprocessing_cpu_example(tmp_path):
    """exporting_pipelined_model_preprocessing_postprocessing_cpu_example.py."""
    saved_model_directory = tmp_path / "my_saved_model_ipu" / "006"

    def stage1(x):
        return x * 2

    def stage2(x):
        return x + 3

    @tf.function
    def postprocessing_step(x):
        return tf.abs(x)

    _configure(2, on_demand=True)
    input_shape = (6,)
    runtime_func = ipu.serving.export_pipeline(
        [stage1, stage2],
        str(saved_model_directory),
        iterations=4,
        device_mapping=[0, 1],
        predict_step_signature=(tf.TensorSpec(shape=input_shape, dtype=np.float32),),
        preprocessing_step=_string_preprocessing(),
        preprocessing_step_signature=(tf.TensorSpec(shape=input_shape, dtype=tf.string),),
        postprocessing_step=postprocessing_step,
        postprocessing_step_signature=(tf.TensorSpec(shape=input_shape, dtype=np.float32),),
    )
    # "graphcore" -> 1.0 -> 5.0; other words -> uniform [0, 1) -> [3, 5).
    _check_string_model(runtime_func, 5.0, 3.0, 5.0)


# embedded_application_runtime_example.py


def test_embedded_application_runtime_example(tf1_graph, tmp_path):
    """embedded_application_runtime_example.py: compile to a file, run it by engine name."""
    element_count, loop_count = 4, 16
    ds = tf.data.Dataset.from_tensors(tf.constant(1.0, shape=[element_count])).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(ds)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed_queue.enqueue({"result": x * 2})

    def my_net():
        return ipu.loops.repeat(loop_count, body, [], infeed_queue)

    _configure(1)
    poplar_exec_filepath = os.path.join(str(tmp_path), "application.poplar_exec")
    compile_op = ipu.application_compile_op.experimental_application_compile_op(
        my_net, output_path=poplar_exec_filepath
    )
    with v1.Session() as sess:
        path = sess.run(compile_op)
    assert os.fsdecode(path) == poplar_exec_filepath
    assert os.path.isfile(poplar_exec_filepath)

    ctx = ipu.embedded_runtime.embedded_runtime_start(poplar_exec_filepath, [], "my_engine")
    input_placeholder = v1.placeholder(tf.float32, shape=[element_count])
    call_result = ipu.embedded_runtime.embedded_runtime_call([input_placeholder], ctx)
    for i in range(4):
        with v1.Session() as sess:
            input_data = np.ones(element_count, dtype=np.float32) * i
            got = sess.run(call_result, feed_dict={input_placeholder: input_data})
        (value,) = got.values() if isinstance(got, dict) else got
        np.testing.assert_array_equal(value, input_data * 2)


# tutorial_attributes_example.py, custom_add_inplace.py, tutorial_custom_codelet.py:
# precompiled Poplar code needs the hardware; openipu says so clearly.


@pytest.fixture
def poplar_library(tmp_path):
    library = tmp_path / "libcustom_op.so"
    library.write_bytes(b"\x7fELF")
    codelet = tmp_path / "custom_codelet.gp"
    codelet.write_bytes(b"")
    return str(library), str(codelet)


def _assert_needs_hardware(build):
    with pytest.raises(HardwareOnlyError, match="precompiled_user_op needs real IPU hardware"):
        build()


def test_tutorial_attributes_example_needs_the_hardware(tf1_graph, poplar_library):
    """tutorial_attributes_example.py: a precompiled matmul op with JSON attributes."""
    _configure(1)
    lib_path, _ = poplar_library
    with tf.device("cpu"):
        x_ph = v1.placeholder(np.float32, [16, 32])
        y_ph = v1.placeholder(np.float32, [32, 8])

    def my_net(x, y):
        x_shape = x.get_shape().as_list()
        y_shape = y.get_shape().as_list()
        outputs = {
            "output_types": [x.dtype],
            "output_shapes": [tf.TensorShape([x_shape[0], y_shape[1]])],
        }
        attributes = {"serialization_factor": 2, "lhs_shape": x_shape, "rhs_shape": y_shape}
        return ipu.custom_ops.precompiled_user_op(
            [x, y], lib_path, attributes=json.dumps(attributes), outs=outputs
        )

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        _assert_needs_hardware(lambda: ipu.ipu_compiler.compile(my_net, [x_ph, y_ph]))


def test_custom_add_inplace_needs_the_hardware(tf1_graph, poplar_library):
    """custom_add_inplace.py: an in-place precompiled add assigned to a variable."""
    _configure(1)
    lib_path, _ = poplar_library
    with tf.device("cpu"):
        x_data = v1.placeholder(np.float32, [4])

    def add_op(x, y):
        outputs = {"output_types": [tf.float32], "output_shapes": [tf.TensorShape([4])]}
        return ipu.custom_ops.precompiled_user_op([x, y], lib_path, outs=outputs)

    def my_net(x):
        inplace = v1.get_variable("weights", shape=[4], initializer=v1.zeros_initializer())
        inplace_add = v1.assign(inplace, add_op(inplace, x)[0])
        with tf.control_dependencies([inplace_add]):
            return inplace

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        _assert_needs_hardware(lambda: ipu.ipu_compiler.compile(my_net, [x_data]))


def test_tutorial_custom_codelet_needs_the_hardware(tf1_graph, poplar_library):
    """tutorial_custom_codelet.py: a precompiled rotate op with a custom codelet (.gp)."""
    _configure(1)
    lib_path, gp_path = poplar_library
    with tf.device("cpu"):
        x_data = v1.placeholder(np.float32, [4])
        y_data = v1.placeholder(np.float32, [4])
        p_angle = v1.placeholder(np.float32, [4])

    def rotate_op(x, y, a):
        outputs = {
            "output_types": [tf.float32, tf.float32],
            "output_shapes": [tf.TensorShape([4]), tf.TensorShape([4])],
        }
        return ipu.custom_ops.precompiled_user_op([x, y, a], lib_path, gp_path, outs=outputs)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        _assert_needs_hardware(
            lambda: ipu.ipu_compiler.compile(rotate_op, [x_data, y_data, p_angle])
        )
