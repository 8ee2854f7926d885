"""The model of the original's streaming-memory tests (`streamingmemory_test_0.py`'s
`run_model` and `check_model`): a chain of matmul layers with an L1 loss, trained in one of
three execution modes (normal, phased over execution phases, pipelined), with tensor
location settings for activations, weights, optimizer state and accumulators (on or off
chip, with or without replicated tensor sharding), then saved with `modelToHost`. Where a
tensor lives must not change the numbers: every variant's weights must equal the plain
model's.

The original runs it on IPU hardware with 37x37 layers; here on emulated IPUs with 7x7 ones
(still a prime, so sharded tensors need padding) and fewer steps.
"""

from __future__ import annotations

import math
import pathlib
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

import popart

DSIZE = 7


def _location(storage, sharding) -> Any:
    return popart.TensorLocationSettings(
        location=popart.TensorLocation(
            storage=storage,
            loadTileSet=popart.TileSet.Compute,
            storageTileSet=popart.TileSet.Compute,
            replicatedTensorSharding=sharding,
        ),
        minElementsForOffChip=0,
        minElementsForReplicatedTensorSharding=2,
    )


ON_CHIP = _location(popart.TensorStorage.OnChip, popart.ReplicatedTensorSharding.Off)
OFF_CHIP = _location(popart.TensorStorage.OffChip, popart.ReplicatedTensorSharding.Off)
OFF_CHIP_RTS = _location(popart.TensorStorage.OffChip, popart.ReplicatedTensorSharding.On)
ON_CHIP_RTS = _location(popart.TensorStorage.OnChip, popart.ReplicatedTensorSharding.On)


def lamb_settings(is_const: bool = True) -> dict[str, tuple[float, bool]]:
    """The Adam/LAMB optimizer values the original's streaming-memory tests train with."""
    return {
        "defaultLearningRate": (0.005, is_const),
        "defaultBeta1": (0.7, is_const),
        "defaultBeta2": (0.8, is_const),
        "defaultWeightDecay": (0.1, is_const),
        "defaultEps": (1e-6, is_const),
        "lossScaling": (10.0, is_const),
    }


def run_model(
    tmpdir: pathlib.Path,
    file_name: str,
    execution_mode: str = "normal",
    enable_outlining: bool = False,
    enable_accum: bool = False,
    accum_factor: int = 1,
    activations: Any = None,
    weights: Any = None,
    optimizer_state: Any = None,
    accumulators: Any = None,
    num_layers: int = 3,
    batch_size: int = 1,
    num_iterations: int = 1,
    num_replicas: int = 1,
    optimizer: Any = None,
    reduction: Any = popart.ReductionType.Sum,
) -> onnx.ModelProto:
    """Trains the model `num_iterations` steps; its weights afterwards (modelToHost)."""
    np.random.seed(10911)
    optimizer = optimizer or popart.SGD({"defaultLearningRate": (0.5, False)})
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch_size, DSIZE, DSIZE]))
    out = ip
    vgid = {"normal": lambda i: 0, "phased": lambda i: i % 2, "pipelined": lambda i: i}
    for i in range(num_layers):
        with (
            builder.executionPhase(i),
            builder.pipelineStage(i),
            builder.virtualGraph(vgid[execution_mode](i)),
        ):
            w = builder.addInitializedInputTensor(
                np.random.rand(DSIZE, DSIZE).astype(np.float32), f"W{i}"
            )
            out = builder.aiOnnx.matmul([out, w])
            if i == num_layers - 1:
                loss = builder.aiGraphcore.l1loss([out], 0.1, reduction)
    builder.addOutputTensor(out)
    num_ipus = {"normal": 1, "phased": 2, "pipelined": 2 ** math.ceil(math.log2(num_layers))}

    opts = popart.SessionOptions()
    opts.enableOutlining = enable_outlining
    opts.enableReplicatedGraphs = num_replicas > 1
    opts.replicatedGraphCount = num_replicas
    opts.enableGradientAccumulation = enable_accum
    opts.accumulationFactor = accum_factor
    opts.accumulationAndReplicationReductionType = reduction
    for name, settings in (
        ("activation", activations),
        ("weight", weights),
        ("optimizerState", optimizer_state),
        ("accumulator", accumulators),
    ):
        if settings is not None:
            setattr(opts, f"{name}TensorLocationSettings", settings)
    if execution_mode == "normal":
        opts.virtualGraphMode = popart.VirtualGraphMode.Manual
    elif execution_mode == "phased":
        opts.executionPhaseSettings.phases = num_layers
        opts.autoRecomputation = popart.RecomputationType.NoRecompute
        opts.virtualGraphMode = popart.VirtualGraphMode.ExecutionPhases
        opts.explicitRecomputation = False
    else:
        opts.enablePipelining = True
        opts.virtualGraphMode = popart.VirtualGraphMode.Manual
        opts.autoRecomputation = popart.RecomputationType.Standard

    # Whole IPUs, as the original's hardware (a LAMB step's code does not fit 4 tiles).
    device = popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": num_replicas * num_ipus[execution_mode], "tilesPerIPU": 1472}
    )
    with device:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {}),
            optimizer=optimizer,
            loss=loss,
            patterns=popart.Patterns(popart.PatternsLevel.All),
            userOptions=opts,
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        for _ in range(num_iterations):
            data = np.random.rand(num_replicas, accum_factor, batch_size, DSIZE, DSIZE)
            session.run(popart.PyStepIO({ip: data.astype(np.float32)}, anchors))
        path = tmpdir / file_name
        session.modelToHost(str(path))
    return onnx.load(str(path))


def check_model(reference: onnx.ModelProto, other: onnx.ModelProto) -> None:
    """Every initializer the two models share is equal (the original's tolerances)."""
    theirs = {t.name: numpy_helper.to_array(t) for t in other.graph.initializer}
    compared = 0
    for tensor in reference.graph.initializer:
        if tensor.name in theirs:
            np.testing.assert_allclose(
                numpy_helper.to_array(tensor), theirs[tensor.name], rtol=1e-4, atol=1e-5,
                err_msg=tensor.name,
            )  # fmt: skip
            compared += 1
    assert compared >= 3  # at least the layers' weights


def trained_weights_moved(reference: onnx.ModelProto) -> None:
    """The weights changed from their initial values (the runs trained something)."""
    np.random.seed(10911)
    initial = np.random.rand(DSIZE, DSIZE).astype(np.float32)
    trained = {t.name: numpy_helper.to_array(t) for t in reference.graph.initializer}
    assert not np.allclose(trained["W0"], initial)
