"""The checks of the original's stepio_tests_py.py and stepio_tests_py_cpu.py, which differ only
in their device: an adder session fed two batches per step by a PyStepIO of buffers, or by a
PyStepIOCallback that hands each batch over and takes each anchor batch back."""

from __future__ import annotations

from typing import Any

import numpy as np

import popart

BATCHES = 2


def _adder_session(device: Any) -> tuple[Any, dict[str, np.ndarray], tuple[str, str, str]]:
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [2])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    data_flow = popart.DataFlow(BATCHES, {t: popart.AnchorReturnType("All") for t in (i1, i2, o)})
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(), dataFlow=data_flow, deviceInfo=device
    )
    session.prepareDevice()
    return session, session.initAnchorArrays(), (i1, i2, o)


def _random_inputs(names: tuple[str, str]) -> dict[str, np.ndarray]:
    return {name: np.random.rand(BATCHES, 2).astype(np.float32) for name in names}


def check_buffer_input(device: Any) -> None:
    session, anchors, (i1, i2, o) = _adder_session(device)
    inputs = _random_inputs((i1, i2))
    session.run(popart.PyStepIO(inputs, anchors))
    # Streamed inputs written back to the host come back unchanged.
    np.testing.assert_allclose(anchors[i1], inputs[i1])
    np.testing.assert_allclose(anchors[o], inputs[i1] + inputs[i2], rtol=1e-6)


def check_callback_input(device: Any) -> None:
    session, anchors, (i1, i2, o) = _adder_session(device)
    inputs = _random_inputs((i1, i2))
    fed = dict.fromkeys((i1, i2), 0)
    returned = dict.fromkeys((i1, i2, o), 0)
    completed: list[str] = []

    def input_callback(tensor_id: str, prefetch: bool) -> Any:
        # As the original's callback: nothing for a prefetch, or once every batch is fed.
        if prefetch or fed[tensor_id] >= BATCHES:
            return None
        fed[tensor_id] += 1
        return inputs[tensor_id][fed[tensor_id] - 1]

    def output_callback(tensor_id: str) -> np.ndarray:
        returned[tensor_id] += 1
        return anchors[tensor_id][returned[tensor_id] - 1]

    session.run(
        popart.PyStepIOCallback(input_callback, completed.append, output_callback, completed.append)
    )
    assert fed == dict.fromkeys((i1, i2), BATCHES)
    assert returned == dict.fromkeys((i1, i2, o), BATCHES)
    # Every batch handed over or taken back is completed.
    assert sorted(completed) == sorted([i1, i2] * BATCHES + [i1, i2, o] * BATCHES)
    np.testing.assert_allclose(anchors[i1], inputs[i1])
    np.testing.assert_allclose(anchors[i2], inputs[i2])
    np.testing.assert_allclose(anchors[o], inputs[i1] + inputs[i2], rtol=1e-6)
