"""graphcore/popart tests/integration/builder_test.py: the Builder's operators, shapes and
types, node attributes, initializers, loading and saving models, opset versions, names and
its errors (Cpu)."""

import os

import numpy as np
import onnx
import pytest

import popart

UNARY = """abs acos acosh asin asinh atan atanh ceil cos cosh elu exp floor identity log
logsoftmax neg logical_not reciprocal relu sigmoid sin sinh softsign softmax sqrt tan
tanh""".split()
BINARY = """add logical_and div equal greater less max mean min mul logical_or pow sub sum
logical_xor""".split()
ONNX_NAMES = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor", "logical_not": "Not"}


def _image_builder():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 2, 3, 3]))
    return builder, i1, i2


def _conv(builder, *inputs, **kwargs):
    window = {"dilations": [1, 1], "pads": [0, 0, 0, 0], "strides": [1, 1], **kwargs}
    return builder.aiOnnx.conv(list(inputs), **window)


def _conv_output():
    builder, i1, i2 = _image_builder()
    o = _conv(builder, i1, i2)
    builder.addOutputTensor(o)
    return builder, o


def _add_output():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]))
    o = builder.aiOnnx.add((i1, i1))
    builder.addOutputTensor(o)
    return builder, o


@pytest.mark.follows("test_basic")
def test_basic():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]))
    outputs = [getattr(builder.aiOnnx, op)([i1]) for op in UNARY]
    outputs += [getattr(builder.aiOnnx, op)([i1, i2]) for op in BINARY]
    assert len(set(outputs)) == len(outputs)
    for o in outputs:
        assert builder.getTensorShape(o) == [1, 2, 32, 32]
    for op in UNARY + BINARY:
        if op in ("logsoftmax", "softmax"):
            continue
        name = ONNX_NAMES.get(op, op.capitalize())
        with pytest.raises(popart.popart_exception) as e_info:
            getattr(builder.aiOnnx, op)([])
        assert e_info.value.args[0].startswith(f"{name} has invalid number of")
    assert len(builder.getModelProto()) > 0
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.add(0, 0)
    assert e_info.value.args[0].startswith("add(): incompatible function")


@pytest.mark.follows("test_add_pad")
def test_add_pad():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    o = builder.aiOnnx.pad([i1], [2, 3], "constant", 0.0)
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [15]
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiOnnx.pad([i1], [2, 3, 4, 5], "constant", 0.0)
    assert e_info.value.args[0].startswith("Padding vector (length 4) ")


@pytest.mark.follows("test_add_subsample")
def test_add_subsample():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 9, 8, 7]))
    o = builder.aiGraphcore.subsample([i1], strides=[2, 3, 4, 5])
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [5, 3, 2, 1]


@pytest.mark.follows("test_add_constant")
def test_add_constant():
    builder = popart.Builder()
    c = builder.aiOnnx.constant(np.array([[1, 6], [4, 5]], dtype=np.float32))
    builder.addOutputTensor(c)
    assert len(builder.getModelProto()) > 0
    assert builder.getTensorShape(c) == [2, 2]


@pytest.mark.follows("test_add_conv")
def test_add_conv():
    builder, i1, i2 = _image_builder()
    o = _conv(builder, i1, i2)
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [1, 4, 30, 30]
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.conv()
    assert e_info.value.args[0].startswith("conv(): incompatible function")
    cases = [
        ({"strides": [1]}, "Length of strides vector 1 != number"),
        ({"pads": [0, 0]}, "Padding vector (length 2) does not have 2 values for each spatial"),
        ({"dilations": [1]}, "Length of dilations vector 1 != number of spatial d"),
    ]
    for change, message in cases:
        with pytest.raises(popart.popart_exception) as e_info:
            _conv(builder, i1, i2, **change)
        assert e_info.value.args[0].startswith(message)


@pytest.mark.follows("test_add_conv_and_bias")
def test_add_conv_and_bias():
    builder, i1, i2 = _image_builder()
    i3 = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]))
    o = _conv(builder, i1, i2, i3)
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [1, 4, 30, 30]
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.conv()
    assert e_info.value.args[0].startswith("conv(): incompatible")


@pytest.mark.follows("test_add_gemm")
def test_add_gemm():
    builder = popart.Builder()
    ids = [builder.addInputTensor(popart.TensorInfo("FLOAT", s)) for s in ([12, 8], [8, 16], [16])]
    o = builder.aiOnnx.gemm(ids, 1.0, 1.0, 0, 0)
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [12, 16]
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.gemm(0, 0, 0, 0, 0, 0, 0)
    assert e_info.value.args[0].startswith("gemm(): incompatible function")


