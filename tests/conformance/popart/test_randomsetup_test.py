"""graphcore/popart tests/integration/randomsetup_test.py: random ops (Dropout,
RandomUniform) are governed by the session's seed, differ from step to step, from op to op,
from call to call of a subgraph and from iteration to iteration of a Loop, and a Dropout's
backward pass uses its forward mask (Cpu)."""

import itertools

import numpy as np
import pytest

import popart

ELEMS = 100
G = popart.reservedGradientPrefix()


def _run(model_fn, steps, seed, training=True, options=None):
    """Run once; the anchors named by `model_fn`'s third result, each as [steps, ...]."""
    builder = popart.Builder()
    loss, inputs, named = model_fn(builder)
    data_flow = popart.DataFlow(steps, {t: popart.AnchorReturnType("ALL") for t in named.values()})
    common = {
        "fnModel": builder.getModelProto(),
        "dataFlow": data_flow,
        "userOptions": options or popart.SessionOptions(),
        "patterns": popart.Patterns(),
        "deviceInfo": popart.DeviceManager().createCpuDevice(),
    }
    if training:
        optimizer = popart.SGD({"defaultLearningRate": (0.1, True)})
        session = popart.TrainingSession(loss=loss, optimizer=optimizer, **common)
    else:
        session = popart.InferenceSession(**common)
    session.prepareDevice()
    session.weightsFromHost()
    session.setRandomSeed(seed)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO(inputs, anchors))
    return {
        name: anchors[t].reshape(steps, *anchors[t].shape[steps > 1 :]) for name, t in named.items()
    }


def _mask(run, name, step):
    return run[name][step] == 0


def _same_mask(run0, name0, step0, run1, name1, step1):
    np.testing.assert_array_equal(_mask(run0, name0, step0), _mask(run1, name1, step1))


def _different_mask(run0, name0, step0, run1, name1, step1):
    assert not np.array_equal(_mask(run0, name0, step0), _mask(run1, name1, step1))


def _ones(steps):
    return np.ones(ELEMS * steps, np.float32)


def _input(builder):
    return builder.addInputTensor(popart.TensorInfo("FLOAT", [ELEMS]))


def _dropout(builder, x):
    return builder.aiOnnx.dropout([x], 1, 0.5)[0]


def _loss(builder, x):
    return builder.aiGraphcore.identityloss([x], reduction=popart.ReductionType.Mean)


def _dropout_subgraph(builder, count=1):
    sub = builder.createSubgraphBuilder()
    x = sub.addUntypedInputTensor()
    for _ in range(count):
        sub.addOutputTensor(_dropout(sub, x))
    return sub


def _single_dropout(steps, subgraph_depth=0):
    def model_fn(builder):
        x = _input(builder)
        if subgraph_depth == 0:
            out = _dropout(builder, x)
        else:
            sub = _dropout_subgraph(builder)
            if subgraph_depth == 2:
                outer = builder.createSubgraphBuilder()
                inner_in = outer.addUntypedInputTensor()
                outer.addOutputTensor(outer.aiGraphcore.call([inner_in], 1, sub)[0])
                sub = outer
            out = builder.aiGraphcore.call([x], 1, sub)[0]
        named = {"dropout": out, "dropout_grad": G + x}
        return _loss(builder, out), {x: _ones(steps)}, named

    return model_fn


def _steps_differ_and_masks_match(model_fn, steps=2):
    run = _run(model_fn, steps, seed=0)
    for s in range(steps):
        _same_mask(run, "dropout", s, run, "dropout_grad", s)
    for s0, s1 in itertools.combinations(range(steps), 2):
        _different_mask(run, "dropout", s0, run, "dropout", s1)


@pytest.mark.follows("test_random_behaviour_governed_by_seed")
@pytest.mark.parametrize("use_host_copy_ops", [False, True])
def test_random_behaviour_governed_by_seed(use_host_copy_ops):
    options = popart.SessionOptions()
    options.useHostCopyOps = use_host_copy_ops
    runs = [_run(_single_dropout(1), 1, seed, options=options) for seed in (0, 0, 11583)]
    _same_mask(runs[0], "dropout", 0, runs[1], "dropout", 0)
    _different_mask(runs[0], "dropout", 0, runs[2], "dropout", 0)


@pytest.mark.follows("test_distinct_random_behaviour_per_step")
def test_distinct_random_behaviour_per_step():
    _steps_differ_and_masks_match(_single_dropout(2))


