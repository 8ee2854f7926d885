"""onnx.reference as the reference of the original's RNN tests: the Builder's own model run
by ONNX's reference evaluator (in float64), and gradients by central differences of it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from openipu._src.popart.builder.builder_debug_info import strip_internal_attributes


def numeric_gradients(
    function, feeds: dict[str, np.ndarray], upstream: np.ndarray, wrt: Sequence[str]
) -> list[np.ndarray]:
    """d(sum(upstream * function(feeds))) / d feeds[w] for each w in `wrt`, by central
    differences in float64."""
    step = 1e-5
    base = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feeds.items()}
    upstream = upstream.astype(np.float64)
    grads = []
    for name in wrt:
        grad = np.zeros(base[name].shape)
        for position in np.ndindex(base[name].shape):
            values = []
            for sign in (1, -1):
                moved = dict(base)
                moved[name] = base[name].copy()
                moved[name][position] += sign * step
                values.append(np.sum(upstream * function(moved)))
            grad[position] = (values[0] - values[1]) / (2 * step)
        grads.append(grad.astype(feeds[name].dtype))
    return grads


class OnnxReference:
    """The forward model a test built, evaluated by onnx.reference."""

    def __init__(self, model_proto: bytes, outputs: Sequence[str]) -> None:
        model = onnx.load_from_string(model_proto)
        # Without PopART's '__' node attributes (the builder's '__debug_info_id' on every
        # node), which onnx.reference's ops refuse.
        strip_internal_attributes(model.graph)
        del model.graph.output[:]
        model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(o) for o in outputs)
        self._evaluator = ReferenceEvaluator(model)
        self._outputs = list(outputs)

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feeds.items()}
        return list(self._evaluator.run(self._outputs, wide))

    def gradients(
        self,
        feeds: dict[str, np.ndarray],
        output: str,
        upstream: np.ndarray,
        wrt: Sequence[str],
    ) -> list[np.ndarray]:
        """d(sum(upstream * output)) / d feeds[w] for each w in `wrt`, by central differences."""
        index = self._outputs.index(output)
        return numeric_gradients(
            lambda moved: self._evaluator.run(None, moved)[index], feeds, upstream, wrt
        )


def check_against_onnx(
    op_tester,
    arrays: Sequence[np.ndarray],
    build,
    train_inputs: Sequence[int] | None = None,
) -> None:
    """Build `build(builder, input_ids) -> [output ids]` on `arrays` and compare the anchors
    with onnx.reference's; with `train_inputs`, train through the first output and compare
    the gradients of those inputs with central differences of onnx.reference's model."""
    import popart

    g = popart.reservedGradientPrefix()
    recorded: dict = {}

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in arrays]
        outputs = build(builder, ids)
        builder.addOutputTensor(outputs[0])
        recorded.update(
            reference=OnnxReference(builder.getModelProto(), outputs),
            feeds=dict(zip(ids, arrays, strict=True)),
            ids=ids,
            outputs=outputs,
        )
        if train_inputs is None:
            return outputs
        return [outputs[0], g + outputs[0], *(g + ids[i] for i in train_inputs)]

    def reference(ref_data):
        reference, feeds = recorded["reference"], recorded["feeds"]
        forward = [r.astype(np.float32) for r in reference.run(feeds)]
        if train_inputs is None:
            return forward
        d__o = ref_data.getOutputTensorGrad(0)
        wrt = [recorded["ids"][i] for i in train_inputs]
        grads = reference.gradients(feeds, recorded["outputs"][0], d__o, wrt)
        return [forward[0], d__o, *grads]

    op_tester.run(init_builder, reference, "infer" if train_inputs is None else "train")