def _check_loss_shapes(make, reduced_shape):
    builder = popart.Builder()
    shapes = []
    for reduction in ("Mean", "Sum", "NoReduction"):
        o = make(builder, getattr(popart.ReductionType, reduction))
        shapes.append(builder.getTensorShape(o))
        assert builder.getTensorDtypeString(o) == "float32"
    assert shapes == [[], [], reduced_shape]


@pytest.mark.follows("test_add_identityloss")
def test_add_identityloss():
    def make(builder, reduction):
        i = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 2, 3]))
        return builder.aiGraphcore.identityloss([i], reduction=reduction)

    _check_loss_shapes(make, [10, 2, 3])


@pytest.mark.follows("test_add_l1loss")
def test_add_l1loss():
    def make(builder, reduction):
        i = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 2, 3]))
        return builder.aiGraphcore.l1loss([i], 1.0, reduction=reduction)

    _check_loss_shapes(make, [10, 2, 3])


@pytest.mark.follows("test_add_matmul")
def test_add_matmul():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [3, 4]))
    o = builder.aiOnnx.matmul([i1, i2])
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [2, 4]
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.matmul(0, 0, 0, 0, 0, 0, 0)
    assert e_info.value.args[0].startswith("matmul(): incompatible function")


@pytest.mark.follows("test_add_nllloss")
def test_add_nllloss():
    def make(builder, reduction):
        i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 2, 3]))
        i2 = builder.addInputTensor(popart.TensorInfo("INT32", [2, 3]))
        return builder.aiGraphcore.nllloss([i1, i2], reduction=reduction)

    _check_loss_shapes(make, [2, 3])


@pytest.mark.follows("test_add_reshape")
def test_add_reshape():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    i2 = builder.addInitializedInputTensor(np.array([1, 6], dtype=np.int64))
    o = builder.aiOnnx.reshape([i1, i2])
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [1, 6]


@pytest.mark.follows("test_add_reshape_const")
def test_add_reshape_const():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    o = builder.reshape_const(builder.aiOnnx, [i1], [1, 6])
    builder.addOutputTensor(o)
    assert builder.getTensorShape(o) == [1, 6]


def _initializer_makes_proto_bigger(type_name, dtype):
    builder1 = popart.Builder()
    builder1.addInputTensor(popart.TensorInfo(type_name, [100, 100]))
    builder2 = popart.Builder()
    builder2.addInitializedInputTensor(np.ones([100, 100], dtype))
    assert len(builder2.getModelProto()) > len(builder1.getModelProto()) > 0


@pytest.mark.follows("test_initialized_input_fp32")
def test_initialized_input_fp32():
    _initializer_makes_proto_bigger("FLOAT", np.float32)


@pytest.mark.follows("test_initialized_input_int32")
def test_initialized_input_int32():
    _initializer_makes_proto_bigger("INT32", np.int32)


@pytest.mark.follows("test_initialized_input_fp16")
def test_initialized_input_fp16():
    _initializer_makes_proto_bigger("FLOAT16", np.float16)


@pytest.mark.follows("test_initialized_input_bool")
def test_initialized_input_bool():
    _initializer_makes_proto_bigger("BOOL", np.bool_)


@pytest.mark.follows("test_inout_tensor_info")
def test_inout_tensor_info():
    builder, i1, i2 = _image_builder()
    i3 = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 2, 3, 3]))
    x, y = _conv(builder, i1, i2), _conv(builder, i1, i3)
    o = builder.aiOnnx.add([x, y])
    builder.addOutputTensor(o)
    assert builder.getInputTensorIds() == [i1, i2, i3]
    assert builder.getOutputTensorIds() == [o]
    assert builder.getValueTensorIds() == [x, y, o]
    assert builder.getTensorShape(i1) == [1, 2, 32, 32]
    assert builder.getTensorShape(i3) == [4, 2, 3, 3]
    for t in (x, y, o):
        assert builder.getTensorShape(t) == [1, 4, 30, 30]
    with pytest.raises(popart.popart_exception):
        builder.getTensorShape("NotAnId")


@pytest.mark.follows("test_set_virtual_graph")
def test_set_virtual_graph():
    builder, o = _conv_output()
    builder.virtualGraph(o, 1)
    assert builder.getVirtualGraph(o) == 1


