"""The one validation stage every loaded model passes: Builder(model), InferenceSession and
TrainingSession all read models through `model_io.load_model`, which calls `check_model`.

The original runs `ONNX_NAMESPACE::checker::check_model` on a loaded model
(willow/src/builder_impl.cpp, loadModelProto) and ONNX shape inference before building its IR.
Here the check is onnx's full one (the checker plus strict shape inference with type checks,
so an output declared INT32 that Softmax computes as FLOAT is refused), preceded by what the
checker does not look at but the lowering relies on: text that is valid UTF-8, initializers
whose data matches their type and dims, and declared dimensions that are not negative. Every
failure is a popart_exception naming the node, tensor or attribute at fault.
"""

from __future__ import annotations

import logging
import os
import re

import numpy as np
import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from onnx import GraphProto, ModelProto, TensorProto, TypeProto

from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.builder.ir_shape_checks import check_ir_shapes
from openipu._src.popart.builder.onnx_view import as_onnx_sees_it
from openipu._src.popart.errors import popart_exception

logger = logging.getLogger("popart.builder")

# Protobuf cannot serialize more than 2 GiB, and onnx's checker works on the serialized model.
_MAX_CHECKED_BYTES = (1 << 31) - 1
_ELEMENT_TYPES = {
    value
    for name, value in TensorProto.DataType.items()
    if name not in ("UNDEFINED",) and value in onnx.helper.get_all_tensor_dtypes()
}
# The typed field that holds each element type's values when raw_data is not used
# (onnx.proto, TensorProto; complex types store two numbers per element).
_TYPED_FIELDS: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float_data", 1),
    TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.DOUBLE: ("double_data", 1),
    TensorProto.COMPLEX128: ("double_data", 2),
    TensorProto.INT64: ("int64_data", 1),
    TensorProto.UINT32: ("uint64_data", 1),
    TensorProto.UINT64: ("uint64_data", 1),
    TensorProto.STRING: ("string_data", 1),
}
_SUBBYTE_TYPES = {
    getattr(TensorProto, name): bits
    for name, bits in (
        ("INT4", 4),
        ("UINT4", 4),
        ("FLOAT4E2M1", 4),
        ("INT2", 2),
        ("UINT2", 2),
    )
    if hasattr(TensorProto, name)
}


def check_model(model: ModelProto, what: str, infer_shapes: bool = True) -> None:
    """Raises a popart_exception if `model` (described by `what`) is not a valid ONNX model
    (with `infer_shapes` False, checking its structure only, as onnx's checker does)."""
    _check_text(model, "model")
    for graph in iter_graphs(model.graph):
        _check_initializers(graph)
        _check_declared_types(
            graph, streamed=_streamed_inputs(model.graph) if graph is model.graph else set()
        )
    if not infer_shapes:
        try:
            onnx.checker.check_model(model)
        except (onnx.checker.ValidationError, ValueError, RuntimeError) as error:
            raise popart_exception(
                f"{what} is not a valid ONNX model: {_first_line(error)}"
            ) from None
        return
    check_ir_shapes(model)
    _check_with_onnx(model, what)


def _check_text(message: Message, path: str) -> None:
    """Every string field is UTF-8 (onnx.proto's strings are; protobuf's proto2 parser does
    not check, and hands invalid text over as bytes, which the checker cannot report)."""
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            items = value if _is_repeated(field) else [value]
            for index, item in enumerate(items):
                _check_text(item, f"{path}.{field.name}[{index}]" if _is_repeated(field) else
                            f"{path}.{field.name}")  # fmt: skip
        elif field.type == FieldDescriptor.TYPE_STRING:
            for item in value if _is_repeated(field) else [value]:
                if isinstance(item, bytes):
                    raise popart_exception(
                        f"{path}.{field.name} is not valid UTF-8 text: {item!r} (a corrupted or "
                        "truncated model file?)"
                    )


