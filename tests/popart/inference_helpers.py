"""Running a model once in an InferenceSession on a CPU device, as a PopART program does."""

from __future__ import annotations

import numpy as np

import popart


def run_inference(model, feeds: dict, outputs: list[str]) -> list[np.ndarray]:
    """The anchors `outputs` (AnchorReturnType All) after one run with `feeds`."""
    session = popart.InferenceSession(
        fnModel=model,
        dataFlow=popart.DataFlow(1, {name: popart.AnchorReturnType("All") for name in outputs}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO(feeds, anchors))
    return [anchors[name] for name in outputs]
