"""The scenario of `test_poprun_popdist_strategy_test.py`, run by poprun."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from poprun_scenarios import main, scenario  # noqa: E402
from tensorflow.python import ipu  # noqa: E402
from tensorflow.python.ipu.distributed import host_collective_ops, popdist_strategy  # noqa: E402

import popdist  # noqa: E402
import popdist.tensorflow  # noqa: E402


def _dataset(length, batch_size=1):
    features = tf.constant(1.0, shape=[32])
    labels = tf.constant(0.2, shape=[1])
    dataset = tf.data.Dataset.from_tensors((features, labels)).repeat(length)
    dataset = dataset.shard(num_shards=popdist.getNumInstances(), index=popdist.getInstanceIndex())
    return dataset.batch(batch_size, drop_remainder=True)


def _training_step(enable_asynchronous_callbacks):
    config = ipu.config.IPUConfig()
    popdist.tensorflow.set_ipu_config(config, ipus_per_replica=1)
    config.configure_ipu_system()
    strategy = popdist_strategy.PopDistStrategy()
    with strategy.scope():
        inputs = tf.keras.Input(shape=(32,))
        model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))
        model.set_asynchronous_callbacks(enable_asynchronous_callbacks)

        @tf.function(jit_compile=True)
        def loss_fn(_, y_pred):
            return y_pred

        model.compile(
            loss=loss_fn,
            optimizer=tf.keras.optimizers.SGD(learning_rate=0.5),
            steps_per_execution=popdist.getNumTotalReplicas(),
        )
        model.build((1, 32))
        initial = [w.copy() for w in model.get_weights()]
        model.fit(_dataset(20), epochs=1, verbose=False)
        model.evaluate(_dataset(20), verbose=False)
        predictions = model.predict(_dataset(20, batch_size=4), verbose=False)
    # Each instance's 10 elements make 2 batches of 4.
    assert predictions.shape == (8, 1), predictions.shape
    # Training moved the weights, alike on every instance.
    for before, after in zip(initial, model.get_weights(), strict=True):
        assert not np.allclose(before, after)
        gathered = host_collective_ops.allgather(tf.constant(after)).numpy()
        np.testing.assert_allclose(gathered[0], gathered[1], rtol=1e-6)
    ipu.config.reset_ipu_configuration()


@scenario
def test_single_multi_replica_training_step_keras():
    for enable_asynchronous_callbacks in (True, False):
        _training_step(enable_asynchronous_callbacks)


if __name__ == "__main__":
    main()
