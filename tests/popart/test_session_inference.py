"""InferenceSession: numbers against onnx.reference and onnxruntime, weights, random state,
reports, devices and the documented preconditions."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from small_model import build_small_model, reference_outputs

import popart


def make_session(model, device, batches_per_step=1, anchors=None, options=None, **kwargs):
    anchors = anchors if anchors is not None else [model.y]
    data_flow = popart.DataFlow(batches_per_step, anchors)
    return popart.InferenceSession(model.proto, data_flow, device, userOptions=options, **kwargs)


def run_once(session, model, x):
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({model.x: x}, anchors))
    return anchors


def test_small_model_matches_onnx_reference(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device, batches_per_step=3)
    session.prepareDevice()
    session.weightsFromHost()
    x = np.random.default_rng(1).normal(size=(3, 2, 4)).astype(np.float32)
    anchors = run_once(session, small_model, x)
    reference = ReferenceEvaluator(onnx.load_model_from_string(small_model.proto))
    expected = np.stack([reference.run(None, {small_model.x: batch})[0] for batch in x])
    np.testing.assert_allclose(anchors[small_model.y], expected, rtol=1e-5, atol=1e-6)


def test_transformer_like_model_matches_onnxruntime(ipu_model_device):
    onnxruntime = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(4)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 5, 8]), "x")
    w = builder.addInitializedInputTensor(rng.normal(size=(8, 8)).astype(np.float32))
    q = builder.aiOnnx.matmul([x, w])
    scores = builder.aiOnnx.matmul([q, builder.aiOnnx.transpose([x], perm=[0, 2, 1])])
    probabilities = builder.aiOnnx.softmax([scores], axis=2)
    y = builder.aiOnnx.reducemean([builder.aiOnnx.matmul([probabilities, x])], axes=[1])
    builder.addOutputTensor(y)
    proto = builder.getModelProto()
    session = popart.InferenceSession(proto, popart.DataFlow(2, [y]), ipu_model_device)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    data = rng.normal(size=(2, 2, 5, 8)).astype(np.float32)
    session.run(popart.PyStepIO({x: data}, anchors))
    runtime = onnxruntime.InferenceSession(proto, providers=["CPUExecutionProvider"])
    expected = np.stack([runtime.run([y], {x: batch})[0] for batch in data])
    np.testing.assert_allclose(anchors[y], expected, rtol=1e-4, atol=1e-5)


def test_intermediate_tensors_can_be_anchors(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device, anchors=[small_model.hidden])
    session.prepareDevice()
    x = np.ones((2, 4), np.float32)
    anchors = run_once(session, small_model, x)
    assert list(anchors) == [small_model.hidden]
    np.testing.assert_allclose(
        anchors[small_model.hidden], reference_outputs(small_model, x)[small_model.hidden], 1e-6
    )


def test_model_from_file_and_from_model_proto(small_model, ipu_model_device, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(small_model.proto)
    x = np.full((2, 4), 0.5, np.float32)
    results = []
    for source in (str(path), onnx.load_model(str(path))):
        session = popart.InferenceSession(
            source, popart.DataFlow(1, [small_model.y]), ipu_model_device
        )
        session.prepareDevice()
        results.append(run_once(session, small_model, x)[small_model.y])
    np.testing.assert_array_equal(results[0], results[1])


def test_consecutive_runs_reuse_the_compiled_program(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device, batches_per_step=2)
    session.prepareDevice()
    for seed in range(3):
        x = np.random.default_rng(seed).normal(size=(2, 2, 4)).astype(np.float32)
        anchors = run_once(session, small_model, x)
        np.testing.assert_allclose(
            anchors[small_model.y], reference_outputs(small_model, x)[small_model.y], 1e-5, 1e-6
        )
    assert session._program._function.experimental_get_tracing_count() == 1


def test_py_stepio_callback_reads_per_batch_and_writes_per_batch(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device, batches_per_step=3)
    session.prepareDevice()
    batches = [np.full((2, 4), value, np.float32) for value in (1.0, 2.0, 3.0)]
    outputs = [np.zeros((2, 3), np.float32) for _ in range(3)]
    calls = []

    def on_input(tensor_id, prefetch):
        calls.append(("in", tensor_id, prefetch))
        return batches[sum(call[0] == "in" for call in calls) - 1]

    def on_output(tensor_id):
        calls.append(("out", tensor_id))
        return outputs[sum(call[0] == "out" for call in calls) - 1]

    stepio = popart.PyStepIOCallback(
        on_input,
        lambda tensor_id: calls.append(("in_done", tensor_id)),
        on_output,
        lambda tensor_id: calls.append(("out_done", tensor_id)),
    )
    session.run(stepio)
    assert [call[0] for call in calls] == ["in", "in_done"] * 3 + ["out", "out_done"] * 3
    for batch, output in zip(batches, outputs, strict=True):
        np.testing.assert_allclose(
            output, reference_outputs(small_model, batch)[small_model.y], 1e-6
        )


@pytest.mark.parametrize(
    "mode", [popart.SyntheticDataMode.Zeros, popart.SyntheticDataMode.RandomNormal]
)
def test_synthetic_data_ignores_host_data_and_writes_no_anchors(
    small_model, ipu_model_device, mode
):
    options = popart.SessionOptions()
    options.syntheticDataMode = mode
    session = make_session(small_model, ipu_model_device, batches_per_step=2, options=options)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    anchors[small_model.y][...] = -7
    session.run(popart.PyStepIO({}, anchors))  # no inputs needed, none read
    assert (anchors[small_model.y] == -7).all()


# -- weights ---------------------------------------------------------------------------------


def variable_weight_session(model, device, batches_per_step=1):
    options = popart.SessionOptions()
    options.constantWeights = False
    session = make_session(model, device, batches_per_step, [model.y], options)
    session.prepareDevice()
    session.weightsFromHost()
    return session


def test_read_weights_after_weights_to_host(small_model, ipu_model_device):
    session = variable_weight_session(small_model, ipu_model_device)
    target = {small_model.w: np.ones((4, 3), np.float32)}
    # Before weightsToHost the host stream buffers are still as prepareDevice made them:
    # zeros, as in the original (no error).
    session.readWeights(popart.PyWeightsIO(target))
    np.testing.assert_array_equal(target[small_model.w], np.zeros((4, 3), np.float32))
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(target))
    np.testing.assert_array_equal(target[small_model.w], small_model.weights[small_model.w])


def test_write_weights_takes_effect_after_weights_from_host(small_model, ipu_model_device):
    session = variable_weight_session(small_model, ipu_model_device)
    x = np.ones((2, 4), np.float32)
    new_w = np.full((4, 3), 0.25, np.float32)
    session.writeWeights(popart.PyWeightsIO({small_model.w: new_w}))
    before = run_once(session, small_model, x)[small_model.y]
    np.testing.assert_allclose(before, reference_outputs(small_model, x)[small_model.y], 1e-6)
    session.weightsFromHost()
    after = run_once(session, small_model, x)[small_model.y]
    weights = {**small_model.weights, small_model.w: new_w}
    np.testing.assert_allclose(
        after, reference_outputs(small_model, x, weights)[small_model.y], 1e-6
    )


def test_reset_host_weights_from_a_model_with_other_weights(small_model, ipu_model_device):
    session = variable_weight_session(small_model, ipu_model_device)
    other = onnx.load_model_from_string(small_model.proto)
    for tensor in other.graph.initializer:
        tensor.CopyFrom(
            onnx.numpy_helper.from_array(np.zeros(tensor.dims, np.float32), tensor.name)
        )
    session.resetHostWeights(other.SerializeToString())
    session.weightsFromHost()
    assert (run_once(session, small_model, np.ones((2, 4), np.float32))[small_model.y] == 0).all()


def test_reset_host_weights_rejects_unknown_initializers_unless_told(small_model, ipu_model_device):
    session = variable_weight_session(small_model, ipu_model_device)
    other = onnx.load_model_from_string(small_model.proto)
    other.graph.initializer.append(onnx.numpy_helper.from_array(np.ones(2, np.float32), "extra"))
    other.graph.input.append(
        onnx.helper.make_tensor_value_info("extra", onnx.TensorProto.FLOAT, [2])
    )
    # The original reads only the initializers: 'extra' is not a tensor of the session.
    with pytest.raises(popart.popart_exception, match="resetWeights, no tensor 'extra'"):
        session.resetHostWeights(other)
    renamed = onnx.load_model_from_string(small_model.proto)
    renamed.graph.initializer[0].name = "not_in_the_model"
    with pytest.raises(popart.popart_exception, match="resetWeights, no tensor 'not_in_the_model'"):
        session.resetHostWeights(_same_graph(small_model, renamed))
    session.resetHostWeights(_same_graph(small_model, renamed), True)


def _same_graph(model, with_initializers: onnx.ModelProto) -> onnx.ModelProto:
    result = onnx.load_model_from_string(model.proto)
    result.graph.initializer.extend(with_initializers.graph.initializer[:1])
    return result


def test_constant_weights_refuse_write_and_reset(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device)
    session.prepareDevice()
    session.weightsFromHost()
    weights_io = popart.PyWeightsIO({small_model.w: np.ones((4, 3), np.float32)})
    with pytest.raises(popart.popart_exception, match="constantWeights"):
        session.writeWeights(weights_io)
    with pytest.raises(popart.popart_exception, match="constantWeights"):
        session.resetHostWeights(small_model.proto)


@pytest.mark.parametrize("prepare_first", [True, False])
def test_write_weights_needs_no_weights_from_host_before_it(
    small_model, ipu_model_device, prepare_first
):
    """The original's usual start: write the weights, then weightsFromHost sends them."""
    options = popart.SessionOptions()
    options.constantWeights = False
    session = make_session(small_model, ipu_model_device, options=options)
    if prepare_first:
        session.prepareDevice()
    new_w = np.full((4, 3), -0.5, np.float32)
    session.writeWeights(popart.PyWeightsIO({small_model.w: new_w}))
    if not prepare_first:
        session.prepareDevice()
    session.weightsFromHost()
    x = np.ones((2, 4), np.float32)
    weights = {**small_model.weights, small_model.w: new_w}
    np.testing.assert_allclose(
        run_once(session, small_model, x)[small_model.y],
        reference_outputs(small_model, x, weights)[small_model.y],
        1e-6,
    )


