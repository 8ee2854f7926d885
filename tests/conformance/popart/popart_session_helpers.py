"""Running a small inference session on the Cpu device, as many original tests do."""

from __future__ import annotations

from typing import Any

import numpy as np

import popart


def infer(
    model: Any, anchors: list[str], inputs: dict[str, np.ndarray], options: Any = None
) -> dict[str, np.ndarray]:
    """One run of an InferenceSession of `model` (bytes or a file name); its anchors."""
    session = popart.InferenceSession(
        fnModel=model,
        dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in anchors}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        userOptions=options or popart.SessionOptions(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(inputs, arrays))
    return arrays


def ipu_model_device(num_ipus: int = 1) -> Any:
    """An IPU Model device, standing in for the IPU hardware some original tests need (4
    tiles per IPU, as the original's test_util gives simulated devices)."""
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": num_ipus, "tilesPerIPU": 4})


def infer_on(
    device: Any,
    model: Any,
    anchors: list[str],
    feed: dict[str, np.ndarray],
    options: Any,
    batches_per_step: int = 1,
) -> dict[str, np.ndarray]:
    """Prepares and runs an InferenceSession on `device` (detached afterwards); its anchors."""
    try:
        session = popart.InferenceSession(
            fnModel=model,
            dataFlow=popart.DataFlow(
                batches_per_step, {a: popart.AnchorReturnType("All") for a in anchors}
            ),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()
        arrays = session.initAnchorArrays()
        session.run(popart.PyStepIO(feed, arrays))
    finally:
        device.detach()
    return arrays
