"""graphcore/popart tests/integration/optimizer_tests/sgd1_accumulator_test.py: three weights
whose gradients are all the same tensor (a chain of Adds) each get their own SGD accumulator,
named after the weight, with the Combined (SGD1: `Accl___<w>`) and Separate (SGD2:
`Accl1___<w>`) modes, with and without Nesterov momentum (Cpu).

As the original, the names are read from the IR's JSON (`session._serializeIr`, with the SGD1
decomposition's transient `AcclIntoUpdate___`/`AcclOutOfAcclUpdate___` tensors); the
persistent accumulators are also read from the model the session writes, and a step checks
each weight's update (and SGD2's velocity)."""

import itertools
import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import popart

WEIGHTS = ["weight1", "weight2", "weight3"]
LR, MOMENTUM = 0.1, 0.9


@pytest.mark.follows("test_accumulators_names_dont_clash")
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("opt_type", ["SGD1", "SGD2"])
def test_accumulators_names_dont_clash(tmp_path, opt_type, nesterov):
    np.random.seed(1984)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 4]), "data0")
    data = x
    initial = {}
    for name in WEIGHTS:
        initial[name] = np.random.rand(4, 4).astype(np.float32)
        x = builder.aiOnnx.add([x, builder.addInitializedInputTensor(initial[name], name)])
    loss = builder.aiGraphcore.l1loss([x], 1.0)
    mode = (
        popart.SGDAccumulatorAndMomentum.Combined
        if opt_type == "SGD1"
        else popart.SGDAccumulatorAndMomentum.Separate
    )
    optimizer = popart.SGD(
        {
            "defaultLearningRate": (LR, True),
            "defaultMomentum": (MOMENTUM, True),
            "defaultDampening": (0, True),
            "nesterov": (nesterov, False),
        },
        accumulatorAndMomentum=mode,
    )
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {}),
        loss=loss,
        optimizer=optimizer,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    # As the original: the IR names each weight's accumulator tensors after the weight.
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    tensors = {t["name"] for op in ir["maingraph"] for t in (*op["inputs"], *op["outputs"])}
    prefixes = (
        [
            popart.reservedAcclPrefix(),
            popart.reservedAcclToUpdatePrefix(),
            popart.reservedAcclFinalOutPrefix(),
        ]
        if opt_type == "SGD1"
        else [popart.reservedAccl1Prefix()]
    )
    for prefix, name in itertools.product(prefixes, WEIGHTS):
        assert prefix + name in tensors
    session.weightsFromHost()
    sample = np.random.rand(4, 4).astype(np.float32)
    session.run(popart.PyStepIO({data: sample}, session.initAnchorArrays()))
    path = str(tmp_path / "model.onnx")
    session.modelToHost(path)
    saved = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}

    prefix = popart.reservedAcclPrefix() if opt_type == "SGD1" else popart.reservedAccl1Prefix()
    total = sample + sum(initial.values())
    # Every weight's gradient is that of mean(|x + w1 + w2 + w3|): the same values, own tensors.
    gradient = np.sign(total) / total.size
    for name in WEIGHTS:
        assert prefix + name in saved
        if opt_type == "SGD2":
            # (SGD1's combined tensor holds values precomputed for the next step.)
            np.testing.assert_allclose(saved[prefix + name], gradient, rtol=1e-6)
        step = gradient + MOMENTUM * gradient if nesterov else gradient
        np.testing.assert_allclose(saved[name], initial[name] - LR * step, rtol=1e-6)