def test_write_weights_ignores_other_ids_and_checks_types(small_model, ipu_model_device):
    session = variable_weight_session(small_model, ipu_model_device)
    new_w = np.full((4, 3), 2.0, np.float32)
    # Ids that are no weight of the session are skipped, as Devicex::writeWeights does.
    session.writeWeights(popart.PyWeightsIO({"nope": np.ones(3, np.float32), small_model.w: new_w}))
    session.weightsFromHost()
    session.weightsToHost()
    target = {small_model.w: np.zeros((4, 3), np.float32), "nope": np.zeros(3, np.float32)}
    session.readWeights(popart.PyWeightsIO(target))
    np.testing.assert_array_equal(target[small_model.w], new_w)
    np.testing.assert_array_equal(target["nope"], np.zeros(3, np.float32))
    # np_utils.cpp: float64 is no PopART data type.
    with pytest.raises(popart.popart_exception, match="No numpy type float64 registered"):
        session.writeWeights(popart.PyWeightsIO({small_model.w: np.ones((4, 3))}))


def test_model_to_host_writes_the_current_weights(small_model, ipu_model_device, tmp_path):
    session = variable_weight_session(small_model, ipu_model_device)
    session.writeWeights(popart.PyWeightsIO({small_model.b: np.full(3, 9.0, np.float32)}))
    session.weightsFromHost()
    path = tmp_path / "trained.onnx"
    session.modelToHost(str(path))
    saved = {
        t.name: onnx.numpy_helper.to_array(t) for t in onnx.load_model(str(path)).graph.initializer
    }
    np.testing.assert_array_equal(saved[small_model.b], np.full(3, 9.0, np.float32))
    assert [p.name for p in tmp_path.iterdir()] == ["trained.onnx"]  # no temporary file left