@pytest.mark.follows("test_set_weights_from_host")
def test_set_weights_from_host():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    i2 = builder.addInitializedInputTensor(np.array([1, 2], dtype=np.float32))
    o = builder.aiOnnx.add([i1, i2])
    loss = builder.aiGraphcore.identityloss([o])
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    stepio = popart.PyStepIO({i1: np.array([1, 2], dtype=np.float32)}, anchors)
    with pytest.raises(popart.popart_exception) as e_info:
        session.run(stepio)
    assert e_info.value.args[0].startswith("Must call weightsFromHost before run as the")


def _attribute_round_trip(value, getter):
    builder, o = _conv_output()
    builder.addNodeAttribute("test", value, {o})
    return getattr(builder, getter)("test", {o})


@pytest.mark.follows("test_add_int_attribute")
def test_add_int_attribute():
    assert _attribute_round_trip(100, "getInt64NodeAttribute") == 100


@pytest.mark.follows("test_add_int_vector_attribute")
def test_add_int_vector_attribute():
    assert _attribute_round_trip([100, 200, -1], "getInt64VectorNodeAttribute") == [100, 200, -1]


@pytest.mark.follows("test_add_float_attribute")
def test_add_float_attribute():
    assert _attribute_round_trip(0.1, "getFloatNodeAttribute") == pytest.approx(0.1)


@pytest.mark.follows("test_add_float_vector_attribute")
def test_add_float_vector_attribute():
    value = [100.0, -0.1, 100.0, 10.0]
    assert _attribute_round_trip(value, "getFloatVectorNodeAttribute") == pytest.approx(value)


@pytest.mark.follows("test_add_string_attribute")
def test_add_string_attribute():
    assert _attribute_round_trip("test", "getStringNodeAttribute") == "test"


@pytest.mark.follows("test_add_string_vector_attribute")
def test_add_string_vector_attribute():
    value = ["test", "test2", "test"]
    assert _attribute_round_trip(value, "getStringVectorNodeAttribute") == value


@pytest.mark.follows("test_add_attribute_missing_node")
def test_add_attribute_missing_node():
    builder = popart.Builder()
    with pytest.raises(popart.popart_exception):
        builder.addNodeAttribute("test", 100, {"i", "j"})


@pytest.mark.follows("test_has_attribute")
def test_has_attribute():
    builder, o = _conv_output()
    builder.addNodeAttribute("test", 100, {o})
    assert builder.nodeHasAttribute("test", {o})
    assert not builder.nodeHasAttribute("test2", {o})


@pytest.mark.follows("test_get_all_attribute_names")
def test_get_all_attribute_names():
    builder, o = _add_output()
    builder.addNodeAttribute("test", 100.0, {o})
    builder.addNodeAttribute("test2", -1, {o})
    builder.addNodeAttribute("test3", "abba", {o})
    assert set(builder.getAllNodeAttributeNames({o})) == {
        "test", "test2", "test3", "__debug_info_id"
    }  # fmt: skip


@pytest.mark.follows("test_get_conv_strides_attribute")
def test_get_conv_strides_attribute():
    builder, o = _conv_output()
    assert builder.getInt64VectorNodeAttribute("strides", {o}) == [1, 1]


@pytest.mark.follows("test_dont_override_attribute")
def test_dont_override_attribute():
    builder, o = _add_output()
    builder.addNodeAttribute("test", 100.0, {o})
    with pytest.raises(popart.popart_exception) as e_info:
        builder.addNodeAttribute("test", 100, {o})
    assert e_info.value.args[0] == "Node already has attribute test."


@pytest.mark.follows("test_get_attribute_doesnt_exist")
def test_get_attribute_doesnt_exist():
    builder, o = _add_output()
    builder.addNodeAttribute("test", 100.0, {o})
    with pytest.raises(popart.popart_exception) as e_info:
        builder.getFloatNodeAttribute("test1", {o})
    assert e_info.value.args[0] == "Node does not have an attribute test1."


@pytest.mark.follows("test_remove_attribute")
def test_remove_attribute():
    builder, o = _conv_output()
    builder.addNodeAttribute("test", 100, {o})
    assert builder.nodeHasAttribute("test", {o})
    builder.removeNodeAttribute("test", {o})
    assert not builder.nodeHasAttribute("test", {o})


