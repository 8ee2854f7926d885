"""Builder inputs the original PopART accepts, and the exception types it raises for bad ones:
user programs that must build (and run, with the right numbers) where the emulation once
raised an error the original does not have."""

import numpy as np
import onnx
import pytest

import popart


def run(builder: popart.Builder, feeds: dict, outputs: list) -> dict:
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, {o: popart.AnchorReturnType("All") for o in outputs}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO(feeds, anchors))
    return anchors


def opset_imports(builder: popart.Builder) -> dict:
    model = onnx.load_from_string(builder.getModelProto())
    return {o.domain: o.version for o in model.opset_import}


# -- getTensorShape and getTensorDtypeString of tensors whose type is not known ----------------


def test_untyped_tensors_have_no_dims_and_an_undefined_type():
    # willow/src/builder_impl.cpp lists each tensor with the type it could infer, an undefined
    # one if none, and reads that as no dims of type "undefined".
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    (custom,) = builder.customOp("MyOp", 1, "com.acme", [x], {})
    assert builder.getTensorShape(custom) == []
    assert builder.getTensorDtypeString(custom) == "undefined"

    # A callee whose input is typed at the call site, queried before the call exists.
    callee = builder.createSubgraphBuilder()
    free = callee.addUntypedInputTensor("free")
    assert callee.getTensorShape(free) == []
    assert callee.getTensorDtypeString(free) == "undefined"
    callee.addOutputTensor(callee.aiOnnx.relu([free]))

    main = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = main.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    sub = main.createSubgraphBuilder()
    free = sub.addUntypedInputTensor("free")
    assert sub.getTensorShape(free) == []
    sub.addOutputTensor(sub.aiOnnx.relu([free]))
    (y,) = main.aiGraphcore.call([x], 1, sub)
    main.addOutputTensor(y)
    data = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.testing.assert_allclose(run(main, {x: data}, [y])[y], np.maximum(data, 0))

    # A tensor the builder has never seen is still an error.
    with pytest.raises(popart.popart_exception, match="not known|unknown tensor"):
        main.getTensorShape("no_such_tensor")


# -- Builder(opsets=...) reads only ai.onnx and ai.graphcore -----------------------------------


def test_opsets_argument_ignores_the_other_domains():
    # python/popart/python_files/builder.py reads opsets["ai.onnx"] and opsets["ai.graphcore"].
    builder = popart.Builder(
        opsets={"ai.onnx": 11, "ai.graphcore": 1, "ai.onnx.ml": 3, "com.acme": 7}
    )
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    y = builder.aiOnnx.add([x, builder.aiOnnx.constant(np.array([1, 2, 3], np.float32))])
    builder.addOutputTensor(y)
    imports = opset_imports(builder)
    assert imports[""] == 11
    assert "ai.onnx.ml" not in imports or imports["ai.onnx.ml"] == 1
    assert "com.acme" not in imports
    data = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    np.testing.assert_allclose(run(builder, {x: data}, [y])[y], data + [1, 2, 3])


# -- customOp adds its op at version 1 of its domain -------------------------------------------


def test_custom_ops_of_one_domain_with_different_versions():
    # popart.cpp's customOp binding calls Builder::customOp(opId, 1, ...): the domain's opset
    # is 1 whatever the op's version, so two versions of ops in one domain never conflict.
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    (a,) = builder.customOp("First", 1, "com.acme", [x], {"alpha": 0.5})
    (b,) = builder.customOp("Second", 2, "com.acme", [a], {"names": ["p", "q"]}, 1, "second")
    builder.addOutputTensor(b)
    model = onnx.load_from_string(builder.getModelProto())
    assert [(n.op_type, n.domain) for n in model.graph.node] == [
        ("First", "com.acme"),
        ("Second", "com.acme"),
    ]
    assert opset_imports(builder)["com.acme"] == 1
    assert builder.getFloatNodeAttribute("alpha", {a}) == 0.5


# -- arguments of the wrong type are pybind11's TypeError ----------------------------------------


def _builder_with_conv():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 4, 4]), "x")
    w = builder.addInitializedInputTensor(np.ones([1, 1, 3, 3], np.float32), "w")
    y = builder.aiOnnx.conv([x, w], pads=[1, 1, 1, 1])
    return builder, x, y