def test_externally_saved_weights_move_with_their_location(
    small_model, ipu_model_device, tmp_path, monkeypatch
):
    # A relative location is relative to the working directory, as in PopART.
    monkeypatch.chdir(tmp_path)
    builder = popart.Builder(small_model.proto)
    builder.saveInitializersExternally([small_model.w], str(tmp_path / "weights.bin"))
    model_path = tmp_path / "model.onnx"
    model = onnx.load_model_from_string(builder.getModelProto())
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "weights.bin"
    onnx.save_model(model, str(model_path))
    session = popart.InferenceSession(
        str(model_path), popart.DataFlow(1, [small_model.y]), ipu_model_device
    )
    (tmp_path / "other.bin").write_bytes(b"")
    with pytest.raises(popart.popart_exception, match="No ONNX model initializers have external"):
        session.updateExternallySavedTensorLocations("other.bin", "new.bin")
    with pytest.raises(popart.popart_exception, match="already exists"):
        session.updateExternallySavedTensorLocations("weights.bin", "model.onnx")
    session.updateExternallySavedTensorLocations("weights.bin", "moved.bin")
    session.prepareDevice()
    session.modelToHost(str(tmp_path / "out.onnx"))
    reloaded = onnx.load_model(str(tmp_path / "out.onnx"))
    by_name = {t.name: onnx.numpy_helper.to_array(t) for t in reloaded.graph.initializer}
    np.testing.assert_array_equal(by_name[small_model.w], small_model.weights[small_model.w])
    assert (tmp_path / "moved.bin").exists()


