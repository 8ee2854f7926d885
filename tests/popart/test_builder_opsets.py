"""The operator sets: method names, signatures and versions, checked against onnx.defs."""

import inspect

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import AttributeProto, TensorProto

import popart
from openipu._src.popart.builder.opsets.schema_methods import current_schemas, method_name

ONNX_VERSIONS = range(6, 12)
HANDWRITTEN = {"Constant", "Loop", "If", "Scan"}
OPSET_CLASS = {
    6: popart.AiOnnxOpset6,
    7: popart.AiOnnxOpset7,
    8: popart.AiOnnxOpset8,
    9: popart.AiOnnxOpset9,
    10: popart.AiOnnxOpset10,
    11: popart.AiOnnxOpset11,
}


def _parameters(method) -> list[str]:
    """Parameter names with their defaults, as `name=default` (annotations left out)."""
    return [
        p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        for p in inspect.signature(method).parameters.values()
    ]


def test_opset_classes_inherit_like_the_original():
    for version in range(7, 12):
        assert OPSET_CLASS[version].__mro__[1] is OPSET_CLASS[version - 1]
    assert issubclass(popart.AiOnnxOpset6, popart.builder.AiOnnx)
    assert issubclass(popart.AiGraphcoreOpset1, popart.builder.AiGraphcore)
    assert popart.builder.AiOnnx10 is popart.AiOnnxOpset10
    assert issubclass(popart.builder.AiOnnx, popart.builder.Opset)


@pytest.mark.parametrize(
    "version, name, expected",
    [
        (10, "maxpool", ["args", "num_outputs", "kernel_shape", "ceil_mode=0", "dilations=[]", "pads=[]", "storage_order=0", "strides=[]", "debugContext=''"]),
        (8, "maxpool", ["args", "num_outputs", "kernel_shape", "pads=[]", "storage_order=0", "strides=[]", "debugContext=''"]),
        (6, "maxpool", ["args", "kernel_shape", "pads=[]", "strides=[]", "debugContext=''"]),
        (11, "conv", ["args", "dilations=[]", "group=1", "kernel_shape=[]", "pads=[]", "strides=[]", "debugContext=''"]),
        (10, "gemm", ["args", "alpha=1.0", "beta=1.0", "transA=0", "transB=0", "debugContext=''"]),
        (11, "split", ["args", "num_outputs", "axis=0", "split=[]", "debugContext=''"]),
        (10, "dropout", ["args", "num_outputs", "ratio=0.5", "debugContext=''"]),
        (6, "dropout", ["args", "num_outputs", "is_test=0", "ratio=0.5", "debugContext=''"]),
        (10, "topk", ["args", "axis=-1", "debugContext=''"]),
        (9, "topk", ["args", "k", "axis=-1", "debugContext=''"]),
        (11, "topk", ["args", "axis=-1", "largest=1", "sorted=1", "debugContext=''"]),
        (10, "cast", ["args", "to", "debugContext=''"]),
        (10, "batchnormalization", ["args", "num_outputs", "epsilon=9.999999747378752e-06", "momentum=0.8999999761581421", "debugContext=''"]),
        (10, "lstm", ["args", "num_outputs", "activation_alpha=[]", "activation_beta=[]", "activations=[]", "clip=None", "direction='forward'", "hidden_size=None", "input_forget=0", "debugContext=''"]),
        (10, "slice", ["args", "debugContext=''"]),
        (9, "slice", ["args", "ends", "starts", "axes=[]", "debugContext=''"]),
        (10, "pad", ["args", "pads", "mode='constant'", "value=0.0", "debugContext=''"]),
        (10, "concat", ["args", "axis", "debugContext=''"]),
        (10, "randomnormal", ["shape", "dtype=1", "mean=0.0", "scale=1.0", "seed=None", "debugContext=''"]),
        (10, "constant", ["value", "debugContext=''"]),
        (10, "loop", ["args", "num_outputs", "body", "debugContext=''"]),
        (10, "logical_if", ["args", "num_outputs", "else_branch", "then_branch", "name=''"]),
        (8, "scan", ["args", "num_outputs", "body", "num_scan_inputs", "directions=[]", "debugContext=''"]),
        (9, "scan", ["args", "num_outputs", "body", "num_scan_inputs", "scan_input_axes=[]", "scan_input_directions=[]", "scan_output_axes=[]", "scan_output_directions=[]", "debugContext=''"]),
    ],
)  # fmt: skip
def test_signatures_match_the_original(version, name, expected):
    opset = popart.Builder(opsets={"ai.onnx": version}).aiOnnx
    assert _parameters(getattr(opset, name)) == expected