@pytest.mark.follows("test_remove_attribute_doesnt_exist")
def test_remove_attribute_doesnt_exist():
    builder, o = _conv_output()
    builder.addNodeAttribute("test", 100, {o})
    with pytest.raises(popart.popart_exception) as e_info:
        builder.removeNodeAttribute("test1", {o})
    assert e_info.value.args[0] == "Cannot remove attribute test1 as it does not exist."


def _wrong_type(value, getter):
    builder, o = _add_output()
    builder.addNodeAttribute("test", value, {o})
    with pytest.raises(popart.popart_exception):
        getattr(builder, getter)("test", {o})


@pytest.mark.follows("test_get_attribute_wrong_type_int")
def test_get_attribute_wrong_type_int():
    _wrong_type(100.0, "getInt64NodeAttribute")


@pytest.mark.follows("test_get_attribute_wrong_type_int_vector")
def test_get_attribute_wrong_type_int_vector():
    _wrong_type(100.0, "getInt64VectorNodeAttribute")


@pytest.mark.follows("test_get_attribute_wrong_type_float")
def test_get_attribute_wrong_type_float():
    _wrong_type(100, "getFloatNodeAttribute")


@pytest.mark.follows("test_get_attribute_wrong_type_float_vector")
def test_get_attribute_wrong_type_float_vector():
    _wrong_type(100, "getFloatVectorNodeAttribute")


@pytest.mark.follows("test_get_attribute_wrong_type_string")
def test_get_attribute_wrong_type_string():
    _wrong_type(100, "getStringNodeAttribute")


@pytest.mark.follows("test_get_attribute_wrong_type_string_vector")
def test_get_attribute_wrong_type_string_vector():
    _wrong_type(100, "getStringVectorNodeAttribute")


def _adder():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [2])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    return builder, i1, i2, o


def _run_adder(proto, i1, i2, o):
    session = popart.InferenceSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    inputs = {i1: np.array([1, 2], np.float32), i2: np.array([3, 4], np.float32)}
    session.run(popart.PyStepIO(inputs, anchors))
    np.testing.assert_array_equal(anchors[o], [4, 6])


@pytest.mark.follows("test_load_onnx_model_from_other_builder")
def test_load_onnx_model_from_other_builder():
    builder, i1, i2, o = _adder()
    _run_adder(builder.getModelProto(), i1, i2, o)
    _run_adder(popart.Builder(builder.getModelProto()).getModelProto(), i1, i2, o)


@pytest.mark.follows("test_load_onnx_model_from_file")
def test_load_onnx_model_from_file(tmp_path):
    builder, i1, i2, o = _adder()
    filename = tmp_path / "model.onnx"
    filename.write_bytes(builder.getModelProto())
    _run_adder(popart.Builder(str(filename)).getModelProto(), i1, i2, o)


def _reshape(builder, shape):
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", shape))
    target = builder.addInitializedInputTensor(np.array([1, 6], dtype=np.int64))
    return x, target, builder.aiOnnx.reshape([x, target])


@pytest.mark.follows("test_convert_initializers_to_constants")
def test_convert_initializers_to_constants():
    builder = popart.Builder()
    i1, i2, o = _reshape(builder, [2, 3])
    builder.addOutputTensor(o)
    transformer = popart.GraphTransformer(builder.getModelProto())
    transformer.convertInitializersToConstants([i2])
    with pytest.raises(popart.popart_exception) as e_info:
        transformer.convertInitializersToConstants(["unknown"])
    assert e_info.value.args[0] == "TensorId unknown not in the model initalizers"
    ids = popart.Builder(transformer.getModelProto()).getInputTensorIds()
    assert i1 in ids and i2 not in ids


@pytest.mark.follows("test_convert_all_fixed_point_initializers_to_constants")
def test_convert_all_fixed_point_initializers_to_constants():
    builder = popart.Builder()
    i1, i2, o1 = _reshape(builder, [2, 3])
    i3, i4, o2 = _reshape(builder, [3, 2])
    builder.addOutputTensor(builder.aiOnnx.add([o1, o2]))
    transformer = popart.GraphTransformer(builder.getModelProto())
    transformer.convertAllFixedPointInitializersToConstants()
    ids = popart.Builder(transformer.getModelProto()).getInputTensorIds()
    assert i1 in ids and i3 in ids
    assert i2 not in ids and i4 not in ids


def _two_int_weights(builder):
    return [builder.addInitializedInputTensor(np.array([1, 6], dtype=np.int64)) for _ in range(2)]


INCOMPATIBLE = "add(): incompatible function arguments. The following argument types are supported:"