def test_host_weight_sync_flags(small_model, ipu_model_device):
    session = variable_weight_session(small_model, ipu_model_device)
    assert not session.areHostWeightsInSync()
    session.copyDeviceWeightsToHost()
    assert session.areHostWeightsInSync()
    session.markHostWeightsOutOfSync()
    assert not session.areHostWeightsInSync()
    session.markHostWeightsInSync()
    assert session.areHostWeightsInSync()


# -- random state ------------------------------------------------------------------------------


def dropout_model():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [64]), "x")
    y = builder.aiOnnx.randomuniformlike([x], dtype=1)
    builder.addOutputTensor(y)
    return builder.getModelProto(), x, y


def random_run(session, x_id, y_id):
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x_id: np.zeros((2, 64), np.float32)}, anchors))
    return anchors[y_id]


def test_random_seed_makes_random_ops_repeat(ipu_model_device):
    proto, x, y = dropout_model()
    session = popart.InferenceSession(proto, popart.DataFlow(2, [y]), ipu_model_device)
    session.prepareDevice()
    session.setRandomSeed(11)
    first = random_run(session, x, y)
    assert not np.array_equal(first[0], first[1])  # each batch draws new numbers
    seed_after_first = session.getRandomSeed()
    second = random_run(session, x, y)
    assert not np.array_equal(first, second)
    session.setRandomSeed(11)
    np.testing.assert_array_equal(random_run(session, x, y), first)
    session.setRandomSeed(seed_after_first)
    np.testing.assert_array_equal(random_run(session, x, y), second)


def test_rng_state_needs_the_option_and_round_trips(small_model, ipu_model_device):
    options = popart.SessionOptions()
    options.enableLoadAndOffloadRNGState = True
    # Stochastic rounding makes the session random: setRandomSeed seeds it (a session
    # without random behaviour ignores the seed, as the original's session.cpp does).
    options.enableStochasticRounding = True
    session = make_session(small_model, ipu_model_device, options=options)
    with pytest.raises(popart.popart_exception, match="after prepareDevice"):
        session.getRNGState()
    session.prepareDevice()
    session.setRandomSeed(3)
    state = session.getRNGState()
    assert len(state) == 1 * 4 * 6 * 4 and all(0 <= word < 2**32 for word in state)
    session.setRandomSeed(4)
    assert session.getRNGState() != state
    session.setRNGState(state)
    assert session.getRNGState() == state
    with pytest.raises(popart.popart_exception, match="received rngState of size 3"):
        session.setRNGState([1, 2, 3])
    plain = make_session(small_model, ipu_model_device)
    plain.prepareDevice()
    with pytest.raises(popart.popart_exception, match="enableLoadAndOffloadRNGState"):
        plain.getRNGState()


# -- reports, tensors and other members ----------------------------------------------------------


def test_get_info_and_tensor_ids(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device)
    assert session.getInfo(small_model.hidden) == popart.TensorInfo("FLOAT", [2, 3])
    assert session.getInfo(small_model.w) == popart.TensorInfo("FLOAT", [4, 3])
    with pytest.raises(popart.popart_exception, match="No tensor 'missing'"):
        session.getInfo("missing")
    with pytest.raises(popart.popart_exception, match="after prepareDevice"):
        session.getTensorIds()
    session.prepareDevice()
    expected = {small_model.x, small_model.w, small_model.b, small_model.hidden, small_model.y}
    assert expected <= session.getTensorIds() == session.getAllTensorIds()


def test_reports_after_prepare_device(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device)
    for report in (session.getSummaryReport, session.getSerializedGraph, session.getReport):
        with pytest.raises(
            popart.popart_exception, match="must have been prepared before a report"
        ):
            report()
    session.prepareDevice()
    run_once(session, small_model, np.ones((2, 4), np.float32))
    summary = session.getSummaryReport()
    assert "Runs since the last reset: 1" in summary and "ai.onnx::MatMul: 1" in summary
    assert "Runs since the last reset: 0" in session.getSummaryReport()
    assert b'"type": "Relu"' in session.getSerializedGraph()
    # The report names the executor the session picked (the faster of its lowering and
    # onnxruntime, for a model onnxruntime computes alike).
    assert re.search(r"XLA|TensorFlow graph|onnxruntime", str(session.getReport()))