@pytest.mark.parametrize(
    "name, versions",
    [
        ("nonzero", {9, 10, 11}),
        ("scan", {8, 9, 10, 11}),
        ("upsample", {7, 8, 9}),  # deprecated in 10
        ("scatter", {9, 10}),  # deprecated in 11
        ("gathernd", {11}),
        ("mod", {10, 11}),
        ("logical_and", {6, 7, 8, 9, 10, 11}),
        ("logical_not", {6, 7, 8, 9, 10, 11}),
        ("relu", {6, 7, 8, 9, 10, 11}),
    ],
)
def test_methods_exist_only_where_onnx_has_the_operator(name, versions):
    for version, opset_class in OPSET_CLASS.items():
        opset = opset_class(popart.Builder(), version)
        assert hasattr(opset, name) == (version in versions), (name, version)
    with pytest.raises(AttributeError, match="not in this operator set"):
        _ = popart.AiOnnxOpset11(popart.Builder()).scatter


@pytest.mark.parametrize("version", ONNX_VERSIONS)
def test_every_onnx_operator_has_a_method_per_version(version):
    opset = OPSET_CLASS[version](popart.Builder(), version)
    for op_type in current_schemas("", version):
        assert callable(getattr(opset, method_name(op_type))), (op_type, version)


def _value_for(attribute_type: int):
    return {
        AttributeProto.INT: 1,
        AttributeProto.FLOAT: 1.0,
        AttributeProto.STRING: "x",
        AttributeProto.INTS: [1],
        AttributeProto.FLOATS: [1.0],
        AttributeProto.STRINGS: ["x"],
        AttributeProto.TENSOR: np.array([1.0], np.float32),
    }[attribute_type]


def _build_every_operator(opset, builder, domain: str, version: int):
    """One node per operator, with typed inputs and required attributes; yields (schema, node)."""
    x = builder.addInputTensor("FLOAT", [2, 2])
    # Pools take [N, C, spatial...] (the original's Builder refuses no spatial dimension).
    pooled = builder.addInputTensor("FLOAT", [1, 1, 2])
    core_graph = builder._impl._graph
    for op_type, schema in sorted(current_schemas(domain, version).items()):
        if op_type in HANDWRITTEN:
            continue
        method = getattr(opset, method_name(op_type))
        arguments = {}
        names = inspect.signature(method).parameters
        if "args" in names:
            first = pooled if op_type in ("MaxPool", "AveragePool", "LpPool") else x
            arguments["args"] = [first] * schema.min_input
        if "num_outputs" in names:
            arguments["num_outputs"] = max(schema.min_output, 1)
        for name, attribute in schema.attributes.items():
            if attribute.required:
                arguments[name] = _value_for(attribute.type)
        if op_type == "Pad" and "pads" in arguments:
            arguments["pads"] = [1, 1, 1, 1]  # two per dim of x, as the builder requires
        method(**arguments)
        yield schema, core_graph.node[-1]


@pytest.mark.parametrize("version", ONNX_VERSIONS)
def test_every_generated_node_passes_the_onnx_node_checker(version):
    builder = popart.Builder(opsets={"ai.onnx": version})
    context = onnx.checker.C.CheckerContext()
    context.ir_version = onnx.helper.find_min_ir_version_for(
        [onnx.helper.make_opsetid("", version)]
    )
    context.opset_imports = {"": version}
    count = 0
    for schema, node in _build_every_operator(builder.aiOnnx, builder, "", version):
        assert (node.op_type, node.domain) == (schema.name, "")
        onnx.checker.check_node(node, context)
        for attribute in node.attribute:
            if attribute.name == "__debug_info_id":
                continue  # the builder's, on every node
            assert attribute.type == schema.attributes[attribute.name].type
        count += 1
    assert count == len(current_schemas("", version)) - len(
        HANDWRITTEN & set(current_schemas("", version))
    )


def test_every_ml_operator_builds_a_checked_node():
    builder = popart.Builder()
    context = onnx.checker.C.CheckerContext()
    context.ir_version = 7
    context.opset_imports = {"": 10, "ai.onnx.ml": 1}
    built = [
        node.op_type
        for schema, node in _build_every_operator(builder.aiOnnxMl, builder, "ai.onnx.ml", 1)
        if onnx.checker.check_node(node, context) is None and node.domain == "ai.onnx.ml"
    ]
    assert "TreeEnsembleClassifier" in built and "LinearRegressor" in built
    assert len(built) == len(current_schemas("ai.onnx.ml", 1))
    imports = {
        o.domain: o.version for o in onnx.load_from_string(builder.getModelProto()).opset_import
    }
    assert imports["ai.onnx.ml"] == 1
    assert popart.builder.AiOnnxMl is popart.AiOnnxMlOpset1