@pytest.mark.follows("test_builder_opsetDefaultVersions")
def test_builder_opsetDefaultVersions():  # noqa: N802
    builder = popart.Builder()
    ids = _two_int_weights(builder)
    builder.aiOnnx.add(ids, "add_v9")
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.add(ids, 1, 0, "add_v6")
    assert INCOMPATIBLE in e_info.value.args[0]


@pytest.mark.follows("test_builder_aiOnnxOpsetBuilderInterface")
def test_builder_aiOnnxOpsetBuilderInterface():  # noqa: N802
    for version in (9, 7):
        builder = popart.Builder(opsets={"ai.onnx": version, "ai.graphcore": 1})
        ids = [builder.addInitializedInputTensor(np.array([1, 5], np.float32)) for _ in range(2)]
        builder.aiOnnx.add(ids, "test_add")
        assert f"{builder.aiOnnx}" == f"AiOnnx{version}"


@pytest.mark.follows("test_builder_opsetDefinesVersions")
def test_builder_opsetDefinesVersions():  # noqa: N802
    builder = popart.Builder(opsets={"ai.onnx": 6, "ai.graphcore": 1})
    ids = _two_int_weights(builder)
    builder.aiOnnx.add(ids, 1, 0, "add_v6")
    with pytest.raises(TypeError) as e_info:
        builder.aiOnnx.add(ids, "add_v9")
    assert INCOMPATIBLE in e_info.value.args[0]


ALREADY_9 = "Invalid opset 'aiOnnxOpset{}' selected. Opset for domain ai.onnx already defined as {}"


@pytest.mark.follows("test_builder_opsetVersioning")
def test_builder_opsetVersioning():  # noqa: N802
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    ids = _two_int_weights(builder)
    builder.aiOnnx.add(ids, "b")
    builder.aiOnnxOpset9.add(ids, "a")
    with pytest.raises(RuntimeError) as e_info:
        builder.aiOnnxOpset6.add(ids, 1, 0, "a")
    assert ALREADY_9.format(6, 9) in e_info.value.args[0]


@pytest.mark.follows("test_name_scope")
def test_name_scope():
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    i1, i2 = _two_int_weights(builder)
    with builder.nameScope("scope1"):
        o1 = builder.aiOnnx.add([i1, i2], "myop1")
    with builder.nameScope("scope2"):
        o2 = builder.aiOnnx.add([i1, i2], "myop2")
        with builder.nameScope("embedded_scope"):
            o3 = builder.aiOnnx.add([o1, o2], "myop3")
    assert o1.startswith("scope1")
    assert o2.startswith("scope2")
    assert o3.startswith("scope2/embedded_scope")


@pytest.mark.follows("test_tensor_names")
def test_tensor_names():
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    value = np.array([1, 6], dtype=np.int64)
    assert builder.addInitializedInputTensor(value) == "init_input"
    assert builder.addInitializedInputTensor(value, "weights") == "weights"
    with builder.nameScope("layer1"):
        assert builder.addInitializedInputTensor(value) == "layer1/init_input"
        assert builder.addInitializedInputTensor(value, "weights") == "layer1/weights"
    info = popart.TensorInfo("FLOAT", [2, 3])
    assert builder.addInputTensor(info) == "input"
    assert builder.addInputTensor(info, "data") == "data"
    with builder.nameScope("layer2"):
        assert builder.addInputTensor(info, "label") == "layer2/label"
    assert builder.addInputTensor(info) == "input/1"
    assert builder.addInputTensor(info, "data") == "data/1"


@pytest.mark.follows("test_add_untyped_input")
def test_add_untyped_input():
    builder = popart.Builder()
    with pytest.raises(popart.popart_exception) as e_info:
        builder.addUntypedInputTensor()
    assert e_info.value.args[0].startswith("Can not add untyped tensors to the top-level graph.")
    builder.createSubgraphBuilder().addUntypedInputTensor()


@pytest.mark.follows("test_save_model_to_file")
def test_save_model_to_file(tmp_path):
    builder = popart.Builder()
    builder.aiOnnx.sqrt([builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))])
    path = os.path.join(tmp_path, "model.onnx")
    builder.saveModelProto(path)
    assert os.path.exists(path)
    assert popart.Builder(path).getModelProto() == builder.getModelProto()


