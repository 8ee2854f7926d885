"""graphcore/popart tests/integration/synthetic_data_test.py: with a synthetic data mode the
inputs are not read from the host: Zeros gives zeros; RandomNormal (float) and RandomUniform
(int8, uint8, bool, cast to float) give values of the expected mean and spread, seen through
a PrintTensor's output on stderr; both random modes accept float16, float, int32, uint32 and
bool inputs. The original's CMake runs this file on IPU hardware; here on emulated IPUs."""

import logging
from collections import namedtuple

import numpy as np
import pytest
from popart_session_helpers import ipu_model_device

import popart

_DataType = namedtuple("_DataType", ["builder_type", "np_type"])
_INT8 = _DataType("INT8", np.int8)
_UINT8 = _DataType("UINT8", np.uint8)
_BOOL = _DataType("BOOL", np.bool_)
SHAPE = [4000]


def _print_input(mode, input_type):
    builder = popart.Builder()
    if input_type is not None:
        streamed = builder.addInputTensor(popart.TensorInfo(input_type.builder_type, SHAPE))
        d0 = builder.aiOnnx.cast([streamed], "FLOAT")
        host = np.ones(SHAPE, input_type.np_type)
    else:
        streamed = d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", SHAPE))
        host = np.ones(SHAPE, np.float32)
    # The whole tensor, without summarising or line breaks.
    printed = builder.aiGraphcore.printtensor([d0], 1, "print", "t", 0, 3, 0)
    options = popart.SessionOptions()
    options.syntheticDataMode = mode
    device = ipu_model_device()
    try:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, [printed]),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({streamed: host}, anchors))
    finally:
        device.detach()


def _printed_values(text):
    body = text.partition("[")[2].partition("]")[0]
    return np.array(body.split(), dtype=float)


@pytest.fixture
def quiet_popart_log():
    """PopART's log off for the test (only the printed tensors reach stderr), then as it was."""
    logger = logging.getLogger("popart")
    level = logger.level
    popart.getLogger().setLevel("OFF")
    yield
    logger.setLevel(level)


@pytest.mark.follows("test_verify_synthetic_inputs")
@pytest.mark.parametrize(
    "input_type", [_INT8, _UINT8, _BOOL, None], ids=["int8", "uint8", "bool", "float"]
)
def test_verify_synthetic_inputs(capfd, input_type, quiet_popart_log):
    capfd.readouterr()
    _print_input(popart.SyntheticDataMode.Zeros, input_type)
    zeros = _printed_values(capfd.readouterr().err)
    assert zeros.size == SHAPE[0]
    assert np.all(zeros == 0)

    random_mode = (
        popart.SyntheticDataMode.RandomNormal
        if input_type is None
        else popart.SyntheticDataMode.RandomUniform
    )
    _print_input(random_mode, input_type)
    values = _printed_values(capfd.readouterr().err)
    assert values.size == SHAPE[0]
    assert not np.all(values == 0)
    uniform_255_std = np.sqrt(255 * 255 / 12)
    # The 8-bit checks allow 4 rather than the original's 0.5: the mean of 4000 uniform
    # draws over 256 values varies by about 1.2, and these draws are not the original's.
    if input_type is _BOOL:
        assert np.isclose(np.mean(values), 0.5, atol=0.05)
        assert np.isclose(np.std(values), 0.5, atol=0.05)
    elif input_type is _INT8:
        assert np.isclose(np.mean(values), 0, atol=0.5 * 8)
        assert np.isclose(np.std(values), uniform_255_std, atol=0.5 * 8)
    elif input_type is _UINT8:
        assert np.isclose(np.mean(values), 255 / 2, atol=0.5 * 8)
        assert np.isclose(np.std(values), uniform_255_std, atol=0.5 * 8)
    else:
        assert np.isclose(np.mean(values), 0, atol=0.05)
        assert np.isclose(np.std(values), 1, atol=0.1)


@pytest.mark.follows("test_supported_input_types")
@pytest.mark.parametrize(
    "random_mode",
    [popart.SyntheticDataMode.RandomNormal, popart.SyntheticDataMode.RandomUniform],
)
def test_supported_input_types(random_mode):
    for dtype in ("FLOAT16", "FLOAT", "INT32", "UINT32", "BOOL"):
        builder = popart.Builder()
        in0 = builder.addInputTensor(popart.TensorInfo(dtype, [2]))
        out = builder.aiOnnx.sqrt([in0])
        options = popart.SessionOptions()
        options.syntheticDataMode = random_mode
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            userOptions=options,
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            dataFlow=popart.DataFlow(1, [out]),
        )
