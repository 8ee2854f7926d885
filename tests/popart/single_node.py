"""One ONNX node lowered and run, against an independent reference (onnx.reference or
onnxruntime): streamed inputs are graph inputs, parameters are initializers (constants)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import tensorflow as tf
from onnx import helper

from openipu._src.popart.lowering import lower_model


def single_node_model(
    op_type: str,
    inputs: dict[str, np.ndarray | None],
    constants: frozenset[str] | set[str] = frozenset(),
    outputs: int = 1,
    opset: int = 19,
    domain: str = "",
    domain_version: int = 1,
    **attributes: Any,
) -> onnx.ModelProto:
    """A model of one node; inputs valued None are left out (""), those in ``constants`` are
    initializers."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    while names and not names[-1]:
        names.pop()
    output_names = [f"y{index}" for index in range(outputs)]
    node = helper.make_node(op_type, names, output_names, domain=domain, **attributes)
    graph_inputs, initializers = [], []
    for name, value in inputs.items():
        if value is None:
            continue
        if name in constants:
            initializers.append(onnx.numpy_helper.from_array(np.asarray(value), name))
        else:
            element = helper.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, element, value.shape))
    graph = helper.make_graph(
        [node],
        "single",
        graph_inputs,
        [
            helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None)
            for name in output_names
        ],
        initializers,
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, domain_version))
    return helper.make_model(graph, opset_imports=opsets)


def run_lowered(model: onnx.ModelProto, feeds: dict[str, np.ndarray], compiled: bool = False):
    """The outputs of the lowered model, eagerly or compiled by XLA."""
    lowered = lower_model(model)
    feeds = {name: feeds[name] for name in lowered.input_names}
    if compiled:
        assert lowered.compilable
        # The feeds are arguments, not constants of the traced function.
        function = tf.function(
            lambda values: lowered.run(values), jit_compile=True, autograph=False
        )
        results = function(feeds)
    else:
        results = lowered.run(feeds)
    return [results[name].numpy() for name in lowered.output_names]


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    lowered_inputs = {value.name for value in model.graph.input}
    return ReferenceEvaluator(model).run(
        None, {name: value for name, value in feeds.items() if name in lowered_inputs}
    )


def onnxruntime_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]):
    import onnxruntime

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy = onnx.shape_inference.infer_shapes(copy)
    session = onnxruntime.InferenceSession(
        copy.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = {value.name for value in copy.graph.input}
    return session.run(None, {name: value for name, value in feeds.items() if name in names})
