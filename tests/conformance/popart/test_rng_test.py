"""graphcore/popart tests/integration/session_api_tests/rng_test.py: the RNG state a
training session with stochastic rounding offloads (getRNGState/setRNGState): restoring it
repeats a series of runs, an inference session run in between changes it, a state of the
wrong size is refused; with synthetic data there is no state (IpuModel; the original's first
scenario ran on hardware only)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device

SHAPE = [100, 100]


def _model():
    np.random.seed(0)
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("FLOAT16", SHAPE))
    w0 = builder.addInitializedInputTensor(np.random.rand(*SHAPE).astype(np.float16))
    out = builder.aiOnnx.matmul([i0, w0])
    loss = builder.aiGraphcore.l1loss([out], 0.1)
    return builder, i0, out, loss


@pytest.mark.follows("test_rng_set_and_get")
@pytest.mark.parametrize("replicated", [True, False])
def test_rng_set_and_get(replicated):
    builder, i0, out, loss = _model()
    replicas = 2 if replicated else 1
    device = create_test_device("IpuModel", num_ipus=replicas)
    options = popart.SessionOptions()
    options.enableLoadAndOffloadRNGState = True
    options.enableStochasticRounding = True
    options.constantWeights = False
    options._enableRngStateManagement = True
    if replicated:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replicas
    bps = 5
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(bps, [out]),
        loss=loss,
        optimizer=popart.SGD({"defaultMomentum": (0.01, True)}),
        deviceInfo=device,
        userOptions=options,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    init_rng = session.getRNGState()
    interfering = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(bps, [out]),
        deviceInfo=device,
        userOptions=options,
    )
    interfering.prepareDevice()
    inference_anchors = interfering.initAnchorArrays()
    data = np.random.rand(bps * replicas, 100, 100).astype(np.float16)

    def run_training():
        session.weightsFromHost()
        session.run(popart.PyStepIO({i0: data}, anchors))
        return session.getRNGState(), anchors[out].tolist()

    def run_interfering():
        interfering.weightsFromHost()
        interfering.run(popart.PyStepIO({i0: data}, inference_anchors))

    # Training twice from the initial state.
    session.setRNGState(init_rng)
    rng, pre1 = run_training()
    rng2, output1 = run_training()
    assert rng != rng2
    # The same, with an inference run between whose effect on the state is undone.
    session.setRNGState(init_rng)
    rng, pre2 = run_training()
    run_interfering()
    session.setRNGState(rng)
    _, output2 = run_training()
    assert output1 == output2
    # Not undone: the second series differs.
    session.setRNGState(init_rng)
    _, pre3 = run_training()
    run_interfering()
    _, output3 = run_training()
    assert pre1 == pre2 == pre3
    assert output3 != output1
    # Any state of the right size is taken back as given; one of another size is refused.
    init_rng = session.getRNGState()
    new_rng = list(range(len(init_rng)))
    session.setRNGState(new_rng)
    assert session.getRNGState() == new_rng
    session.setRNGState(init_rng)
    assert session.getRNGState() == init_rng
    with pytest.raises(popart.popart_exception) as e_info:
        session.setRNGState(init_rng + [0])
    assert e_info.value.args[0].startswith("Devicex::setRngStateValue received rngState of size")


@pytest.mark.follows("test_rng_set_and_get_in_case_of_synthetic_data")
def test_rng_set_and_get_in_case_of_synthetic_data():
    builder, _, out, loss = _model()
    device = create_test_device("IpuModel")

    def training_session(synthetic):
        options = popart.SessionOptions()
        options.enableLoadAndOffloadRNGState = True
        if synthetic:
            options.syntheticDataMode = popart.SyntheticDataMode.RandomNormal
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, [out]),
            loss=loss,
            optimizer=popart.SGD({"defaultMomentum": (0.01, True)}),
            deviceInfo=device,
            userOptions=options,
        )
        session.prepareDevice()
        return session

    session, session_synthetic = training_session(False), training_session(True)
    rng, rng_synthetic = session.getRNGState(), session_synthetic.getRNGState()
    assert len(rng_synthetic) == 0 and rng != rng_synthetic
    session_synthetic.setRNGState(rng)
    assert len(session_synthetic.getRNGState()) == 0