@pytest.mark.parametrize(
    "call",
    [
        lambda b, y: b.outlineAttributes(3),
        lambda b, y: b.nameScope(3),
        lambda b, y: b.setInplacePreferences(y, 3),
        lambda b, y: b.recomputeOutput(object()),
        lambda b, y: b.recomputeOutputInBackwardPass(y, 42),
        lambda b, y: b.schedulePriority("high"),
        lambda b, y: b.commGroup("all", 2),
        lambda b, y: b.setAvailableMemoryProportion(y, "half"),
        lambda b, y: b.setSerializeMatMul({y}, "output_channels", "two"),
        lambda b, y: b.outputTensorLocation(object()),
        lambda b, y: b.addOutputTensor(5),
        lambda b, y: b.getTensorDtypeString(5),
        lambda b, y: b.addInitializedInputTensor(np.ones(2, np.float32), 5),
        lambda b, y: b.virtualGraph(5.5, 1),
        lambda b, y: popart.Builder(12),
    ],
)
def test_arguments_of_the_wrong_type_are_type_errors(call):
    builder, _, y = _builder_with_conv()
    with pytest.raises(TypeError) as raised:
        call(builder, y)
    # Also a popart_exception, so programs that catch PopART's errors catch these too.
    assert isinstance(raised.value, popart.popart_exception)


def test_annotations_of_the_right_type_still_build_and_run():
    builder, x, y = _builder_with_conv()
    builder.setAvailableMemoryProportion(y, np.float32(0.5))
    with builder.schedulePriority(2), builder.commGroup(popart.CommGroupType.All, 0):
        z = builder.aiOnnx.relu([y])
    with builder.nameScope("block"), builder.outlineAttributes({"layer": 1}):
        out = builder.aiOnnx.neg([z])
    assert out.startswith("block/")
    builder.addOutputTensor(out)
    data = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) - 8
    padded = np.pad(data[0, 0], 1)
    conv = np.array(
        [[padded[i : i + 3, j : j + 3].sum() for j in range(4)] for i in range(4)], np.float32
    )
    result = run(builder, {x: data}, [out])[out]
    np.testing.assert_allclose(result[0, 0], -np.maximum(conv, 0), rtol=1e-5)


# -- the original's checks, in its order and words ------------------------------------------------


def test_call_counts_are_checked_inputs_first():
    # willow/src/builder.cpp, AiGraphcoreOpset1::call: inputs, then outputs.
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    callee = builder.createSubgraphBuilder()
    a = callee.addInputTensor(popart.TensorInfo("FLOAT", [2]), "a")
    callee.addOutputTensor(callee.aiOnnx.relu([a]))
    with pytest.raises(popart.popart_exception, match=r"number of inputs \(2\) does not match"):
        builder.aiGraphcore.call([x, x], 2, callee)
    with pytest.raises(popart.popart_exception, match=r"number of outputs \(2\) does not match"):
        builder.aiGraphcore.call([x], 2, callee)


def test_typed_attribute_getters_use_the_original_words():
    builder, _, y = _builder_with_conv()
    builder.addNodeAttribute("n", 3, {y})
    with pytest.raises(popart.popart_exception, match=r"^Attribute n is not a float\."):
        builder.getFloatNodeAttribute("n", {y})
    with pytest.raises(popart.popart_exception, match=r"^Attribute n is not a string vector\."):
        builder.getStringVectorNodeAttribute("n", {y})
    assert builder.getInt64NodeAttribute("n", {y}) == 3


def test_onnx_opset_version_given_as_text():
    # The original looks the opset class up as f"AiOnnx{version}": "11" is version 11.
    builder = popart.Builder(opsets={"ai.onnx": "11", "ai.graphcore": 1})
    assert builder.aiOnnx.version == 11
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]), "x")
    # Clip-11 takes min and max as inputs.
    low = builder.aiOnnx.constant(np.array(-1, np.float32))
    high = builder.aiOnnx.constant(np.array(2, np.float32))
    y = builder.aiOnnx.clip([x, low, high])
    builder.addOutputTensor(y)
    assert opset_imports(builder)[""] == 11
    data = np.array([-3, -0.5, 1.5, 4], dtype=np.float32)
    np.testing.assert_allclose(run(builder, {x: data}, [y])[y], np.clip(data, -1, 2))