def test_cycle_count_is_the_cost_model_estimate(small_model, ipu_model_device):
    options = popart.SessionOptions()
    options.instrumentWithHardwareCycleCounter = True
    session = make_session(small_model, ipu_model_device, options=options)
    session.prepareDevice()
    # The original's order and messages (session.cpp, devicex.cpp).
    with pytest.raises(popart.popart_exception, match="Must call run before getCycleCount"):
        session.getCycleCount()
    run_once(session, small_model, np.ones((2, 4), np.float32))
    cycles = session.getCycleCount()
    assert cycles > 0
    with pytest.raises(popart.popart_exception, match="Invalid id for cycle counter"):
        session.getCycleCount("nothing")
    # A step of twice the batches costs more cycles (each batch runs the model once).
    twice = make_session(small_model, ipu_model_device, batches_per_step=2, options=options)
    twice.prepareDevice()
    run_once(twice, small_model, np.ones((2, 2, 4), np.float32))
    assert 1.5 * cycles <= twice.getCycleCount() <= 4 * cycles
    plain = make_session(small_model, ipu_model_device)
    plain.prepareDevice()
    run_once(plain, small_model, np.ones((2, 4), np.float32))
    with pytest.raises(popart.popart_exception, match="instrumentWithHardwareCycleCounter"):
        plain.getCycleCount()


def test_from_ir_builds_the_same_session(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device, batches_per_step=2)
    other = popart.InferenceSession.fromIr(session.getIr(), ipu_model_device)
    assert other.dataFlow.batchesPerStep() == 2
    other.prepareDevice()
    x = np.ones((2, 2, 4), np.float32)
    np.testing.assert_allclose(
        run_once(other, small_model, x)[small_model.y],
        reference_outputs(small_model, x)[small_model.y],
        1e-6,
    )


def test_properties(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device, batches_per_step=5)
    assert session.replicationFactor == 1 and session.accumulationFactor == 1
    assert session.dataFlow.batchesPerStep() == 5 and session.dataFlow.anchors() == [small_model.y]


def test_compile_engine_false_builds_but_cannot_run(small_model, ipu_model_device):
    options = popart.SessionOptions()
    options.compileEngine = False
    session = make_session(small_model, ipu_model_device, options=options)
    session.prepareDevice()
    with pytest.raises(popart.popart_exception, match="compileEngine is False"):
        run_once(session, small_model, np.ones((2, 4), np.float32))
    with pytest.raises(popart.popart_exception, match="compileEngine is False"):
        session.weightsFromHost()


def test_run_program_handles(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run("", popart.PyStepIO({small_model.x: np.ones((2, 4), np.float32)}, anchors), "dbg")
    with pytest.raises(popart.popart_exception, match="Unknown program handle 'other'"):
        session.run("other", popart.PyStepIO({}, anchors))


def test_run_before_prepare_device(small_model, ipu_model_device):
    session = make_session(small_model, ipu_model_device)
    with pytest.raises(popart.popart_exception, match="run may only be called after prepareDevice"):
        session.run(popart.PyStepIO({}, {}))


def test_constant_data_initializers_are_compiled_in(ipu_model_device):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 6]), "x")
    shape = builder.addInitializedInputTensor(np.array([3, 4], np.int64), "shape")
    y = builder.aiOnnx.reshape([x, shape])
    builder.addOutputTensor(y)
    session = popart.InferenceSession(
        builder.getModelProto(), popart.DataFlow(1, [y]), ipu_model_device
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_array_equal(anchors[y], data.reshape(3, 4))


def test_empty_anchors_come_back_empty(ipu_model_device):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3, 4]), "x")
    bounds = [builder.aiOnnx.constant(np.array([value], np.int64)) for value in (0, 0, 1)]
    y = builder.aiOnnx.slice([x, *bounds])
    builder.addOutputTensor(y)
    session = popart.InferenceSession(
        builder.getModelProto(), popart.DataFlow(2, [y]), ipu_model_device
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: np.ones((2, 3, 4), np.float32)}, anchors))
    assert anchors[y].shape == (2, 3, 0)


