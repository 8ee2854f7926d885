"""SessionOptions.enableStochasticRounding: float16 results are rounded to one of their two
float16 neighbours, the upper one with probability the distance from the lower one in gaps,
so on average they keep what round-to-nearest loses; restoring the device's RNG state
repeats the rounding."""

import numpy as np

import popart

N = 4096
SMALL = 1e-4  # under half of float16's gap at 1 (2**-10): round-to-nearest drops it


def _session(stochastic: bool):
    builder = popart.Builder()
    a = builder.addInputTensor(popart.TensorInfo("FLOAT16", [N]))
    b = builder.addInputTensor(popart.TensorInfo("FLOAT16", [N]))
    out = builder.aiOnnx.add([a, b])
    options = popart.SessionOptions()
    options.enableStochasticRounding = stochastic
    options.enableLoadAndOffloadRNGState = True
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        userOptions=options,
        deviceInfo=popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    stepio = popart.PyStepIO({a: np.ones(N, np.float16), b: np.full(N, SMALL, np.float16)}, anchors)

    def run():
        session.run(stepio)
        return np.copy(anchors[out])

    return session, run


def test_results_are_neighbours_and_unbiased():
    _, run = _session(stochastic=True)
    result = run()
    upper = np.float16(1) + np.float16(2**-10)
    assert set(np.unique(result)) <= {np.float16(1), upper}
    # The exact sum, float16(1e-4) added to 1, lies this far into the gap above 1.
    fraction = float(np.float16(SMALL)) / 2**-10
    share = np.mean(result == upper)
    assert abs(share - fraction) < 4 * np.sqrt(fraction * (1 - fraction) / N)


def test_round_to_nearest_without_the_option():
    _, run = _session(stochastic=False)
    np.testing.assert_array_equal(run(), np.ones(N, np.float16))


def test_the_rng_state_decides_the_rounding():
    session, run = _session(stochastic=True)
    state = session.getRNGState()
    first, second = run(), run()
    assert not np.array_equal(first, second)
    session.setRNGState(state)
    np.testing.assert_array_equal(run(), first)