def test_models_listing_tensors_of_undefined_type_load_and_run():
    # The original's Builder lists every tensor its shape inference could not type with an
    # undefined element type (willow/src/builder_impl.cpp, runShapeInference); its IR never
    # reads value_info, so such a model loads and runs.
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    r = builder.aiOnnx.relu([x])
    y = builder.aiOnnx.neg([r])
    builder.addOutputTensor(y)
    model = onnx.load_from_string(builder.getModelProto())
    del model.graph.value_info[:]
    model.graph.value_info.add(name=r).type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED
    proto = model.SerializeToString()

    loaded = popart.Builder(proto)
    assert loaded.getTensorShape(r) == [3]
    assert loaded.getTensorDtypeString(r) == "float32"

    session = popart.InferenceSession(
        proto, popart.DataFlow(1, [y]), popart.DeviceManager().createIpuModelDevice({})
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    data = np.array([-1, 0.5, 2], dtype=np.float32)
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors[y], -np.maximum(data, 0))


def test_a_dim_that_is_not_known_reads_as_zero():
    # BuilderImpl::getTensorShape reads each ONNX dim's dim_value, 0 for a symbolic dim.
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    builder = popart.Builder(model.SerializeToString())
    assert builder.getTensorShape("x") == [0, 4]
    assert builder.getTensorShape("y") == [0, 4]


# -- partials types: any string is kept by the Builder, checked when a session makes the op ---


def _conv_model(partials=None):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 4, 4]), "x")
    k = builder.addInitializedInputTensor(np.ones((3, 2, 3, 3), np.float32), "k")
    y = builder.aiOnnx.conv([x, k], pads=[1, 1, 1, 1])
    if partials is not None:
        builder.setPartialsType(y, partials)
    builder.addOutputTensor(y)
    return builder, x, y


def test_partials_type_strings_are_kept_and_any_case_runs():
    # willow/src/builder.cpp setPartialsType stores the string as given; convbase.cpp and
    # matmul.cpp read "float"/"half" in any letter case.
    builder, x, y = _conv_model("Half")
    assert builder.getPartialsType(y) == "Half"
    value = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    anchors = run(builder, {x: value}, [y])
    window = value[0, :, :2, :2].sum()  # the top-left output sees a 2x2 corner of each channel
    np.testing.assert_allclose(anchors[y][0, :, 0, 0], [window] * 3)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]), "a")
    product = builder.aiOnnx.matmul([a, a])
    builder.setPartialsType(product, "fLoAt")
    builder.addOutputTensor(product)
    square = np.array([[1, 2], [3, 4]], np.float32)
    np.testing.assert_allclose(run(builder, {a: square}, [product])[product], square @ square)


def test_partials_type_only_on_conv_and_matmul():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y = builder.aiOnnx.relu([x])
    with pytest.raises(
        popart.popart_exception,
        match=r"^Builder::setPartialsType should only be called on operators: Conv, MatMul; "
        "but was given: Relu$",
    ):
        builder.setPartialsType(y, "FLOAT")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        builder.setPartialsType(y, 16)


def _session(builder, y, options=None):
    return popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, [y]),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options or popart.SessionOptions(),
    )


def test_a_bad_partials_type_fails_when_the_session_makes_the_op():
    builder, _, y = _conv_model("DOUBLE")  # accepted by the Builder
    with pytest.raises(popart.popart_exception, match=r"^Bad partialsType 'double'$"):
        _session(builder, y)
    builder, _, y = _conv_model()
    options = popart.SessionOptions()
    options.convolutionOptions = {"partialsType": "quarter"}
    with pytest.raises(popart.popart_exception, match=r"^Bad partialsType 'quarter'$"):
        _session(builder, y, options)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]), "a")
    product = builder.aiOnnx.matmul([a, a])
    builder.setPartialsType(product, "double")
    with pytest.raises(
        popart.popart_exception,
        match=r"^Unable to get option 'partialsTypeMatMul' from string 'double'\. "
        r"Possible values are 'float' and 'half' in any letter case\.$",
    ):
        _session(builder, product)


def test_a_multiconv_partials_type_is_checked_per_convolution():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 4, 4]), "x")
    k = builder.addInitializedInputTensor(np.ones((3, 2, 3, 3), np.float32), "k")
    (y,) = builder.aiGraphcore.multiconv([[x, k]], partialsTypes=["Float16"])
    builder.addOutputTensor(y)
    with pytest.raises(popart.popart_exception, match=r"^Bad partialsType 'float16'$"):
        _session(builder, y)
