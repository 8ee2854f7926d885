"""graphcore/popart tests/integration/loss_scaling_test.py: a const and a non-const loss scaling
of a loss that is no NLL/L1 loss train as unscaled SGD does, and automatic loss scaling: its
errors (inference, const loss scaling, nothing to track, pipelining without accumulation,
out-of-range settings), the loss scale doubling while gradients are small and halving while
they are large, a loss scale beyond float16's range, and the optimizer's loss scaling left
as the user set it while `finalLossScale` changes (IpuModel2; Cpu here)."""

import json
from contextlib import ExitStack

import numpy as np
import pytest
from popart_loss_scaling_checks import (
    FINAL_LOSS_SCALE,
    build_model,
    compare_with_reference,
    prepared_session,
)

import popart
from conftest import create_test_device

F16_MAX = float(np.finfo(np.float16).max)


def _loss_scaling_run(const):
    np.random.seed(1)
    c1_init = np.random.rand(1, 1).astype(np.float32)
    p1_init = np.random.rand(1, 1).astype(np.float32)
    builder = popart.Builder()
    c1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1]))
    p1 = builder.addInitializedInputTensor(p1_init)
    out = builder.aiOnnx.matmul([c1, p1])
    loss = builder.aiOnnx.reducesum([out])
    optimizer = popart.SGD(
        {
            "defaultLearningRate": (0.1, True),
            "defaultMomentum": (0.9, False),
            "lossScaling": (200, const),
        }
    )
    anchors = {name: popart.AnchorReturnType("Final") for name in (c1, p1, out)}
    session = popart.TrainingSession(
        builder.getModelProto(),
        deviceInfo=create_test_device(),
        dataFlow=popart.DataFlow(1, anchors),
        loss=loss,
        optimizer=optimizer,
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({c1: c1_init}, arrays))
    # First SGD step with momentum (as torch.optim.SGD's): the velocity is the gradient,
    # d(sum(c1 @ p1))/dp1 = c1, and the loss scaling is divided out.
    np.testing.assert_allclose(arrays[c1], c1_init)
    np.testing.assert_allclose(arrays[out], c1_init @ p1_init, rtol=1e-6)
    np.testing.assert_allclose(arrays[p1], p1_init - 0.1 * c1_init, rtol=1e-6)


@pytest.mark.follows("test_loss_scaling_with_const")
def test_loss_scaling_with_const():
    _loss_scaling_run(True)


@pytest.mark.follows("test_loss_scaling_with_nonconst")
def test_loss_scaling_with_nonconst():
    _loss_scaling_run(False)


def _als_options(bin_edge=0.5, threshold=0.2):
    options = popart.SessionOptions()
    options.automaticLossScalingSettings.enabled = True
    options.automaticLossScalingSettings.binEdgeLocation = bin_edge
    options.automaticLossScalingSettings.thresholdUpperCountProportion = threshold
    return options


def _training(builder, loss, optimizer, options, anchors=(), device=None):
    return popart.TrainingSession(
        builder.getModelProto(),
        deviceInfo=device or create_test_device(),
        dataFlow=popart.DataFlow(1, list(anchors)),
        loss=loss,
        optimizer=optimizer,
        userOptions=options,
    )


@pytest.mark.follows("test_auto_loss_scaling_with_inference_session")
def test_auto_loss_scaling_with_inference_session():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    out = builder.aiOnnx.matmul([t0, t0])
    with pytest.raises(popart.popart_exception) as error:
        popart.InferenceSession(
            builder.getModelProto(),
            deviceInfo=create_test_device(),
            dataFlow=popart.DataFlow(1, [out]),
            userOptions=_als_options(),
        )
    assert error.value.args[0].endswith("Only compatible when doing training")


