"""Built models compute what the operators mean: onnx.reference against numpy.

Each case builds a model with the builder, checks it with the full ONNX
checker, runs it with `onnx.reference.ReferenceEvaluator` and compares the
result with numpy. ai.graphcore nodes run through small numpy implementations
of their documented semantics, which also checks the attribute names and
values the builder writes.
"""

import math

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from reference_models import for_reference

import popart

RNG = np.random.default_rng(7)


def _floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _positive(*shape):
    return (RNG.random(shape) + 0.5).astype(np.float32)


def _run(build, inputs, opsets=None, new_ops=None, engine="reference"):
    builder = popart.Builder(opsets=opsets or {"ai.onnx": 11})
    ids = [builder.addInputTensor(popart.TensorInfo(array)) for array in inputs]
    outputs = build(builder, *ids)
    outputs = [outputs] if isinstance(outputs, str) else outputs
    for output in outputs:
        builder.addOutputTensor(output)
    model = onnx.load_from_string(builder.getModelProto())
    onnx.checker.check_model(model, full_check=True)
    model = for_reference(model)
    feeds = dict(zip(ids, inputs, strict=True))
    if engine == "onnxruntime":
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        results = session.run(None, feeds)
    else:
        results = ReferenceEvaluator(model, new_ops=new_ops).run(None, feeds)
    for output, result in zip(outputs, results, strict=True):
        assert list(result.shape) == builder.getTensorShape(output), output
    return results


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _conv2d(x, w, pads, strides):
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    oh, ow = (h - kh) // strides[0] + 1, (wd - kw) // strides[1] + 1
    out = np.zeros((n, f, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = x[
                :, :, i * strides[0] : i * strides[0] + kh, j * strides[1] : j * strides[1] + kw
            ]
            out[:, :, i, j] = np.einsum("nchw,fchw->nf", patch, w)
    return out


X, Y = _floats(3, 4), _floats(3, 4)
P = _positive(3, 4)
IMAGE, KERNEL = _floats(1, 2, 5, 5), _floats(3, 2, 3, 3)
I64 = np.array([2, 0, 1], np.int64)

# name -> (build(builder, *input_ids) -> id(s), inputs, numpy(*inputs) -> expected(s))
STANDARD_CASES = {
    "add": (lambda b, x, y: b.aiOnnx.add([x, y]), [X, Y], np.add),
    "sub": (lambda b, x, y: b.aiOnnx.sub([x, y]), [X, Y], np.subtract),
    "mul": (lambda b, x, y: b.aiOnnx.mul([x, y]), [X, Y], np.multiply),
    "div": (lambda b, x, y: b.aiOnnx.div([x, y]), [X, P], np.divide),
    "pow": (lambda b, x, y: b.aiOnnx.pow([x, y]), [P, Y], np.power),
    "neg": (lambda b, x: b.aiOnnx.neg([x]), [X], np.negative),
    "abs": (lambda b, x: b.aiOnnx.abs([x]), [X], np.abs),
    "exp": (lambda b, x: b.aiOnnx.exp([x]), [X], np.exp),
    "log": (lambda b, x: b.aiOnnx.log([x]), [P], np.log),
    "sqrt": (lambda b, x: b.aiOnnx.sqrt([x]), [P], np.sqrt),
    "erf": (lambda b, x: b.aiOnnx.erf([x]), [X], np.vectorize(math.erf, otypes=[np.float32])),
    "relu": (lambda b, x: b.aiOnnx.relu([x]), [X], lambda x: np.maximum(x, 0)),
    "sigmoid": (lambda b, x: b.aiOnnx.sigmoid([x]), [X], lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (lambda b, x: b.aiOnnx.tanh([x]), [X], np.tanh),
    "leakyrelu": (lambda b, x: b.aiOnnx.leakyrelu([x], alpha=0.2), [X], lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (lambda b, x: b.aiOnnx.elu([x], 0.5), [X], lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    "softmax": (lambda b, x: b.aiOnnx.softmax([x], axis=1), [X], lambda x: _softmax(x, 1)),
    "logsoftmax": (lambda b, x: b.aiOnnx.logsoftmax([x], 1), [X], lambda x: np.log(_softmax(x, 1))),
    "clip": (lambda b, x: b.aiOnnx.clip([x, b.aiOnnx.constant(np.float32(-0.5)), b.aiOnnx.constant(np.float32(0.5))]), [X], lambda x: np.clip(x, -0.5, 0.5)),
    "max": (lambda b, x, y: b.aiOnnx.max([x, y, x]), [X, Y], np.maximum),
    "sum": (lambda b, x, y: b.aiOnnx.sum([x, y, y]), [X, Y], lambda x, y: x + 2 * y),
    "matmul": (lambda b, x, y: b.aiOnnx.matmul([x, y]), [X, _floats(4, 2)], np.matmul),
    "gemm": (lambda b, x, y, c: b.aiOnnx.gemm([x, y, c], 0.5, 2.0, 0, 1), [X, _floats(5, 4), _floats(5)], lambda x, y, c: 0.5 * x @ y.T + 2 * c),
    "conv": (lambda b, x, w: b.aiOnnx.conv([x, w], pads=[1, 1, 1, 1], strides=[2, 2]), [IMAGE, KERNEL], lambda x, w: _conv2d(x, w, [1, 1, 1, 1], [2, 2])),
    "maxpool": (lambda b, x: b.aiOnnx.maxpool([x], 1, [2, 2], strides=[2, 2]), [IMAGE[:, :, :4, :4]], lambda x: x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))),
    "averagepool": (lambda b, x: b.aiOnnx.averagepool([x], [2, 2], strides=[2, 2]), [IMAGE[:, :, :4, :4]], lambda x: x.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5))),
    "globalaveragepool": (lambda b, x: b.aiOnnx.globalaveragepool([x]), [IMAGE], lambda x: x.mean(axis=(2, 3), keepdims=True)),
    "batchnormalization": (
        lambda b, x, s, o, m, v: b.aiOnnx.batchnormalization([x, s, o, m, v], 1, epsilon=1e-3)[0],
        [IMAGE, _positive(2), _floats(2), _floats(2), _positive(2)],
        lambda x, s, o, m, v: (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-3) * s[:, None, None] + o[:, None, None],
    ),
    "reshape": (lambda b, x: b.reshape_const(b.aiOnnx, [x], [2, 6]), [X], lambda x: x.reshape(2, 6)),
    "transpose": (lambda b, x: b.aiOnnx.transpose([x], perm=[1, 0]), [X], np.transpose),
    "concat": (lambda b, x, y: b.aiOnnx.concat([x, y], 1), [X, Y], lambda x, y: np.concatenate([x, y], 1)),
    "split": (lambda b, x: b.aiOnnx.split([x], 2, axis=1, split=[1, 3]), [X], lambda x: np.split(x, [1], axis=1)),
    "slice": (lambda b, x: b.aiOnnx.slice([x, b.aiOnnx.constant(np.array([1], np.int64)), b.aiOnnx.constant(np.array([3], np.int64))]), [X], lambda x: x[1:3]),
    "gather": (lambda b, x, i: b.aiOnnx.gather([x, i], axis=0), [X, I64], lambda x, i: x[i]),
    "squeeze_unsqueeze": (lambda b, x: b.aiOnnx.squeeze([b.aiOnnx.unsqueeze([x], [0, 3])], axes=[0]), [X], lambda x: x[:, :, None]),
    "flatten": (lambda b, x: b.aiOnnx.flatten([x], axis=2), [IMAGE], lambda x: x.reshape(2, 25)),
    "tile": (lambda b, x: b.aiOnnx.tile([x, b.aiOnnx.constant(np.array([2, 1], np.int64))]), [X], lambda x: np.tile(x, (2, 1))),
    "expand": (lambda b, x: b.aiOnnx.expand([x, b.aiOnnx.constant(np.array([2, 3, 4], np.int64))]), [X], lambda x: np.broadcast_to(x, (2, 3, 4))),
    "pad": (lambda b, x: b.aiOnnx.pad([x, b.aiOnnx.constant(np.array([0, 1, 0, 2], np.int64))]), [X], lambda x: np.pad(x, ((0, 0), (1, 2)))),
    "reducesum": (lambda b, x: b.aiOnnx.reducesum([x], axes=[1], keepdims=0), [X], lambda x: x.sum(axis=1)),
    "reducemean": (lambda b, x: b.aiOnnx.reducemean([x], axes=[0]), [X], lambda x: x.mean(axis=0, keepdims=True)),
    "reducemax": (lambda b, x: b.aiOnnx.reducemax([x]), [X], lambda x: x.max(keepdims=True)),
    "reducel2": (lambda b, x: b.aiOnnx.reducel2([x], axes=[1], keepdims=0), [X], lambda x: np.sqrt((x**2).sum(axis=1))),
    "argmax": (lambda b, x: b.aiOnnx.argmax([x], axis=1, keepdims=0), [X], lambda x: x.argmax(axis=1)),
    "topk": (lambda b, x: b.aiOnnx.topk([x, b.aiOnnx.constant(np.array([2], np.int64))], axis=1), [X], lambda x: (-np.sort(-x, axis=1)[:, :2], np.argsort(-x, axis=1)[:, :2])),
    "cast": (lambda b, x: b.aiOnnx.cast([x], "INT32"), [X * 10], lambda x: x.astype(np.int32)),
    "where_less": (lambda b, x, y: b.aiOnnx.where([b.aiOnnx.less([x, y]), x, y]), [X, Y], np.minimum),
    "logical_and_equal": (lambda b, x, y: b.aiOnnx.logical_and([b.aiOnnx.equal([x, x]), b.aiOnnx.greater([x, y])]), [X, Y], np.greater),
    "cumsum": (lambda b, x: b.aiOnnx.cumsum([x, b.aiOnnx.constant(np.array(1, np.int64))], reverse=1), [X], lambda x: np.flip(np.cumsum(np.flip(x, 1), 1), 1)),
    "onehot": (lambda b, i: b.aiOnnx.onehot([i, b.aiOnnx.constant(np.array(3, np.int64)), b.aiOnnx.constant(np.array([0, 1], np.float32))]), [I64], lambda i: np.eye(3, dtype=np.float32)[i]),
    "range": (lambda b: b.aiOnnx.range([b.aiOnnx.constant(np.array(1, np.int64)), b.aiOnnx.constant(np.array(7, np.int64)), b.aiOnnx.constant(np.array(2, np.int64))]), [], lambda: np.arange(1, 7, 2)),
    "dropout_inference": (lambda b, x: b.aiOnnx.dropout([x], 1, 0.3)[0], [X], lambda x: x),
}  # fmt: skip


# onnx.reference's BatchNormalization-9 does not follow the operator's formula (onnxruntime does).
REFERENCE_EVALUATOR_DIFFERS = {"batchnormalization"}


@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
@pytest.mark.parametrize("name", sorted(STANDARD_CASES))
def test_standard_operator_matches_numpy(name, engine):
    if engine == "reference" and name in REFERENCE_EVALUATOR_DIFFERS:
        pytest.skip("onnx.reference disagrees with the ONNX operator definition here")
    build, inputs, reference = STANDARD_CASES[name]
    results = _run(build, inputs, engine=engine)
    expected = reference(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    for result, want in zip(results, expected, strict=True):
        np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("version", range(6, 12))
def test_same_model_on_every_onnx_version(version):
    def build(b, x, y):
        return b.aiOnnx.softmax([b.aiOnnx.add([b.aiOnnx.matmul([x, y]), x])], axis=1)

    square = _floats(3, 3)
    (result,) = _run(build, [square, square], opsets={"ai.onnx": version})
    np.testing.assert_allclose(result, _softmax(square @ square + square, 1), rtol=1e-5)


# -- ai.graphcore, through numpy implementations of the documented semantics -------------------


def _graphcore_op(op_type, compute):
    """An onnx.reference kernel for an ai.graphcore node: compute(node_attributes, *inputs)."""

    def _run(self, *inputs, **attributes):
        result = compute(attributes, *inputs)
        return tuple(result) if isinstance(result, list) else (result,)

    return type(op_type, (OpRun,), {"op_domain": "ai.graphcore", "_run": _run})


def _reduce(values, reduction):
    return {"Sum": np.sum(values), "Mean": np.mean(values), "None": values}[reduction]


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _dynamic_slice(attributes, tensor, offset):
    index = [slice(None)] * tensor.ndim
    for axis, size, start in zip(attributes["axes"], attributes["sizes"], offset, strict=True):
        index[axis] = slice(int(start), int(start) + size)
    return tensor[tuple(index)]


def _nll(attributes, probabilities, labels):
    picked = probabilities[np.arange(len(labels)), labels]
    losses = -picked if attributes["inputIsLogProbability"] else -np.log(picked)
    return np.asarray(_reduce(losses, attributes["reduction"]), np.float32)


GRAPHCORE_OPS = [
    _graphcore_op("Gelu", lambda a, x: _gelu_tanh(x)),
    _graphcore_op("Scale", lambda a, x: x * np.float32(a["scale"])),
    _graphcore_op("ScaledAdd", lambda a, x, y: np.float32(a["scale0"]) * x + np.float32(a["scale1"]) * y),
    _graphcore_op("Atan2", lambda a, y, x: np.arctan2(y, x)),
    _graphcore_op("Fmod", lambda a, x, y: np.fmod(x, y)),
    _graphcore_op("Remainder", lambda a, x, y: np.remainder(x, y)),
    _graphcore_op("Swish", lambda a, x: x / (1 + np.exp(-x))),
    _graphcore_op("Detach", lambda a, x: x),
    _graphcore_op("Subsample", lambda a, x: x[tuple(slice(None, None, s) for s in a["strides"])]),
    _graphcore_op("Reverse", lambda a, x: np.flip(x, axis=tuple(a["dimensions"]))),
    _graphcore_op("Reshape", lambda a, x: x.reshape(a["shape"])),
    _graphcore_op("DynamicSlice", _dynamic_slice),
    _graphcore_op("L1", lambda a, x: np.asarray(np.float32(a["lambda"]) * _reduce(np.abs(x), a["reduction"]), np.float32)),
    _graphcore_op("IdentityLoss", lambda a, x: np.asarray(_reduce(x, a["reduction"]), np.float32)),
    _graphcore_op("Nll", _nll),
    _graphcore_op("Sort", lambda a, x: [np.sort(x, axis=a["axis"]), np.argsort(x, axis=a["axis"]).astype(np.int32)]),
    _graphcore_op("IncrementMod", lambda a, x: np.mod(x + np.float32(a["increment"]), np.float32(a["modulus"]))),
    _graphcore_op("Init", lambda a: np.zeros(a["shape"], np.float32)),
]  # fmt: skip

LABELS = np.array([1, 0, 3], np.int64)
PROBABILITIES = _softmax(X, 1)

GRAPHCORE_CASES = {
    "gelu": (lambda b, x: b.aiGraphcore.gelu([x]), [X], _gelu_tanh),
    "scale": (lambda b, x: b.aiGraphcore.scale([x], 2.5), [X], lambda x: 2.5 * x),
    "scaledadd": (lambda b, x, y: b.aiGraphcore.scaledadd([x, y], 0.5, -2.0), [X, Y], lambda x, y: 0.5 * x - 2 * y),
    "atan2": (lambda b, y, x: b.aiGraphcore.atan2([y, x]), [X, Y], np.arctan2),
    "fmod": (lambda b, x, y: b.aiGraphcore.fmod([x, y]), [X * 3, P], np.fmod),
    "remainder": (lambda b, x, y: b.aiGraphcore.remainder([x, y]), [X * 3, P], np.remainder),
    "swish": (lambda b, x: b.aiGraphcore.swish([x]), [X], lambda x: x / (1 + np.exp(-x))),
    "detach_then_relu": (lambda b, x: b.aiOnnx.relu([b.aiGraphcore.detach([x])]), [X], lambda x: np.maximum(x, 0)),
    # Strides that divide the shape: the Builder rounds down where the IR rounds up.
    "subsample": (
        lambda b, x: b.aiGraphcore.subsample([x], [2, 3]), [_floats(4, 6)], lambda x: x[::2, ::3]
    ),
    "reverse": (lambda b, x: b.aiGraphcore.reverse([x], [1]), [X], lambda x: x[:, ::-1]),
    "reshape": (lambda b, x: b.aiGraphcore.reshape(x, [4, 3]), [X], lambda x: x.reshape(4, 3)),
    "dynamicslice": (lambda b, x: b.aiGraphcore.dynamicslice([x, b.aiOnnx.constant(np.array([1, 2], np.int32))], [0, 1], [2, 2]), [X], lambda x: x[1:3, 2:4]),
    "l1loss": (lambda b, x: b.aiGraphcore.l1loss([x], 0.1, popart.ReductionType.Sum), [X], lambda x: 0.1 * np.abs(x).sum()),
    "identityloss": (lambda b, x: b.aiGraphcore.identityloss([x]), [X], np.mean),
    "nllloss_mean": (lambda b, p, labels: b.aiGraphcore.nllloss([p, labels]), [PROBABILITIES, LABELS], lambda p, labels: -np.log(p[np.arange(3), labels]).mean()),
    "nllloss_log_none": (lambda b, p, labels: b.aiGraphcore.nllloss([p, labels], popart.ReductionType.NoReduction, inputIsLogProbability=True), [np.log(PROBABILITIES), LABELS], lambda p, labels: -p[np.arange(3), labels]),
    "sort_then_add": (lambda b, x: b.aiOnnx.add([b.aiGraphcore.sort([x], axis=1)[0], x]), [X], lambda x: np.sort(x, 1) + x),
    "incrementmod": (lambda b, x: b.aiGraphcore.incrementmod([x], 1.5, 2.0), [P], lambda x: np.mod(x + 1.5, 2.0)),
    "init_then_add": (lambda b, x: b.aiOnnx.add([b.aiGraphcore.init([3, 4], popart.DataType.FLOAT, popart.InitType.Zero, "z"), x]), [X], lambda x: x),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GRAPHCORE_CASES))
def test_graphcore_operator_matches_numpy(name):
    build, inputs, reference = GRAPHCORE_CASES[name]
    results = _run(build, inputs, {"ai.onnx": 11, "ai.graphcore": 1}, GRAPHCORE_OPS)
    np.testing.assert_allclose(results[0], reference(*inputs), rtol=1e-5, atol=1e-6)
