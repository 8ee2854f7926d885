"""The original's tiedgather_testutils (tests/integration/tiedgather_testutils/utils.py),
by intent: run a model for one step on an IPU Model (training with an optimizer, the
data repeated over the accumulation and replication dimensions) and give its anchors and
the trained model; compare two runs' anchors and weights."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

import popart


def run_py(
    proto: bytes,
    data: Mapping[str, np.ndarray],
    output: str,
    loss: str | None = None,
    optimizer: Any = None,
    patterns: Any = None,
    user_options: Mapping[str, Any] | None = None,
) -> tuple[np.ndarray, onnx.ModelProto]:
    options = popart.SessionOptions()
    options.enableStochasticRounding = False
    options.constantWeights = True
    options.outlineThreshold = 10.0
    for key, value in (user_options or {}).items():
        setattr(options, key, value)
    replicas = (user_options or {}).get("replicatedGraphCount", 1)
    ipus = 2 ** math.ceil(math.log2(replicas))
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus, "tilesPerIPU": 4})
    data_flow = popart.DataFlow(1, {output: popart.AnchorReturnType("ALL")})
    with device:
        kwargs = dict(
            fnModel=proto,
            deviceInfo=device,
            dataFlow=data_flow,
            userOptions=options,
            patterns=patterns,
        )
        if optimizer is not None:
            session = popart.TrainingSession(loss=loss, optimizer=optimizer, **kwargs)
        else:
            session = popart.InferenceSession(**kwargs)
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        for factor in (replicas, (user_options or {}).get("accumulationFactor", 1)):
            if factor > 1:
                data = {k: np.repeat(v[np.newaxis], factor, 0) for k, v in data.items()}
        session.run(popart.PyStepIO(dict(data), anchors))
        post_proto = onnx.load_from_string(_model_to_host(session))
    return anchors[output], post_proto


def _model_to_host(session) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        session.modelToHost(path)
        with open(path, "rb") as file:
            return file.read()


def check_same_run(first, second, margin: float = 1.5e-8) -> None:
    """Two runs' outputs (reshaped alike) and the weights both models have are equal."""
    (out_1, proto_1), (out_2, proto_2) = first, second
    np.testing.assert_allclose(out_2.reshape(out_1.shape), out_1, atol=margin, rtol=0)
    weights_1 = {w.name: numpy_helper.to_array(w) for w in proto_1.graph.initializer}
    shared = [w for w in proto_2.graph.initializer if w.name in weights_1]
    assert shared
    for weight in shared:
        np.testing.assert_allclose(
            numpy_helper.to_array(weight), weights_1[weight.name], atol=margin, rtol=0
        )