def test_two_sessions_on_one_machine(small_model):
    manager = popart.DeviceManager()
    with manager.acquireAvailableDevice(1) as first, manager.acquireAvailableDevice(1) as second:
        assert first.driverIds != second.driverIds
        outputs = []
        for device in (first, second):
            session = make_session(small_model, device)
            session.prepareDevice()
            outputs.append(
                run_once(session, small_model, np.ones((2, 4), np.float32))[small_model.y]
            )
        np.testing.assert_array_equal(outputs[0], outputs[1])


def test_model_with_a_constant_node(ipu_model_device):
    model = build_small_model(constant_multiplier=2.0)
    session = make_session(model, ipu_model_device)
    session.prepareDevice()
    x = np.ones((2, 4), np.float32)
    hidden = 2.0 * x @ model.weights[model.w]
    np.testing.assert_allclose(
        run_once(session, model, x)[model.y], np.maximum(hidden + model.weights[model.b], 0), 1e-6
    )


@pytest.mark.parametrize("offset_bytes", [0, 16], ids=["aligned", "unaligned"])
def test_large_inputs_are_read_in_place_and_left_unchanged(ipu_model_device, offset_bytes):
    # Inputs of 64 KiB or more are lent to the program (aligned) or copied first (unaligned).
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [128, 256]), "x")
    doubled = builder.aiOnnx.add([x, x])
    y = builder.aiOnnx.relu([builder.aiOnnx.sub([doubled, builder.aiOnnx.constant(
        np.array(300.0, np.float32))])])  # fmt: skip
    builder.addOutputTensor(y)
    session = popart.InferenceSession(
        builder.getModelProto(), popart.DataFlow(4, [x, y]), ipu_model_device
    )
    session.prepareDevice()
    raw = np.empty(4 * 128 * 256 * 4 + 128, np.uint8)
    start = -raw.ctypes.data % 64 + offset_bytes
    data = raw[start : start + 4 * 128 * 256 * 4].view(np.float32).reshape(4, 128, 256)
    data[...] = np.arange(data.size, dtype=np.float32).reshape(data.shape) % 509
    before = data.copy()
    for _ in range(2):
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: data}, anchors))
        np.testing.assert_array_equal(anchors[y], np.maximum(before * 2 - 300, 0))
        np.testing.assert_array_equal(anchors[x], before)
        assert not np.shares_memory(anchors[x], data)
    np.testing.assert_array_equal(data, before)


def _half_attention_outputs(x):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    xs = builder.addInputTensor(popart.TensorInfo("FLOAT16", list(x.shape)), "x")
    scores = builder.aiOnnx.matmul([xs, builder.aiOnnx.transpose([xs], perm=[0, 2, 1])])
    probabilities = builder.aiOnnx.softmax([scores], axis=2)
    log_probabilities = builder.aiOnnx.logsoftmax([scores], axis=2)
    outputs = [probabilities, log_probabilities, builder.aiOnnx.matmul([probabilities, xs])]
    for output in outputs:
        builder.addOutputTensor(output)
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, outputs),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({xs: x}, anchors))
    return [anchors[output] for output in outputs]


def test_half_precision_results_do_not_depend_on_the_executor(monkeypatch):
    # PopART sums a half-precision product in float partials (willow/src/op/matmul.cpp:
    # MatMulPartialsType::FLOAT by default); XLA sums half softmaxes in float32 too. A
    # TensorFlow graph's half kernels round each partial sum: the engine's graph executor
    # must give XLA's numbers, whichever it picks, but for a rare element (their float32
    # dot products sum in different orders: on an AVX-512 host one score of 18432 rounds
    # to the next half value, and its exponential differs by a few units in the last
    # place; rounded partial sums made a third of the results differ).
    x = (np.random.default_rng(3).normal(size=(2, 96, 64)) * 0.2).astype(np.float16)
    results = {}
    for executor in ("graph", "xla"):
        monkeypatch.setenv("OPENIPU_COMPILE", executor)
        results[executor] = _half_attention_outputs(x)
    for graph_result, xla_result in zip(results["graph"], results["xla"], strict=True):
        assert graph_result.dtype == np.float16
        ulps = np.abs(graph_result.view(np.int16).astype(np.int32) - xla_result.view(np.int16))
        assert np.count_nonzero(ulps) <= graph_result.size // 1000
        np.testing.assert_allclose(graph_result, xla_result, rtol=1e-2)
    wide = x.astype(np.float64)
    scores = wide @ wide.transpose(0, 2, 1)
    shifted = scores - scores.max(axis=2, keepdims=True)
    expected = np.exp(shifted) / np.exp(shifted).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(results["graph"][0], expected, rtol=5e-3, atol=1e-4)