@pytest.mark.follows("test_auto_loss_scaling_with_const_loss_scale_tensor")
def test_auto_loss_scaling_with_const_loss_scale_tensor():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    t1 = builder.addInitializedInputTensor(np.random.rand(2, 2).astype(np.float32))
    loss = builder.aiGraphcore.identityloss([builder.aiOnnx.matmul([t0, t1])])
    with pytest.raises(popart.popart_exception) as error:
        _training(builder, loss, popart.SGD({"lossScaling": (2, True)}), _als_options())
    assert error.value.args[0].endswith("The optimizer must have non-const loss scaling")


@pytest.mark.follows("test_auto_loss_scaling_with_no_tracked_tensors")
def test_auto_loss_scaling_with_no_tracked_tensors():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    loss = builder.aiGraphcore.identityloss([builder.aiOnnx.relu([t0])])
    with pytest.raises(popart.popart_exception) as error:
        _training(builder, loss, popart.SGD({"lossScaling": (2, False)}), _als_options(), [loss])
    assert error.value.args[0].endswith("No tracked gradient tensors of type fp16 were found.")


@pytest.mark.follows("test_auto_loss_scaling_histogram_schedule_priority")
def test_auto_loss_scaling_histogram_schedule_priority():
    model = build_model()
    options = _als_options()
    options.delayVarUpdates = True
    options.scheduleNonWeightUpdateGradientConsumersEarly = True
    options.enableOutlining = False  # as the original, for easier inspection of the IR
    session = popart.TrainingSession(
        fnModel=model.proto,
        deviceInfo=create_test_device(),
        dataFlow=popart.DataFlow(4, [FINAL_LOSS_SCALE]),
        loss=model.loss,
        optimizer=popart.SGD({"lossScaling": (1.0, False)}),
        userOptions=options,
    )
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    histograms = [op for op in ir["maingraph"] if op["type"] == "Histogram"]
    # The ALS transform's Histogram ops, each of (near) maximal schedule priority.
    assert histograms
    assert all(float(op["attributes"]["schedulePriority"]) > 1e16 for op in histograms)


GRADIENTS = ["Gradient___init_input/1", "Gradient___init_input"]


def _simple_training(initial, options, steps=4, labels=None):
    model = build_model()
    optimizer = popart.SGD({"lossScaling": (initial, False)})
    session = prepared_session(model, optimizer, options, [*GRADIENTS, FINAL_LOSS_SCALE], steps)
    arrays = session.initAnchorArrays()
    inputs = {
        model.data: np.random.rand(steps, *model.data_shape).astype(np.float16),
        model.label: np.random.randint(0, 2, steps * 2).astype(np.int32)
        if labels is None
        else labels,
    }
    session.run(popart.PyStepIO(inputs, arrays))
    return arrays


@pytest.mark.follows("test_auto_loss_scaling_expected_loss_upscale_tensor_values")
def test_auto_loss_scaling_expected_loss_upscale_tensor_values():
    initial = float(np.finfo(np.float16).eps) * 2
    arrays = _simple_training(initial, _als_options())
    scales = arrays[FINAL_LOSS_SCALE]
    for step in range(len(scales)):
        values = np.concatenate(
            [np.abs(arrays[g][step].astype(np.float64)).ravel() for g in GRADIENTS]
        )
        # Small gradients: nearly all below the bin edge ...
        assert np.mean(values < 0.5 * F16_MAX) > 0.9
    # ... so the loss scale doubles after every weight update.
    np.testing.assert_array_equal(scales, initial * 2.0 ** np.arange(len(scales)))


@pytest.mark.follows("test_auto_loss_scaling_expected_loss_downscale_tensor_values")
def test_auto_loss_scaling_expected_loss_downscale_tensor_values():
    # A loss scale beyond float16's range (the loss scale is float32 with automatic loss
    # scaling) and a tiny bin edge: every element is in the upper bin, the scale halves.
    # No label is the ignored index (1): a step whose labels all were would have zero
    # gradients, all in the lower bin.
    arrays = _simple_training(1e20, _als_options(1e-20, 0.99), labels=np.zeros([8], np.int32))
    scales = arrays[FINAL_LOSS_SCALE]
    np.testing.assert_allclose(scales, np.float32(1e20) * 0.5 ** np.arange(len(scales)), rtol=1e-6)


