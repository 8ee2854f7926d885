"""User programs the original PopART runs (or refuses with its own exception type) where the
emulation's lowering once raised an error of its own: loggers, InputShapeInfo, Upsample
scales below 1 and PackedDataBlock batches that leave sequences over."""

import logging

import numpy as np
import pytest

import popart


def run_model(builder, outputs, feeds=None):
    """The builder's model in an InferenceSession on the CPU device: the outputs' values."""
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, list(outputs)),
        popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO(dict(feeds or {}), anchors))
    return [anchors[name] for name in outputs]


# -- logging ------------------------------------------------------------------------------------


def test_an_unknown_log_level_turns_the_logger_off():
    # willow/src/logging.cpp, logLevelFromString: names match exactly, anything else is OFF.
    saved = logging.getLogger("popart.session").level
    try:
        logger = popart.getLogger("session")
        logger.setLevel("DEBUG")
        assert logging.getLogger("popart.session").level == logging.DEBUG
        logger.setLevel("LOUD")
        assert logging.getLogger("popart.session").level > logging.CRITICAL
        logger.setLevel("debug")  # not a name the original knows
        assert logging.getLogger("popart.session").level > logging.CRITICAL
        with pytest.raises(TypeError):
            logger.setLevel(3)
    finally:
        logging.getLogger("popart.session").setLevel(saved)


# -- InputShapeInfo -----------------------------------------------------------------------------


def test_input_shape_info_get_of_an_unknown_tensor():
    info = popart.InputShapeInfo()
    info.add("x", popart.TensorInfo("FLOAT", [2]))
    assert info.get("x").shape() == [2]
    with pytest.raises(popart.popart_exception, match="No input shape info for Tensor `y'"):
        info.get("y")


# -- Upsample -----------------------------------------------------------------------------------


def _nearest_rows(size, scale):
    """PopART's Upsample (nearest Resize, "pytorch" mode): floor(size * scale) outputs, output i
    reading input floor(i / scale) in float32 (operators_test/upsample_test.py)."""
    out = int(np.floor(size * np.float32(scale)))
    return np.minimum((np.arange(out, dtype=np.float32) / np.float32(scale)).astype(int), size - 1)


@pytest.mark.parametrize("scales", [[0.5, 0.5], [0.6, 2.5], [1.0, 0.75]])
def test_upsample_takes_scales_below_one(scales):
    # willow/src/op/upsample.cpp, setup: any scale, output dims floor(dim * scale).
    data = np.arange(1 * 1 * 6 * 8, dtype=np.float32).reshape(1, 1, 6, 8)
    all_scales = np.array([1.0, 1.0, *scales], np.float32)
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", list(data.shape)), "x")
    y = builder.aiOnnx.upsample([x, builder.aiOnnx.constant(all_scales)])
    builder.addOutputTensor(y)
    (result,) = run_model(builder, [y], {x: data})
    rows, cols = _nearest_rows(6, scales[0]), _nearest_rows(8, scales[1])
    np.testing.assert_array_equal(result, data[:, :, rows][:, :, :, cols])


# -- PackedDataBlock ----------------------------------------------------------------------------

LENGTHS = np.array([3, 5, 2, 4, 6, 1], np.int32)
OFFSETS = np.concatenate([[0], np.cumsum(LENGTHS)[:-1]]).astype(np.int32)
WIDTH = 6


def _packed_data_block(batch, max_lengths):
    data = (np.arange(int(LENGTHS.sum()) * 3, dtype=np.float32).reshape(-1, 3) % 7) - 3
    builder = popart.Builder()
    d = builder.addInputTensor(popart.TensorInfo("FLOAT", list(data.shape)), "data")
    offsets = builder.aiOnnx.constant(OFFSETS, "offsets")
    lengths = builder.aiOnnx.constant(LENGTHS, "lengths")
    body = builder.createSubgraphBuilder()
    body.addInputTensor(popart.TensorInfo("FLOAT", [batch, WIDTH, 3]), "seq")
    body.addOutputTensor(body.aiOnnx.mul(["seq", "seq"]))
    out = builder.aiGraphcore.packedDataBlock(
        [d, offsets, lengths, offsets, lengths], max_lengths, data.shape[0], batch, body
    )
    builder.addOutputTensor(out)
    return builder, out, {d: data}, data


def _reference(data, batch):
    """Each of the first floor(S / batch) * batch sequences squared in place; the rest zero."""
    expected = np.zeros_like(data)
    for sequence in range(len(LENGTHS) // batch * batch):
        rows = slice(OFFSETS[sequence], OFFSETS[sequence] + LENGTHS[sequence])
        expected[rows] = data[rows] ** 2
    return expected


@pytest.mark.parametrize("batch", [4, 5, 8])
def test_packed_data_block_leaves_sequences_over_a_whole_batch_zero(batch):
    # willow/src/op/packeddatablock.cpp, getCallbackIterations: floor(S / callbackBatchSize)
    # calls; willow/src/patterns/packeddatablockpattern.cpp starts the result at zero.
    builder, out, feeds, data = _packed_data_block(batch, [WIDTH])
    (result,) = run_model(builder, [out], feeds)
    np.testing.assert_array_equal(result, _reference(data, batch))


def test_packed_data_block_reads_only_the_max_lengths_it_needs():
    builder, out, feeds, data = _packed_data_block(2, [WIDTH, 99])
    (result,) = run_model(builder, [out], feeds)
    np.testing.assert_array_equal(result, _reference(data, 2))


def test_packed_data_block_with_too_few_max_lengths_is_an_index_error():
    # The creator's maxSequenceLengths.at(i): std::out_of_range, IndexError in Python.
    builder, out, feeds, _ = _packed_data_block(2, [])
    with pytest.raises(IndexError):
        run_model(builder, [out], feeds)
