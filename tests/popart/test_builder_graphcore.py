"""The ai.graphcore operator set: signatures, the nodes it writes, inferred shapes, errors."""

import inspect

import numpy as np
import onnx
import pytest

import popart

# Parameter names from the PopART API document (13.5.1); `lambda` is `lambda_` here.
SPEC_PARAMETERS = {
    "abort": "args debugContext",
    "atan2": "args debugContext",
    "batchnormalization": "args num_outputs epsilon momentum debugContext",
    "bitwiseand": "args debugContext",
    "bitwisenot": "args debugContext",
    "bitwiseor": "args debugContext",
    "bitwisexnor": "args debugContext",
    "bitwisexor": "args debugContext",
    "bucketize": "args right debugContext",
    "call": "args num_outputs callee debugName debugContext",
    "copyvarupdate": "args debugContext",
    "ctcbeamsearchdecoder": "args blank beam_width top_paths debug_context",
    "ctcloss": "args reduction blank outDataType zeroInfinity debugContext",
    "depthtospace": "args blocksize mode debugContext",
    "detach": "args debugContext",
    "dynamicadd": "args axes sizes debugContext",
    "dynamicslice": "args axes sizes noOverlap debugContext",
    "dynamicupdate": "args axes sizes noOverlap debugContext",
    "dynamiczero": "args axes sizes debugContext",
    "expm1": "args debugContext",
    "fmod": "args debugContext",
    "gelu": "args debugContext",
    "geluerf": "args debugContext",
    "groupedgather": "args axis group_size debugContext",
    "groupedscatterreduce": "args axis_size axis reduction group_size enable_index_broadcast debugContext",
    "groupnormalization": "args num_groups epsilon debugContext",
    "identityloss": "args reduction debugContext",
    "incrementmod": "args increment modulus debugContext",
    "init": "shape data_type init_type batch_axis debugContext",
    "l1loss": "args lambda_ reduction debugContext",
    "log1p": "args debugContext",
    "lstm": "args outputFullSequence debugContext",
    "multiconv": "args dilations inDilations pads outPads strides availableMemoryProportions partialsTypes planType perConvReservedTiles cycleBackOff enableConvDithering debugContext",
    "nearbyint": "args debugContext",
    "nllloss": "args reduction ignoreIndex inputIsLogProbability debugContext",
    "nop": "args debugContext",
    "normalize_image": "args scale debugContext",
    "packedDataBlock": "args maxSequenceLengths resultSize callbackBatchSize callback debugContext",
    "printtensor": "args print_gradient debugContext title summariseThreshold edgeItems maxLineWidth digits floatFormat separator openBracket closeBracket",
    "reducemedian": "args axes keepdims debugContext",
    "remainder": "args debugContext",
    "replicatedallreduce": "args collectiveOperator commGroup debugContext",
    "replicatedreducescatter": "args collectiveOperator commGroup debugContext",
    "reshape": "args shape debugContext",
    "reverse": "args dimensions debugContext",
    "round": "args debugContext",
    "scale": "args scale debugContext",
    "scaledadd": "args scale0 scale1 debugContext",
    "scatterreduce": "args axis_size axis reduction enable_index_broadcast debugContext",
    "sequenceslice": "args zeroUnused debugContext",
    "shapeddropout": "args shape ratio debugContext",
    "slice": "args ends starts axes debugContext",
    "sort": "args axis descending stable debugContext",
    "splinebasis": "args degree debugContext",
    "splineweighting": "args debugContext",
    "subsample": "args strides debugContext",
    "swish": "args debugContext",
    "tensorremap": "args remap_type debugPrefix",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPEC_PARAMETERS))
def test_every_documented_operator_has_the_documented_parameters(name):
    method = getattr(popart.Builder().aiGraphcore, name)
    assert " ".join(inspect.signature(method).parameters) == SPEC_PARAMETERS[name]