@pytest.mark.follows("test_auto_loss_scaling_and_continuous_update_pipelining")
def test_auto_loss_scaling_and_continuous_update_pipelining():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    mm0 = builder.aiOnnx.matmul([t0, t0])
    loss = builder.aiGraphcore.identityloss([mm0])
    builder.virtualGraph(mm0, 0)
    builder.virtualGraph(loss, 0)
    options = _als_options()
    options.enablePipelining = True
    options.enableGradientAccumulation = False
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    with pytest.raises(popart.popart_exception) as error:
        _training(
            builder,
            loss,
            popart.SGD({"lossScaling": (2, False)}),
            options,
            [loss],
            create_test_device("IpuModel", 2),
        )
    assert error.value.args[0].endswith(
        "Automatic loss scaling is not currently supported when the 'enablePipelining' "
        "SessionOption is set to 'true', but the 'enableGradientAccumulation' SessionOption "
        "is set to 'false'"
    )


def _float16_model():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT16", [2, 2])
    t1 = builder.addInitializedInputTensor(np.random.rand(2, 2).astype(np.float16))
    mm0 = builder.aiOnnx.matmul([t0, t1])
    mm0 = builder.aiOnnx.matmul([mm0, mm0])
    return builder, builder.aiGraphcore.identityloss([mm0])


@pytest.mark.follows("test_auto_loss_scaling_threshold_upper_count_proportion_range")
@pytest.mark.parametrize("threshold", [-0.1, 0.0, 0.5, 1.0, 1.1])
def test_auto_loss_scaling_threshold_upper_count_proportion_range(threshold):
    builder, loss = _float16_model()
    with ExitStack() as stack:
        error = None
        if not 0 <= threshold <= 1:
            error = stack.enter_context(pytest.raises(popart.popart_exception))
        session = _training(
            builder,
            loss,
            popart.SGD({"lossScaling": (2, False)}),
            _als_options(0.5, threshold),
            [loss],
        )
        session.prepareDevice()
    if error:
        assert error.value.args[0].startswith(
            "Out of range value for 'thresholdUpperCountProportion'."
        )


@pytest.mark.follows("test_auto_loss_scaling_bin_edge_factor_range")
@pytest.mark.parametrize("bin_edge", [-0.1, 0.0, 0.5, 1.0, 1.1])
def test_auto_loss_scaling_bin_edge_factor_range(bin_edge):
    builder, loss = _float16_model()
    with ExitStack() as stack:
        error = None
        if not 0 <= bin_edge <= 1:
            error = stack.enter_context(pytest.raises(popart.popart_exception))
        session = _training(
            builder,
            loss,
            popart.SGD({"lossScaling": (2, False)}),
            _als_options(bin_edge, 0.2),
            [loss],
        )
    if error:
        assert error.value.args[0].startswith(
            "[AutomaticLossScale transform] Out of range value for 'binEdgeLocation'."
        )
    else:
        session.prepareDevice()