def _two_scaled_dropouts(call_subgraph):
    def model_fn(builder):
        x = _input(builder)
        scaled = [builder.aiGraphcore.scale([x], f) for f in (0.1, 0.2)]
        if call_subgraph:
            sub = _dropout_subgraph(builder)
            outs = [builder.aiGraphcore.call([s], 1, sub)[0] for s in scaled]
        else:
            outs = [_dropout(builder, s) for s in scaled]
        named = {"d0": outs[0], "d1": outs[1], "d0_grad": G + scaled[0], "d1_grad": G + scaled[1]}
        return _loss(builder, builder.aiOnnx.add(outs)), {x: _ones(1)}, named

    run = _run(model_fn, 1, seed=0)
    _different_mask(run, "d0", 0, run, "d1", 0)
    _same_mask(run, "d0", 0, run, "d0_grad", 0)
    _same_mask(run, "d1", 0, run, "d1_grad", 0)


@pytest.mark.follows("test_distinct_random_behaviour_per_op")
def test_distinct_random_behaviour_per_op():
    _two_scaled_dropouts(call_subgraph=False)


@pytest.mark.follows("test_random_op_in_subgraph")
def test_random_op_in_subgraph():
    _steps_differ_and_masks_match(_single_dropout(2, subgraph_depth=1))


@pytest.mark.follows("test_two_calls_to_subgraph_with_random_op")
def test_two_calls_to_subgraph_with_random_op():
    _two_scaled_dropouts(call_subgraph=True)


@pytest.mark.follows("test_nesting_of_subgraphs")
def test_nesting_of_subgraphs():
    _steps_differ_and_masks_match(_single_dropout(2, subgraph_depth=2))


@pytest.mark.follows("test_distinct_random_behaviour_with_subgraphs")
def test_distinct_random_behaviour_with_subgraphs():
    def model_fn(builder):
        x = _input(builder)
        sub = _dropout_subgraph(builder, count=2)
        outs = builder.aiGraphcore.call([x], 2, sub) + builder.aiGraphcore.call([x], 2, sub)
        total = builder.aiOnnx.add([builder.aiOnnx.add(outs[:2]), builder.aiOnnx.add(outs[2:])])
        named = {f"d{i}": out for i, out in enumerate(outs)}
        named["d0_grad"] = G + x
        return _loss(builder, total), {x: _ones(1)}, named

    run = _run(model_fn, 1, seed=0)
    for a, b in itertools.combinations(range(4), 2):
        _different_mask(run, f"d{a}", 0, run, f"d{b}", 0)


@pytest.mark.slow
@pytest.mark.follows("test_random_op_in_loop_body")
def test_random_op_in_loop_body():
    steps, iterations = 2, 10

    def model_fn(builder):
        x = _input(builder)
        trips = builder.aiOnnx.constant(np.array(iterations).astype(np.int64), "M")
        cond = builder.aiOnnx.constant(np.array(True), "cond")
        body = builder.createSubgraphBuilder()
        body.setGraphName("loop_body")
        counter = body.addInputTensor(popart.TensorInfo("INT64", []))
        body_cond = body.addInputTensor(popart.TensorInfo("BOOL", []))
        # Declared [ELEMS]: the Loop carries [iterations * ELEMS], whose shape wins.
        carried = body.addInputTensor(popart.TensorInfo("FLOAT", [ELEMS]))
        random = body.aiOnnx.randomuniform(shape=[ELEMS])
        offset = body.aiGraphcore.scale([counter], ELEMS)
        carried = body.aiGraphcore.dynamicupdate(
            [carried, offset, random], axes=[0], sizes=[ELEMS], noOverlap=True
        )
        body.addOutputTensor(body_cond)
        body.addOutputTensor(carried)
        start = builder.aiGraphcore.init(
            [iterations * ELEMS], popart.DataType.FLOAT, popart.InitType.NoInit
        )
        out = builder.aiOnnx.loop([trips, cond, start], 1, body)[0]
        loss = _loss(builder, out)
        return loss, {x: _ones(steps)}, {"loss": loss, "rnd": out}

    run = _run(model_fn, steps, seed=0, training=False)
    slices = [
        run["rnd"][s][i * ELEMS : (i + 1) * ELEMS] for s in range(steps) for i in range(iterations)
    ]
    assert all(((0 <= piece) & (piece < 1)).all() for piece in slices)
    for a, b in itertools.combinations(range(len(slices)), 2):
        assert not np.array_equal(slices[a], slices[b])
