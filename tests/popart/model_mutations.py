"""Seeded mutations of small ONNX models, for the loading fuzz test (`test_model_loading_fuzz.py`).

Each mutation breaks a model the way real files are broken: truncated or flipped bytes, an
attribute of the wrong type, an input nobody produces, an opset that does not exist, two
tensors of one name, a shape that is huge or negative. `mutated_case(seed)` is deterministic,
so a failing seed can be replayed alone.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper


def _mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "b"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def _conv() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    k = numpy_helper.from_array(rng.normal(size=(2, 1, 3, 3)).astype(np.float32), "k")
    nodes = [
        helper.make_node("Conv", ["x", "k"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
        helper.make_node("ReduceMax", ["f"], ["y"], name="reduce", axes=[1], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [k],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def _gather() -> onnx.ModelProto:
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    shape = numpy_helper.from_array(np.array([6], np.int64), "shape")
    nodes = [
        helper.make_node("Gather", ["table", "i"], ["g"], name="gather", axis=0),
        helper.make_node("Reshape", ["g", "shape"], ["r"], name="reshape"),
        helper.make_node("Cast", ["r"], ["y"], name="cast", to=TensorProto.INT32),
        helper.make_node("Transpose", ["g"], ["t"], name="transpose", perm=[1, 0]),
    ]
    graph = helper.make_graph(
        nodes,
        "gather",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [
            helper.make_tensor_value_info("y", TensorProto.INT32, [6]),
            helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 2]),
        ],
        [table, shape],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def _loop() -> onnx.ModelProto:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="accumulate"),
        ],
        "body",
        [
            helper.make_tensor_value_info("iteration", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
        ],
    )
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    cond = numpy_helper.from_array(np.array(True), "cond")
    start = numpy_helper.from_array(np.zeros(2, np.float32), "start")
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "cond", "start"], ["y"], name="loop", body=body)],
        "loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [trips, cond, start],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


BASE_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": _mlp,
    "conv": _conv,
    "gather": _gather,
    "loop": _loop,
}


# -- mutations of the serialized bytes --------------------------------------------------------


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    mutable = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        mutable[rng.randrange(len(mutable))] = rng.randrange(256)
    return bytes(mutable)


# -- mutations of the model -------------------------------------------------------------------


def _all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    nodes = list(model.graph.node)
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                nodes.extend(attribute.g.node)
    return nodes


def _a_node(model: onnx.ModelProto, rng: random.Random) -> onnx.NodeProto:
    return rng.choice(_all_nodes(model))


def wrong_attribute_type(model: onnx.ModelProto, rng: random.Random) -> None:
    """An attribute whose declared type, or value, is not the one the op expects."""
    candidates = [node for node in _all_nodes(model) if node.attribute]
    if not candidates:
        return add_unknown_attribute(model, rng)
    attribute = rng.choice(rng.choice(candidates).attribute)
    choice = rng.randrange(4)
    name = attribute.name
    if choice == 0:
        attribute.CopyFrom(helper.make_attribute(name, "text"))
    elif choice == 1:
        attribute.CopyFrom(helper.make_attribute(name, [1.5, 2.5]))
    elif choice == 2:
        attribute.type = rng.choice(list(AttributeProto.AttributeType.values()))
    else:
        attribute.CopyFrom(helper.make_attribute(name, rng.choice([-99, 17, 2**40, 0])))


def add_unknown_attribute(model: onnx.ModelProto, rng: random.Random) -> None:
    _a_node(model, rng).attribute.append(helper.make_attribute("no_such_attribute", 1))


def remove_attribute(model: onnx.ModelProto, rng: random.Random) -> None:
    node = _a_node(model, rng)
    if node.attribute:
        del node.attribute[rng.randrange(len(node.attribute))]


def dangling_input(model: onnx.ModelProto, rng: random.Random) -> None:
    node = _a_node(model, rng)
    if node.input:
        node.input[rng.randrange(len(node.input))] = "nobody_makes_this"
    else:
        node.input.append("nobody_makes_this")


def drop_input(model: onnx.ModelProto, rng: random.Random) -> None:
    node = _a_node(model, rng)
    if node.input:
        del node.input[rng.randrange(len(node.input))]


def extra_input(model: onnx.ModelProto, rng: random.Random) -> None:
    node = _a_node(model, rng)
    node.input.append(rng.choice([*node.input, "x", ""]) if node.input else "x")


def bad_opset(model: onnx.ModelProto, rng: random.Random) -> None:
    choice = rng.randrange(5)
    if choice == 0:
        model.opset_import[0].version = rng.choice([0, -3, 1, 5, 99, 2**40])
    elif choice == 1:
        del model.opset_import[:]
    elif choice == 2:
        model.opset_import.append(helper.make_opsetid("", rng.choice([7, 13])))
    elif choice == 3:
        _a_node(model, rng).domain = rng.choice(["no.such.domain", "ai.onnx.ml", "ai.graphcore"])
    else:
        model.ir_version = rng.choice([0, 1, 2, 99, -1])


def duplicate_name(model: onnx.ModelProto, rng: random.Random) -> None:
    graph = model.graph
    choice = rng.randrange(4)
    if choice == 0 and len(graph.node) > 1:
        first, second = rng.sample(list(graph.node), 2)
        second.output[0] = first.output[0]
    elif choice == 1:
        graph.input.append(graph.input[0])
    elif choice == 2 and graph.initializer:
        graph.initializer.append(graph.initializer[0])
    else:
        graph.output.append(graph.output[0])


def _a_declared_shape(model: onnx.ModelProto, rng: random.Random) -> onnx.TensorShapeProto | None:
    values = [*model.graph.input, *model.graph.output]
    shapes = [v.type.tensor_type.shape for v in values if v.type.tensor_type.shape.dim]
    return rng.choice(shapes) if shapes else None


def odd_shape(model: onnx.ModelProto, rng: random.Random) -> None:
    """A declared dimension that is negative, zero, huge, or a shape of the wrong rank."""
    shape = _a_declared_shape(model, rng)
    if shape is None:
        return
    choice = rng.randrange(3)
    if choice == 0:
        shape.dim[rng.randrange(len(shape.dim))].dim_value = rng.choice(
            [-1, -7, 0, 2**31, 2**40, 2**62]
        )
    elif choice == 1:
        shape.dim.add().dim_value = rng.choice([1, 3, 2**33])
    else:
        del shape.dim[rng.randrange(len(shape.dim))]


def wrong_element_type(model: onnx.ModelProto, rng: random.Random) -> None:
    value = rng.choice([*model.graph.input, *model.graph.output])
    value.type.tensor_type.elem_type = rng.choice([0, 7, 6, 9, 8, 30, 999])


def bad_initializer(model: onnx.ModelProto, rng: random.Random) -> None:
    if not model.graph.initializer:
        return odd_shape(model, rng)
    tensor = rng.choice(list(model.graph.initializer))
    choice = rng.randrange(4)
    if choice == 0:
        tensor.raw_data = tensor.raw_data[: len(tensor.raw_data) // 2 + 1]
    elif choice == 1:
        tensor.dims.append(rng.choice([-2, 0, 2**40]))
    elif choice == 2:
        tensor.data_type = rng.choice([0, 8, 16, 999])
    else:
        tensor.data_location = TensorProto.EXTERNAL
        tensor.external_data.add(key="location", value=rng.choice(["../../etc/passwd", "nofile"]))


def unknown_op(model: onnx.ModelProto, rng: random.Random) -> None:
    _a_node(model, rng).op_type = rng.choice(["NoSuchOp", "", "Relu", "Conv", "Loop", "If"])


def empty_names(model: onnx.ModelProto, rng: random.Random) -> None:
    choice = rng.randrange(3)
    if choice == 0:
        model.graph.input[0].name = ""
    elif choice == 1:
        model.graph.output[0].name = ""
    else:
        node = _a_node(model, rng)
        node.output[0] = ""


def reorder_nodes(model: onnx.ModelProto, rng: random.Random) -> None:
    nodes = list(model.graph.node)
    rng.shuffle(nodes)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


MODEL_MUTATIONS = [
    wrong_attribute_type,
    add_unknown_attribute,
    remove_attribute,
    dangling_input,
    drop_input,
    extra_input,
    bad_opset,
    duplicate_name,
    odd_shape,
    wrong_element_type,
    bad_initializer,
    unknown_op,
    empty_names,
    reorder_nodes,
]
BYTE_MUTATIONS = [truncate, flip_bytes]


@dataclass
class Case:
    seed: int
    base: str
    mutations: list[str]
    data: bytes


def mutated_case(seed: int) -> Case:
    """One to three model mutations, or a byte mutation, of one base model."""
    rng = random.Random(seed)
    base = rng.choice(sorted(BASE_MODELS))
    model = BASE_MODELS[base]()
    if rng.random() < 0.2:
        mutation = rng.choice(BYTE_MUTATIONS)
        return Case(seed, base, [mutation.__name__], mutation(model.SerializeToString(), rng))
    applied = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutation = rng.choice(MODEL_MUTATIONS)
        mutation(model, rng)
        applied.append(mutation.__name__)
    return Case(seed, base, applied, model.SerializeToString())