@pytest.mark.follows("test_auto_loss_scaling_with_mixed_precision_trackable_tensors")
def test_auto_loss_scaling_with_mixed_precision_trackable_tensors():
    # A float32 weight before a cast to float16: the float16 gradients after the cast are
    # tracked, so the session builds and runs.
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    w = np.random.rand(2, 2).astype(np.float32)
    t1 = builder.addInitializedInputTensor(w)
    t2 = builder.aiOnnx.cast([builder.aiOnnx.matmul([t0, t1])], "FLOAT16")
    t3 = builder.addInputTensor("FLOAT16", [2, 2])
    mm1 = builder.aiOnnx.matmul([t2, t3])
    mm1 = builder.aiOnnx.matmul([mm1, mm1])
    loss = builder.aiGraphcore.identityloss([mm1])
    session = _training(
        builder, loss, popart.SGD({"lossScaling": (2, False)}), _als_options(), [loss]
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    x = np.random.rand(2, 2).astype(np.float32)
    y = np.random.rand(2, 2).astype(np.float16)
    session.run(popart.PyStepIO({t0: x, t3: y}, arrays))
    product = (x @ w).astype(np.float32) @ y.astype(np.float32)
    expected = np.mean(product @ product)
    np.testing.assert_allclose(arrays[loss].astype(np.float32), expected, rtol=2e-2)


@pytest.mark.follows("test_auto_loss_scaling_remove_float32_from_to_track_tensors")
def test_auto_loss_scaling_remove_float32_from_to_track_tensors():
    builder = popart.Builder()
    t0 = builder.addInputTensor("FLOAT", [2, 2])
    t1 = builder.addInitializedInputTensor(np.random.rand(2, 2).astype(np.float32))
    loss = builder.aiGraphcore.identityloss([builder.aiOnnx.matmul([t0, t1])])
    with pytest.raises(popart.popart_exception) as error:
        _training(builder, loss, popart.SGD({"lossScaling": (2, False)}), _als_options(), [loss])
    assert error.value.args[0].endswith(
        "[AutomaticLossScale transform] No tracked gradient tensors of type fp16 were found."
    )


@pytest.mark.follows("test_weight_updates_for_larger_than_max_fp16")
def test_weight_updates_for_larger_than_max_fp16(tmp_path):
    def sgd(loss_scaling):
        values = ["defaultMomentum", "defaultVelocityScaling", "defaultDampening"]
        settings = {key: (0.5, False) for key in [*values, "defaultWeightDecay"]}
        return popart.SGD({"lossScaling": (loss_scaling, False), **settings})

    scales = compare_with_reference(tmp_path, [sgd(F16_MAX + 1), sgd(1000 * F16_MAX)])
    assert scales[0] == np.float32(F16_MAX + 1)


@pytest.mark.follows("test_auto_loss_scaling_update_learning_rate_without_resetting_loss_scale")
def test_auto_loss_scaling_update_learning_rate_without_resetting_loss_scale():
    np.random.seed(2)
    model = build_model()
    steps, initial = 6, 1000.0
    scaling_id = "lossScaling_FLOAT16"
    session = popart.TrainingSession(
        fnModel=model.proto,
        deviceInfo=create_test_device(),
        dataFlow=popart.DataFlow(steps, [scaling_id, FINAL_LOSS_SCALE]),
        loss=model.loss,
        optimizer=popart.SGD({"lossScaling": (initial, False), "defaultLearningRate": (20, False)}),
        userOptions=_als_options(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    inputs = {
        model.data: 10000.0 * np.random.rand(steps, *model.data_shape).astype(np.float16),
        model.label: np.random.randint(0, 2, steps * 2).astype(np.int32),
    }
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(inputs, arrays))
    # The optimizer's loss scaling (float32 with automatic loss scaling) stays; the final
    # loss scale changes after every weight update.
    assert arrays[scaling_id].dtype == np.float32
    np.testing.assert_array_equal(arrays[scaling_id], np.full([steps], initial))
    assert np.all(np.diff(arrays[FINAL_LOSS_SCALE]) != 0)
    last = arrays[FINAL_LOSS_SCALE][-1]
    session.updateOptimizerFromHost(
        popart.SGD({"lossScaling": (initial, False), "defaultLearningRate": (12, False)})
    )
    session.run(popart.PyStepIO(inputs, arrays))
    np.testing.assert_array_equal(arrays[scaling_id], np.full([steps], initial))
    # The factor is not reset by the new optimizer: the next step goes on from the last.
    assert arrays[FINAL_LOSS_SCALE][0] in (last * 2, last / 2)