def _is_repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def _check_initializers(graph: GraphProto) -> None:
    for index, tensor in enumerate(graph.initializer):
        _check_tensor(
            tensor, f"Initializer '{tensor.name}' (number {index} of graph '{graph.name}')"
        )
    for sparse in graph.sparse_initializer:
        _check_tensor(sparse.values, f"Sparse initializer '{sparse.values.name}' values")
        _check_tensor(sparse.indices, f"Sparse initializer '{sparse.values.name}' indices")


def _check_tensor(tensor: TensorProto, what: str) -> None:
    if tensor.data_type not in _ELEMENT_TYPES:
        raise popart_exception(f"{what} has an unknown element type ({tensor.data_type})")
    negative = [dim for dim in tensor.dims if dim < 0]
    if negative:
        raise popart_exception(f"{what} has negative dimensions {list(tensor.dims)}")
    if tensor.data_location == TensorProto.EXTERNAL:
        return  # onnx.load_model has read the data, or the checker refuses the location
    elements = int(np.prod(tensor.dims, dtype=object))
    stored = _stored_elements(tensor)
    if stored is not None and stored != elements:
        raise popart_exception(
            f"{what} has dims {list(tensor.dims)} ({elements} elements) but holds data for "
            f"{stored} elements"
        )


def _stored_elements(tensor: TensorProto) -> int | None:
    """How many elements the tensor's data holds (None when it cannot be told)."""
    if tensor.HasField("raw_data"):
        if tensor.data_type == TensorProto.STRING:
            return None  # strings are never raw; the checker refuses this
        if tensor.data_type in _SUBBYTE_TYPES:
            bits = _SUBBYTE_TYPES[tensor.data_type]
            # Packed, the last byte possibly half used: accept either element count.
            expected = int(np.prod(tensor.dims, dtype=object))
            return expected if len(tensor.raw_data) == -(-expected * bits // 8) else -1
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        if len(tensor.raw_data) % itemsize:
            return -1
        return len(tensor.raw_data) // itemsize
    field, per_element = _TYPED_FIELDS.get(tensor.data_type, ("int32_data", 1))
    if tensor.data_type in _SUBBYTE_TYPES:
        return None
    return len(getattr(tensor, field)) // per_element


def _negative_dims_unknown(model: ModelProto) -> ModelProto:
    """`model` (a copy if changed) with the negative dimensions its streamed inputs declare
    made unknown for ONNX's inference (a session asks for them in InputShapeInfo)."""
    streamed = _streamed_inputs(model.graph)
    if not any(
        dim.HasField("dim_value") and dim.dim_value < 0
        for value in model.graph.input
        if value.name in streamed
        for dim in value.type.tensor_type.shape.dim
    ):
        return model
    copy = ModelProto()
    copy.CopyFrom(model)
    for value in copy.graph.input:
        if value.name in streamed:
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.ClearField("dim_value")
    return copy


def _streamed_inputs(graph: GraphProto) -> set[str]:
    initialized = {tensor.name for tensor in graph.initializer}
    return {value.name for value in graph.input if value.name not in initialized}


def _check_declared_types(graph: GraphProto, streamed: set[str]) -> None:
    """ONNX's IR (onnx.proto, TypeProto.Tensor): elem_type must be a valid, defined data type,
    and a dim_value is a size, so not negative. A streamed input of the main graph may
    declare a negative (unknown) one: a session then asks for its shape in InputShapeInfo
    (willow/src/ir.cpp, checkForDimParams; dim_param_test.py)."""
    for value in (*graph.input, *graph.output, *graph.value_info):
        if value.name in streamed:
            continue
        if value.type.WhichOneof("value") != "tensor_type":
            continue
        elem_type = value.type.tensor_type.elem_type
        if elem_type not in _ELEMENT_TYPES:
            raise popart_exception(
                f"Tensor '{value.name}' is declared with an undefined or unknown element type "
                f"({elem_type})"
            )
        dims = value.type.tensor_type.shape.dim
        if any(dim.HasField("dim_value") and dim.dim_value < 0 for dim in dims):
            shown = [dim.dim_value if dim.HasField("dim_value") else dim.dim_param for dim in dims]
            raise popart_exception(
                f"Tensor '{value.name}' is declared with a negative dimension: {shown}"
            )


def _without_untyped_outputs(model: ModelProto) -> ModelProto:
    """`model` without the main graph's outputs that have no type.

    The Builder declares an output it could not type (its op's inputs do not fit, as in
    the original's operators_test/binaryop_error_test.py) by name only, as the original's
    builder_impl.cpp does; PopART's IR then types it from its op, which reports the real
    problem. ONNX's checker requires a type, so it checks the rest of the model. So too for
    a Scan's output typed without a shape: ONNX cannot infer a body that PopART's ScanOp
    shapes otherwise (willow/src/op/scan.cpp; see `_fails_inside_a_scan_body`).
    """
    scan_outputs = {
        name for node in model.graph.node if node.op_type == "Scan" for name in node.output
    }

    def unchecked(output: onnx.ValueInfoProto) -> bool:
        kind = output.type.WhichOneof("value")
        return kind is None or (
            kind == "tensor_type"
            and output.name in scan_outputs
            and not output.type.tensor_type.HasField("shape")
        )

    if not any(unchecked(output) for output in model.graph.output):
        return model
    copy = ModelProto()
    copy.CopyFrom(model)
    for output in [o for o in copy.graph.output if unchecked(o)]:
        copy.graph.output.remove(output)
    return copy


def _check_with_onnx(model: ModelProto, what: str) -> None:
    model = _negative_dims_unknown(with_relative_external_locations(model))
    model = as_onnx_sees_it(_without_effect_only_nodes(_without_untyped_outputs(model)))[0]
    if model.ByteSize() > _MAX_CHECKED_BYTES:
        # Only a model whose initializers were read from external files gets here: check the
        # structure without the weights, whose sizes were checked above.
        model = _without_initializer_data(model)
    try:
        try:
            onnx.checker.check_model(model, full_check=True)
        except onnx.shape_inference.InferenceError as error:
            if not _only_types_popart_extends(str(error)):
                raise
            # The original's Builder runs shape inference with onnx's default options, which
            # do not hold an op's input types to the ONNX schema's constraints, and some of
            # its ops take more (TopK-10 of int32 in operators_test/if_test.py, Scatter with
            # uint32 indices in scatter_test.py, Equal-7 of float in boolean_test.py). Declared
            # types must still agree.
            onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=True)
    except onnx.checker.ValidationError as error:
        raise popart_exception(f"{what} is not a valid ONNX model: {_first_line(error)}") from None
    except onnx.shape_inference.InferenceError as error:
        if _fails_inside_a_schema_function(str(error)):
            logger.debug("onnx cannot infer types inside a schema's function body: %s", error)
            onnx.checker.check_model(model, full_check=False)
            return
        if _fails_inside_a_scan_body(str(error), model):
            # PopART's ScanOp gives its body [1] slices of 1-D scan inputs where ONNX gives
            # scalars (willow/src/op/scan.cpp), so ONNX's inference of such a body fails
            # (operators_test/scan_test.py, test_scan_zip concatenating its slices); the
            # original types the body from its IR, and the lowering reports a real misfit.
            logger.debug("onnx cannot infer a Scan body shaped as PopART shapes it: %s", error)
            onnx.checker.check_model(model, full_check=False)
            return
        raise popart_exception(
            f"{what} is not a valid ONNX model: {_first_line(error)}{_declared_outputs(model, error)}"
        ) from None
    except (ValueError, TypeError, RuntimeError) as error:
        # onnx's C++ reports some invalid values (a Cast to data type 0) as plain exceptions.
        raise popart_exception(f"{what} is not a valid ONNX model: {_first_line(error)}") from None