def test_documented_defaults():
    opset = popart.Builder().aiGraphcore

    def defaults(name):
        return {
            p.name: p.default
            for p in inspect.signature(getattr(opset, name)).parameters.values()
            if p.default is not inspect.Parameter.empty
        }

    assert defaults("groupnormalization")["epsilon"] == pytest.approx(1e-5)
    assert defaults("batchnormalization")["momentum"] == pytest.approx(0.9)
    assert defaults("nllloss") == {
        "reduction": popart.ReductionType.Mean,
        "ignoreIndex": None,
        "inputIsLogProbability": False,
        "debugContext": "",
    }
    assert defaults("scatterreduce")["reduction"] == popart.ScatterReduction.Sum
    assert defaults("sort")["axis"] == -1
    assert defaults("ctcbeamsearchdecoder") == {
        "blank": 0,
        "beam_width": 100,
        "top_paths": 1,
        "debug_context": "",
    }
    assert defaults("printtensor")["summariseThreshold"] == 1000


def _node(builder, output):
    model = onnx.load_from_string(builder.getModelProto())
    onnx.checker.check_model(model, full_check=True)
    node = next(n for n in model.graph.node if output in n.output)
    # Without the builder's debug info id, which every node has (test_builder_test.py).
    attributes = {
        a.name: onnx.helper.get_attribute_value(a)
        for a in node.attribute
        if a.name != "__debug_info_id"
    }
    return node, {k: v.decode() if isinstance(v, bytes) else v for k, v in attributes.items()}


def _builder(*shapes, dtype="FLOAT"):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    return builder, [builder.addInputTensor(dtype, list(shape)) for shape in shapes]


