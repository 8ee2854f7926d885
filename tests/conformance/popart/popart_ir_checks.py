"""Reading a session's IR as the original's tests do: `_serializeIr`'s JSON, one list of ops
per graph."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

import popart


def ir_of(session: Any) -> dict[str, list[dict[str, Any]]]:
    ir: dict[str, list[dict[str, Any]]] = json.loads(
        session._serializeIr(popart.IrSerializationFormat.JSON)
    )
    return ir


def op_types(graph: list[dict[str, Any]]) -> list[str]:
    return [op["type"] for op in graph]


def run_inference(
    builder: Any,
    anchors: list[str],
    inputs: dict[str, np.ndarray],
    options: Any = None,
    patterns: Any = None,
    device: Any = None,
) -> tuple[Any, dict[str, np.ndarray]]:
    """An InferenceSession of the builder's model, run once; the session and its anchors."""
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in anchors}),
        deviceInfo=device or popart.DeviceManager().createCpuDevice(),
        userOptions=options or popart.SessionOptions(),
        patterns=patterns,
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(inputs, arrays))
    return session, arrays