def _without_effect_only_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` without its ai.graphcore nodes of no inputs and no outputs (an unconditional
    Abort), which PopART takes and ONNX's checker refuses; nothing depends on them."""
    graph = model.graph
    effect_only = [
        index
        for index, node in enumerate(graph.node)
        if node.domain == "ai.graphcore" and not node.input and not node.output
    ]
    if not effect_only:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for index in reversed(effect_only):
        del copy.graph.node[index]
    return copy


_UNSUPPORTED_INPUT_TYPE = re.compile(
    r"\(op_type:(\w+), node name: [^)]*\): (?:\w+ typestr: \w+, )?(?:output )?has unsupported type"
    r"(?:: (tensor\(\w+\)))?"
)
# Ops whose PopART implementations take types their ONNX schema does not list (Constant-1
# of int64 in operators_test/expand_test.py, CumSum-11 of float16 in cumsum_test.py, Max-8
# and Min-8 of int32 in min_max_unwinding_test.py, If of a FLOAT condition in
# builder_name_test.py, Gather of uint32 indices in aliaszerocopy_model_test.py, Sqrt of int32,
# uint32 and bool in synthetic_data_test.py, RoiAlign of int32 batch indices in
# roialign_test.py).
_TYPES_EXTENDED_BY_POPART = frozenset(
    {
        "TopK",
        "Scatter",
        "ScatterElements",
        "Equal",
        "Constant",
        "CumSum",
        "Max",
        "Min",
        "If",
        "Gather",
        "Sqrt",
        "RoiAlign",
    }
)


# Ops PopART's IR takes only some more types for: Add of INT8 and UINT8, which Poplar
# refuses in prepareDevice (int8_host_stream_test.py; session/poplar_type_support.py).
_SOME_TYPES_EXTENDED_BY_POPART = {"Add": frozenset({"tensor(int8)", "tensor(uint8)"})}


def _extended_by_popart(op_type: str, onnx_type: str) -> bool:
    return op_type in _TYPES_EXTENDED_BY_POPART or onnx_type in _SOME_TYPES_EXTENDED_BY_POPART.get(
        op_type, ()
    )


_INCONSISTENT_INPUT_TYPE = re.compile(
    r"\(op_type:(\w+), node name: [^)]*\): (\w+) has inconsistent type"
)
# Inputs PopART lets differ in type from the others of their op, though their ONNX schema
# binds them to one: BatchNormalization's running variance in float32 for float16 data
# (willow/src/op/batchnorm.cpp types its variance outputs as that input;
# operators_test/batchnorm_test.py, test_batchnorm_train_half_fp32var); Clip-11's min and max
# of another float type than its data (a float32 bound on float16 data in
# operators_test/operators_test_2.py): PopART's ClipOp reads the constant bounds as plain
# numbers (willow/src/op/clip.cpp), so their tensor type does not matter.
_MIXED_TYPE_INPUTS = frozenset({("BatchNormalization", "var"), ("Clip", "min"), ("Clip", "max")})


def _only_types_popart_extends(message: str) -> bool:
    """Whether every type error in onnx's `message` is an input type of an op PopART takes
    more types for (other errors of the model are found again without type checks)."""
    ops = _UNSUPPORTED_INPUT_TYPE.findall(message)
    mixed = _INCONSISTENT_INPUT_TYPE.findall(message)
    return (
        bool(ops or mixed)
        and len(ops) == message.count("has unsupported type")
        and len(mixed) == message.count("has inconsistent type")
        and all(_extended_by_popart(op_type, onnx_type) for op_type, onnx_type in ops)
        and set(mixed) <= _MIXED_TYPE_INPUTS
    )


# One error, at an ONNX op, raised by a node of the function body its schema defines: onnx
# 1.23 fails so on its own test model test_mvn (MeanVarianceNormalization-13's body has a
# Constant whose value comes from an attribute reference). The model is not at fault.
_SCHEMA_FUNCTION_ERROR = re.compile(
    r"^\[ShapeInferenceError\] Inference error\(s\): \(op_type:(\w+)[^)]*\): "
    r"\[ShapeInferenceError\] Inference error\(s\): \(op_type:\w+[^)]*\): [^\n]*\s*$"
)


def _fails_inside_a_schema_function(message: str) -> bool:
    found = _SCHEMA_FUNCTION_ERROR.match(message.strip())
    if found is None:
        return False
    try:
        schema = onnx.defs.get_schema(found.group(1))
    except onnx.defs.SchemaError:
        return False
    # onnx's stubs omit OpSchema's function accessors (onnx ignores them the same way).
    return schema.has_function or schema.has_context_dependent_function  # type: ignore[attr-defined]


_SCAN_BODY_ERROR = re.compile(r"^\[ShapeInferenceError\] Inference error\(s\): \(op_type:Scan[,)]")


# PopART's ScanOp is Scan-9 and Scan-11; later versions keep ONNX's shapes (lowering/ops/
# control_flow.py), so ONNX's inference of their bodies holds.
_FIRST_ONNX_ONLY_SCAN_OPSET = 16


def _fails_inside_a_scan_body(message: str, model: ModelProto) -> bool:
    """Whether onnx's inference fails at a Scan node of PopART's versions (in its body, as
    ONNX shapes it)."""
    onnx_opset = next(
        (entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0
    )
    return (
        onnx_opset < _FIRST_ONNX_ONLY_SCAN_OPSET
        and _SCAN_BODY_ERROR.match(message.strip()) is not None
    )


def with_relative_external_locations(model: ModelProto) -> ModelProto:
    """`model` (a copy if changed) as ONNX's checker should see it when its main graph's
    initializers are saved externally at absolute locations, which the checker refuses (it
    takes only paths relative to the model's directory, and looks for the files there):
    those initializers become graph inputs of their type and shape. PopART writes and reads
    such locations (saveInitializersExternally with an absolute path,
    external_tensorproto_data_test); the files are read and checked when loaded."""
    graph = model.graph
    external = [
        tensor
        for tensor in graph.initializer
        if any(e.key == "location" and os.path.isabs(e.value) for e in tensor.external_data)
    ]
    if not external:
        return model
    copy = ModelProto()
    copy.CopyFrom(model)
    names = {tensor.name for tensor in external}
    declared = {value.name for value in copy.graph.input}
    kept = [tensor for tensor in copy.graph.initializer if tensor.name not in names]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    for tensor in external:
        if tensor.name not in declared:
            copy.graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            )
    return copy


def _without_initializer_data(model: ModelProto) -> ModelProto:
    skeleton = ModelProto()
    skeleton.CopyFrom(model)
    for graph in iter_graphs(skeleton.graph):
        for tensor in graph.initializer:
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            del tensor.external_data[:]
            tensor.external_data.add(key="location", value="weights-checked-separately")
    return skeleton


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text if len(text) < 2000 else text[:2000] + " ..."


_NODE_NAME = re.compile(r"node name: ([^)]*)\)")


def _declared_outputs(model: ModelProto, error: Exception) -> str:
    """Names the declared types of the failing node's outputs, so that a mismatch between a
    declared and an inferred type says which tensor is declared wrongly."""
    found = _NODE_NAME.search(str(error))
    if found is None or "existing" not in str(error):
        return ""
    declared: dict[str, TypeProto] = {}
    for graph in iter_graphs(model.graph):
        declared.update((value.name, value.type) for value in (*graph.output, *graph.value_info))
    for graph in iter_graphs(model.graph):
        for node in graph.node:
            outputs = [name for name in node.output if name in declared]
            if node.name == found.group(1) and outputs:
                described = ", ".join(
                    f"'{name}' declared as {_type_text(declared[name])}" for name in outputs
                )
                return f" (the node's outputs: {described})"
    return ""


def _type_text(type_proto: onnx.TypeProto) -> str:
    if type_proto.WhichOneof("value") != "tensor_type":
        return type_proto.WhichOneof("value") or "no type"
    tensor_type = type_proto.tensor_type
    element = TensorProto.DataType.Name(tensor_type.elem_type) if tensor_type.elem_type in \
        TensorProto.DataType.values() else str(tensor_type.elem_type)  # fmt: skip
    if not tensor_type.HasField("shape"):
        return element
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor_type.shape.dim]
    return f"{element} {dims}"