# op(builder, inputs) -> output(s); expected op type, attributes, output shapes
NODE_CASES = {
    "nllloss": (
        lambda b, p, label: b.aiGraphcore.nllloss([p, label], popart.ReductionType.Sum, 3, True),
        [(4, 5), (4,)],
        "Nll",
        {"reduction": "Sum", "ignoreIndex": 3, "inputIsLogProbability": 1},
        [[]],
    ),
    "nllloss_none": (
        lambda b, p, label: b.aiGraphcore.nllloss([p, label], "NoReduction"),
        [(4, 5), (4,)],
        "Nll",
        {"reduction": "None", "inputIsLogProbability": 0},
        [[4]],
    ),
    "l1loss": (
        lambda b, x: b.aiGraphcore.l1loss([x], 0.5),
        [(4, 5)],
        "L1",
        {"lambda": 0.5, "reduction": "Mean"},
        [[]],
    ),
    "identityloss": (
        lambda b, x: b.aiGraphcore.identityloss([x], popart.ReductionType.NoReduction),
        [(4, 5)],
        "IdentityLoss",
        {"reduction": "None"},
        [[4, 5]],
    ),
    "groupnormalization": (
        lambda b, x, s, o: b.aiGraphcore.groupnormalization([x, s, o], 2, 1e-3),
        [(3, 4, 5, 5), (4,), (4,)],
        "GroupNormalization",
        {"num_groups": 2, "epsilon": pytest.approx(1e-3)},
        [[3, 4, 5, 5], [6], [6]],
    ),
    "dynamicslice": (
        lambda b, x, o: b.aiGraphcore.dynamicslice([x, o], [0, 2], [2, 3], 1),
        [(5, 6, 7), (2,)],
        "DynamicSlice",
        {"axes": [0, 2], "sizes": [2, 3], "noOverlap": 1},
        [[2, 6, 3]],
    ),
    "dynamicupdate": (
        lambda b, x, o, s: b.aiGraphcore.dynamicupdate([x, o, s], [1], [2]),
        [(5, 6), (1,), (5, 2)],
        "DynamicUpdate",
        {"axes": [1], "sizes": [2], "noOverlap": 0},
        [[5, 6]],
    ),
    "subsample": (
        lambda b, x: b.aiGraphcore.subsample([x], [2, 3]),
        [(5, 7)],
        "Subsample",
        {"strides": [2, 3]},
        [[2, 2]],  # rounded down as the original's Builder does (willow/src/defs.cpp)
    ),
    "slice": (
        lambda b, x: b.aiGraphcore.slice([x], [4, -1], [1, 0], [0, 1]),
        [(5, 7)],
        "Slice",
        {"starts": [1, 0], "ends": [4, -1], "axes": [0, 1]},
        [[3, 6]],
    ),
    "reshape": (
        lambda b, x: b.aiGraphcore.reshape([x], [7, 5]),
        [(5, 7)],
        "Reshape",
        {"shape": [7, 5]},
        [[7, 5]],
    ),
    "sort": (
        lambda b, x: b.aiGraphcore.sort([x], 0, 1, 1),
        [(5, 7)],
        "Sort",
        {"axis": 0, "descending": 1, "stable": 1},
        [[5, 7], [5, 7]],
    ),
    "reducemedian": (
        lambda b, x: b.aiGraphcore.reducemedian([x], [1], 0),
        [(5, 7, 2)],
        "ReduceMedian",
        {"axes": [1], "keepdims": 0},
        [[5, 2], [5, 2]],
    ),
    "depthtospace": (
        lambda b, x: b.aiGraphcore.depthtospace([x], 2, "CRD"),
        [(1, 8, 3, 3)],
        "DepthToSpace",
        {"blocksize": 2, "mode": "CRD"},
        [[1, 2, 6, 6]],
    ),
    "scatterreduce": (
        lambda b, s, i: b.aiGraphcore.scatterreduce([s, i], 3, 0, popart.ScatterReduction.Max),
        [(6, 4), (6, 4)],
        "ScatterReduce",
        {"axis_size": 3, "axis": 0, "reduction": 1, "enable_index_broadcast": 1},
        [[3, 4]],
    ),
    "shapeddropout": (
        lambda b, x: b.aiGraphcore.shapeddropout([x], [1, 7], 0.25),
        [(5, 7)],
        "ShapedDropout",
        {"shape": [1, 7], "ratio": 0.25},
        [[5, 7]],
    ),
    "scaledadd": (
        lambda b, x, y: b.aiGraphcore.scaledadd([x, y], 2, 3),
        [(5, 7), (7,)],
        "ScaledAdd",
        {"scale0": 2.0, "scale1": 3.0},
        [[5, 7]],
    ),
    "printtensor": (
        lambda b, x: b.aiGraphcore.printtensor([x], 0, "", "weights"),
        [(5,)],
        "PrintTensor",
        {"print_gradient": 0, "title": "weights", "summariseThreshold": 1000, "edgeItems": 3,
         "maxLineWidth": 75, "digits": 8, "floatFormat": 0, "separator": " ",
         "openBracket": "[", "closeBracket": "]"},
        [[5]],
    ),
    "lstm": (
        lambda b, x, w: b.aiGraphcore.lstm([x, w], 0),
        [(6, 2, 3), (4, 7, 4)],
        "LSTM",
        {"output_full_sequence": 0},
        [[2, 4], [2, 4]],
    ),
    "ctcloss": (
        lambda b, lp, t, il, tl: b.aiGraphcore.ctcloss([lp, t, il, tl], popart.ReductionType.NoReduction, 1, "FLOAT16", True),
        [(10, 3, 5), (3, 4), (3,), (3,)],
        "Ctc",
        {"reduction": "None", "blank": 1, "outDataType": "FLOAT16", "zeroInfinity": 1},
        [[3]],
    ),
    "ctcbeamsearchdecoder": (
        lambda b, lp, lengths: b.aiGraphcore.ctcbeamsearchdecoder([lp, lengths], 0, 10, 2),
        [(10, 3, 5), (3,)],
        "CtcBeamSearchDecoder",
        {"blank": 0, "beam_width": 10, "top_paths": 2},
        [[3, 2], [3, 2], [3, 2, 10]],
    ),
    "gelu_chain": (
        lambda b, x: b.aiOnnx.transpose([b.aiGraphcore.swish([b.aiGraphcore.gelu([x])])]),
        [(2, 3)],
        "Transpose",
        {},
        [[3, 2]],
    ),
    "replicatedallreduce": (
        lambda b, x: b.aiGraphcore.replicatedallreduce([x], popart.CollectiveOperator.Mean, (popart.CommGroupType.Consecutive, 2)),
        [(5,)],
        "ReplicatedAllReduce",
        {"__collectiveOperator": 1, "__collectiveCommGroup": [1, 2]},
        [[5]],
    ),
    "tensorremap": (
        lambda b, x: b.aiGraphcore.tensorremap([x], popart.TensorRemapType.Fwd),
        [(5,)],
        "TensorRemap",
        {"remap_type": 2},
        [[5]],
    ),
    "batchnormalization": (
        lambda b, x, s, o, m, v: b.aiGraphcore.batchnormalization([x, s, o, m, v], 5, 1e-3, 0.8),
        [(2, 3, 4), (3,), (3,), (3,), (3,)],
        "BatchNormalization",
        {"epsilon": pytest.approx(1e-3), "momentum": pytest.approx(0.8)},
        [[2, 3, 4], [3], [3], [3], [3]],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_graphcore_nodes_attributes_and_inferred_shapes(name):
    build, shapes, op_type, attributes, output_shapes = NODE_CASES[name]
    builder, inputs = _builder(*shapes)
    outputs = build(builder, *inputs)
    outputs = [outputs] if isinstance(outputs, str) else outputs
    for output in outputs:
        builder.addOutputTensor(output)
    node, written = _node(builder, outputs[0])
    assert node.op_type == op_type
    assert node.domain == ("" if op_type == "Transpose" else "ai.graphcore")
    assert written == attributes
    assert [builder.getTensorShape(output) for output in outputs] == output_shapes


def test_integer_ops_and_output_types():
    builder, (a, b) = _builder((4,), (4,), dtype="INT32")
    assert builder.getTensorDtypeString(builder.aiGraphcore.bitwiseand([a, b])) == "int32"
    assert builder.getTensorDtypeString(builder.aiGraphcore.bitwisenot([a])) == "int32"
    builder2 = popart.Builder()
    x = builder2.addInputTensor("FLOAT", [2, 3])
    edges = builder2.addInputTensor("FLOAT", [4])
    buckets = builder2.aiGraphcore.bucketize([x, edges], right=1)
    assert builder2.getTensorDtypeString(buckets) == "int32"
    assert builder2.getTensorShape(buckets) == [2, 3]
    index = builder2.aiGraphcore.sort([x])[1]
    assert builder2.getTensorDtypeString(index) == "int32"


def test_init_overloads_and_types():
    builder = popart.Builder()
    zeros = builder.aiGraphcore.init([2, 3], popart.DataType.FLOAT16, popart.InitType.Zero, "z")
    batched = builder.aiGraphcore.init([4], "INT32", popart.InitType.NoInit, 0, "b")
    assert builder.getTensorShape(zeros) == [2, 3]
    assert builder.getTensorDtypeString(zeros) == "float16"
    assert builder.getTensorDtypeString(batched) == "int32"
    assert builder.getInt64NodeAttribute("batch_axis", {zeros}) == -1
    assert builder.getInt64NodeAttribute("batch_axis", {batched}) == 0
    assert builder.getInt64NodeAttribute("data_type", {zeros}) == int(popart.DataType.FLOAT16)
    assert builder.getInt64NodeAttribute("init_type", {zeros}) == int(popart.InitType.Zero)


def test_multiconv_flattens_per_convolution_settings():
    builder, (x0, w0, x1, w1, b1) = _builder(
        (1, 2, 5, 5), (3, 2, 3, 3), (1, 2, 4, 4), (2, 2, 1, 1), (2,)
    )
    outputs = builder.aiGraphcore.multiconv(
        [[x0, w0], [x1, w1, b1]],
        pads=[[1, 1, 1, 1], [0, 0, 0, 0]],
        availableMemoryProportions=[0.2, 0.4],
        planType="parallel",
    )
    assert outputs == ["MultiConv:0", "MultiConv:1"]
    node = builder._impl._graph.node[-1]
    assert list(node.input) == [x0, w0, "", x1, w1, b1]
    assert builder.getInt64VectorNodeAttribute("pads", set(outputs)) == [1, 1, 1, 1, 0, 0, 0, 0]
    assert builder.getStringNodeAttribute("planType", set(outputs)) == "parallel"
    assert not builder.nodeHasAttribute("cycleBackOff", set(outputs))
    with pytest.raises(
        popart.popart_exception,
        match=r"number of strides parameter sets \(1\) does not match the number of input sets \(2\)",
    ):
        builder.aiGraphcore.multiconv([[x0, w0], [x1, w1]], strides=[[1, 1]])


def test_abort_copyvarupdate_and_packed_data_block():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [3])
    w = builder.addInitializedInputTensor(np.zeros(3, np.float32))
    assert builder.aiGraphcore.abort([x]) is None
    assert builder._impl._graph.node[-1].op_type == "Abort"
    assert list(builder._impl._graph.node[-1].output) == []
    alias = builder.aiGraphcore.copyvarupdate([w, x])
    assert builder.getTensorShape(alias) == [3]
    callback = builder.createSubgraphBuilder()
    data = callback.addInputTensor("FLOAT", [3])
    callback.addOutputTensor(callback.aiOnnx.relu([data]))
    packed = builder.aiGraphcore.packedDataBlock([x], [3], 3, 1, callback)
    assert packed == "PackedDataBlock:0"
    assert builder.getInt64VectorNodeAttribute("maxSequenceLengths", {packed}) == [3]


def test_graphcore_opset_import_only_when_used():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    builder.addOutputTensor(builder.aiOnnx.relu([x]))
    domains = {o.domain for o in onnx.load_from_string(builder.getModelProto()).opset_import}
    assert domains == {""}
    builder.aiGraphcore.gelu([x])
    domains = {o.domain for o in onnx.load_from_string(builder.getModelProto()).opset_import}
    assert domains == {"", "ai.graphcore"}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g, x: g.batchnormalization([x] * 5, 6), "num_outputs must be 1 to 5"),
        (lambda g, x: g.ctcbeamsearchdecoder([x, x], beam_width=2, top_paths=3), r"top_paths \(3\) must not exceed"),
        (lambda g, x: g.depthtospace([x], 2, "XYZ"), "mode must be DCR or CRD"),
        (lambda g, x: g.nllloss([x, x], "Median"), "not a ReductionType"),
        (lambda g, x: g.scatterreduce([x, x], 3, reduction="Average"), "not a ScatterReduction"),
        (lambda g, x: g.replicatedallreduce([x], "Xor"), "not a CollectiveOperator"),
        (lambda g, x: g.dynamicslice([x], [0], [1]), r"DynamicSlice \(ai.graphcore\): expected 2 to 3 input"),
        (lambda g, x: g.sequenceslice([x, x]), "expected 5 input"),
        (lambda g, x: g.subsample([], [1]), "expected at least 1 input"),
        (lambda g, x: g.reverse([x], "0"), "attribute 'dimensions' must be a list of integers"),
        (lambda g, x: g.gelu(["missing"]), "unknown tensor id 'missing'"),
        (lambda g, x: g.init([2], "NOT_A_TYPE", 0), "unknown data type"),
    ],
)  # fmt: skip
def test_graphcore_errors(call, message):
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    with pytest.raises(popart.popart_exception, match=message):
        call(builder.aiGraphcore, x)
