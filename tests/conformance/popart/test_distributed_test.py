"""graphcore/popart tests/integration/distributed_test.py: under PopRun (2 instances with 2
replicas and with 4; the original also runs 4 with 4, left out here for the suite's time),
each instance builds a training session whose weight only
instance 0 initialises (42; the others 0) and calls `broadcastWeights` before preparing
the device: every instance's anchors then agree (the output, the input plus the weight,
is 42 everywhere). The test launches this file through PopRun (openipu's, on emulated
IPUs), as the original does."""

import argparse
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest


def run_poprun_broadcast_weights():
    import popart
    import popdist

    parser = argparse.ArgumentParser()
    parser.add_argument("--tmpdir")
    args = parser.parse_args()
    popdist.init()
    builder = popart.Builder()
    i_1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]), debugContext="i_1")
    initial_value = 42.0 if popdist.getInstanceIndex() == 0 else 0.0
    w_1 = builder.addInitializedInputTensor(
        np.array([initial_value], np.float32), debugContext="w_1"
    )
    o = builder.aiOnnx.add([i_1, w_1])
    loss = builder.aiGraphcore.identityloss([o])
    device = popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 4})
    with device:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            loss=loss,
            optimizer=popart.ConstSGD(0.01),
            deviceInfo=device,
        )
        session.broadcastWeights()
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({i_1: np.array([0.0], np.float32)}, anchors))
    name = (
        f"test_poprun_broadcast_weights_{popdist.getInstanceIndex()}_"
        f"{popdist.getNumInstances()}_{popdist.getNumTotalReplicas()}.pkl"
    )
    with open(pathlib.Path(args.tmpdir) / name, "wb") as handle:
        pickle.dump(anchors, handle)


@pytest.mark.slow
@pytest.mark.follows("test_poprun_broadcast_weights")
@pytest.mark.parametrize("instances, replicas", [(2, 2), (2, 4)], ids=["2x2", "2x4"])
def test_poprun_broadcast_weights(tmp_path, instances, replicas):
    command = [
        sys.executable,
        "-m",
        "openipu._src.distributed.poprun",
        "--offline-mode=on",
        "--num-instances",
        str(instances),
        "--num-replicas",
        str(replicas),
        "--mpi-global-args=--allow-run-as-root",
        sys.executable,
        str(pathlib.Path(__file__).resolve()),
        "--tmpdir",
        str(tmp_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    anchors = []
    for index in range(instances):
        name = f"test_poprun_broadcast_weights_{index}_{instances}_{replicas}.pkl"
        with open(tmp_path / name, "rb") as handle:
            anchors.append(pickle.load(handle))
    for instance_anchors in anchors:
        (output,) = instance_anchors.values()
        np.testing.assert_array_equal(output, [42.0])


if __name__ == "__main__":
    # PopRun starts this file in each instance.
    run_poprun_broadcast_weights()
