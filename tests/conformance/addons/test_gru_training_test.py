"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/v1/layers/gru_training_test.py`.

The TF1 `PopnnGRU` (and `PopnnDynamicGRU` with sequence lengths), trained on the IPU,
lowers its loss step by step as TensorFlow's `GRUCell` under `dynamic_rnn` does;
`reset_after=True` (no TensorFlow cell to compare with) trains too; a negative
`availableMemoryProportion` in the forward or backward options is refused with
PopLibs' message, a valid one trains.
"""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.compat import v1
from tensorflow.python import ipu
from v1_rnn_training import BATCH, HIDDEN, SEQ_LEN, inputs, labels, losses, train_op

from ipu_tensorflow_addons.v1 import layers


@pytest.fixture(autouse=True)
def ipu_system():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _popnn(cls, reset_after=False, **kwargs):
    def program(x, state, y, seq_lens=None):
        layer = cls(
            HIDDEN,
            dtype=np.float32,
            weights_initializer=v1.zeros_initializer(),
            bias_initializer=v1.zeros_initializer(),
            reset_after=reset_after,
            **kwargs,
        )
        args = (x,) if seq_lens is None else (x, seq_lens)
        outputs, _ = layer(*args, initial_state=state, training=True)
        return train_op(outputs, y)

    return program


def _tf_gru(x, state, y, seq_lens=None):
    cell = v1.nn.rnn_cell.GRUCell(
        HIDDEN,
        name="gru_cell",
        kernel_initializer=v1.zeros_initializer(),
        bias_initializer=v1.zeros_initializer(),
    )
    outputs, _ = v1.nn.dynamic_rnn(
        cell, x, sequence_length=seq_lens, dtype=np.float32, initial_state=state, time_major=True
    )
    return train_op(outputs, y)


STATES = [np.zeros([BATCH, HIDDEN], np.float32)]
pytestmark = pytest.mark.filterwarnings("ignore:`tf.nn.rnn_cell.GRUCell` is deprecated")


@pytest.mark.follows("testTraining")
def test_training():
    x, y = inputs(), labels()
    ours = losses(_popnn(layers.PopnnGRU), x, y, STATES)
    theirs = losses(_tf_gru, x, y, STATES, on_ipu=False)
    assert ours[0] > ours[-1] and theirs[0] > theirs[-1]
    np.testing.assert_allclose(ours, theirs, rtol=0.05)


@pytest.mark.follows("testTrainingWithSeqLen")
def test_training_with_seq_len():
    seq_lens = np.array([(i % SEQ_LEN) + 1 for i in range(BATCH)], np.int32)
    x, y = inputs(), labels()
    ours = losses(_popnn(layers.PopnnDynamicGRU), x, y, STATES, seq_lens)
    theirs = losses(_tf_gru, x, y, STATES, seq_lens, on_ipu=False)
    assert ours[0] > ours[-1] and theirs[0] > theirs[-1]
    np.testing.assert_allclose(ours, theirs, rtol=0.05)


@pytest.mark.follows("testTraining_resetAfter")
def test_training_reset_after():
    ours = losses(_popnn(layers.PopnnGRU, reset_after=True), inputs(), labels(), STATES)
    assert ours[0] > ours[-1]


@pytest.mark.follows("testGRUWithAvailableMemoryProportionFwd")
@pytest.mark.follows("testGRUWithAvailableMemoryProportionBwd")
@pytest.mark.parametrize("which", ["options", "options_bwd"])
def test_gru_with_available_memory_proportion(which):
    def train(proportion, steps):
        program = _popnn(layers.PopnnGRU, **{which: {"availableMemoryProportion": proportion}})
        return losses(program, inputs(), labels(), STATES, steps=steps)

    assert np.isfinite(train(0.7, steps=2)).all()
    with pytest.raises(v1.errors.InternalError, match="Value must be greater than or equal to 0"):
        train(-123.0, steps=1)