@pytest.mark.follows("test_get_tensor_type")
def test_get_tensor_type():
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 9, 8, 7]))
    act0 = builder.aiGraphcore.subsample([i0], strides=[2, 3, 4, 5])
    act1 = builder.aiOnnx.cast([act0], "INT32")
    assert builder.getTensorDtypeString(i0) == "float32"
    assert builder.getTensorDtypeString(act0) == "float32"
    assert builder.getTensorDtypeString(act1) == "int32"


@pytest.mark.follows("test_is_initializer")
def test_is_initializer():
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10, 9, 8, 7]))
    i1 = builder.addInitializedInputTensor(np.array([1, 6], dtype=np.int64))
    assert builder.isInitializer(i0) is False
    assert builder.isInitializer(i1) is True


def _conv_of(weight_shape, **kwargs):
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 64, 56, 56]))
    w = builder.addInputTensor(popart.TensorInfo("FLOAT", weight_shape))
    with pytest.raises(popart.popart_exception) as e_info:
        _conv(builder, i, w, **kwargs)
    return e_info.value.args[0], w


@pytest.mark.follows("test_conv_kernel_shape_mismatch")
def test_conv_kernel_shape_mismatch():
    message, w = _conv_of([256, 64, 1, 1], kernel_shape=[64, 64])
    assert message == (
        f"kernel_shape, [64 64], does not match inferred shape from weight input '{w}', [1 1]"
    )


@pytest.mark.follows("test_conv_invalid_kernel_shape")
def test_conv_invalid_kernel_shape():
    message, _ = _conv_of([256, 64, 64, 64])
    assert (
        message == "Window parameter values combine to give invalid spatial output shape: [-7 -7]"
    )


def _onnx_opset(builder):
    opsets = [o for o in onnx.load_from_string(builder.getModelProto()).opset_import]
    (version,) = [o.version for o in opsets if o.domain == ""]
    return version


def _a_b(builder):
    info = popart.TensorInfo("FLOAT", [1])
    return [builder.addInputTensor(info, "a"), builder.addInputTensor(info, "b")]


def _added_with(opsets, opset_name):
    builder = popart.Builder(opsets=opsets) if opsets else popart.Builder()
    builder.addOutputTensor(getattr(builder, opset_name).add(_a_b(builder)))
    return _onnx_opset(builder)


@pytest.mark.follows("test_opset_version_constructor")
def test_opset_version_constructor():
    assert _added_with({"ai.onnx": 9, "ai.graphcore": 1}, "aiOnnx") == 9


@pytest.mark.follows("test_opset_version_default")
def test_opset_version_default():
    assert _added_with(None, "aiOnnx") == popart.defaultAiOnnxOpset


@pytest.mark.follows("test_opset_version_opset_choice")
def test_opset_version_opset_choice():
    assert _added_with(None, "aiOnnxOpset8") == 8


def _second_opset_refused(builder, first, defined_as):
    ab = _a_b(builder)
    if first:
        getattr(builder, first).add(ab)
    with pytest.raises(RuntimeError) as e_info:
        builder.aiOnnxOpset8.add(ab)
    assert e_info.value.args[0].startswith(ALREADY_9.format(8, defined_as))


@pytest.mark.follows("test_opset_version_constructor_override")
def test_opset_version_constructor_override():
    _second_opset_refused(popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1}), None, 9)


@pytest.mark.follows("test_opset_version_opset_choice_override")
def test_opset_version_opset_choice_override():
    _second_opset_refused(popart.Builder(), "aiOnnxOpset9", 9)


@pytest.mark.follows("test_opset_version_opset_default_choice_override")
def test_opset_version_opset_default_choice_override():
    _second_opset_refused(popart.Builder(), "aiOnnx", 10)


@pytest.mark.follows("test_opset_version_opset_default_version_changed")
def test_opset_version_opset_default_version_changed():
    builder = popart.Builder()
    ab = _a_b(builder)
    builder.aiOnnxOpset8.add(ab)
    builder.aiOnnx.add(ab)
    assert _onnx_opset(builder) == 8


@pytest.mark.follows("test_error_on_invalid_input_tensor")
def test_error_on_invalid_input_tensor():
    with pytest.raises(popart.popart_exception) as e_info:
        popart.Builder().aiOnnx.relu(["blaaa"])
    assert "'blaaa'" in str(e_info.value)


@pytest.mark.follows("test_too_many_outputs")
def test_too_many_outputs():
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 1]))
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiOnnx.rnn([i, i, i], 3)
    assert "has an invalid number of outputs" in e_info.value.args[0]