def test_signature_defaults_are_the_schema_defaults():
    for version in ONNX_VERSIONS:
        opset = OPSET_CLASS[version](popart.Builder(), version)
        for op_type, schema in current_schemas("", version).items():
            if op_type in HANDWRITTEN:
                continue
            parameters = inspect.signature(getattr(opset, method_name(op_type))).parameters
            for name, attribute in schema.attributes.items():
                if name == "auto_pad":
                    assert name not in parameters
                    continue
                default = parameters[name].default
                if attribute.required:
                    assert default is inspect.Parameter.empty
                elif attribute.default_value.type:
                    expected = onnx.helper.get_attribute_value(attribute.default_value)
                    if isinstance(expected, bytes):
                        expected = expected.decode()
                    if isinstance(expected, list):
                        expected = [e.decode() if isinstance(e, bytes) else e for e in expected]
                    if isinstance(expected, onnx.TensorProto):
                        expected = onnx.numpy_helper.to_array(expected)
                        np.testing.assert_array_equal(onnx.numpy_helper.to_array(default), expected)
                        continue
                    assert (
                        list(default) == list(expected)
                        if isinstance(default, list)
                        else default == expected
                    )


def _different(value, attribute_type):
    if attribute_type == AttributeProto.INT:
        return value + 1
    if attribute_type == AttributeProto.FLOAT:
        return value + 0.5
    if attribute_type in (AttributeProto.INTS, AttributeProto.FLOATS):
        return list(value) + [2]
    return None


def test_non_default_attributes_are_written_and_defaults_are_not():
    builder = popart.Builder(opsets={"ai.onnx": 11})
    x = builder.addInputTensor("FLOAT", [2, 2])
    pooled = builder.addInputTensor("FLOAT", [1, 1, 2])  # [N, C, spatial]
    graph = builder._impl._graph
    checked = 0
    for op_type, schema in current_schemas("", 11).items():
        if op_type in HANDWRITTEN:
            continue
        method = getattr(builder.aiOnnx, method_name(op_type))
        parameters = inspect.signature(method).parameters
        first = pooled if op_type in ("MaxPool", "AveragePool", "LpPool") else x
        base = {"args": [first] * schema.min_input} if "args" in parameters else {}
        if "num_outputs" in parameters:
            base["num_outputs"] = 1
        for name, attribute in schema.attributes.items():
            if attribute.required:
                base[name] = _value_for(attribute.type)
        for name, attribute in schema.attributes.items():
            if attribute.required or not attribute.default_value.type or name == "auto_pad":
                continue
            default = parameters[name].default
            changed = _different(default, attribute.type)
            if changed is None:
                continue
            method(**base, **{name: default})
            assert name not in {a.name for a in graph.node[-1].attribute}
            method(**base, **{name: changed})
            written = {a.name: a for a in graph.node[-1].attribute}[name]
            assert written.type == attribute.type
            np.testing.assert_allclose(onnx.helper.get_attribute_value(written), changed)
            checked += 1
    assert checked > 80


def test_cast_and_dtype_attributes_take_popart_type_names():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    half = builder.aiOnnx.cast([x], "FLOAT16")
    as_int = builder.aiOnnx.cast([x], TensorProto.INT32)
    like = builder.aiOnnx.randomuniformlike([x], dtype="DOUBLE")
    assert builder.getTensorDtypeString(half) == "float16"
    assert builder.getTensorDtypeString(as_int) == "int32"
    assert builder.getTensorDtypeString(like) == "float64"
    with pytest.raises(popart.popart_exception):
        builder.aiOnnx.cast([x], "NOT_A_TYPE")


def test_constant_holds_the_array():
    builder = popart.Builder()
    value = np.arange(6, dtype=np.int32).reshape(2, 3)
    c = builder.aiOnnx.constant(value, "my_const")
    assert c == "Constant:0"
    assert builder.getTensorShape(c) == [2, 3]
    assert builder.getTensorDtypeString(c) == "int32"
    node = builder._impl._graph.node[0]
    (held,) = (a.t for a in node.attribute if a.name == "value")
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(held), value)
    with pytest.raises(popart.popart_exception, match="Constant: value must be a numpy array"):
        builder.aiOnnx.constant("text")
