"""graphcore/popart tests/integration/streamingmemory_tests/streamingmemory_attention_test.py:
three BERT-style attention layers trained under many execution strategies (batch
serialization by unrolling or by a loop, with each batch schedule; execution phases with and
without recomputation, outlining and alias zero-copy; activations, weights, optimizer state
and accumulators off chip through compute or I/O tiles; replicated tensor sharding of the
weights on and off chip over two replicas): every strategy's outputs, weight gradients and
trained weights equal those of the plain sharded model. The original runs it on IPU
hardware with ten steps; here on emulated IPUs with two."""

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import popart

BATCHES_PER_STEP = 5
BATCH = 8
HIDDEN = 16
SEQUENCE = 8
HEADS = 4
QKV_LENGTH = HIDDEN // HEADS


def _location(storage, tiles=popart.TileSet.Compute, sharding=popart.ReplicatedTensorSharding.Off):
    return popart.TensorLocationSettings(
        location=popart.TensorLocation(
            storage=storage, loadTileSet=tiles, storageTileSet=tiles,
            replicatedTensorSharding=sharding,
        ),
        minElementsForOffChip=0,
        minElementsForReplicatedTensorSharding=2,
    )  # fmt: skip


OFF_CHIP = _location(popart.TensorStorage.OffChip)
IO_OFF_CHIP = _location(popart.TensorStorage.OffChip, popart.TileSet.IO)


def _attention(builder, qkv, mask, batch):
    """Multi-head self-attention of the [batch*sequence, 3*hidden] projections `qkv`."""
    heads_shape = [batch, SEQUENCE, HEADS, QKV_LENGTH]

    def heads(index, transpose):
        part = builder.aiOnnxOpset9.slice(
            [qkv], axes=[1], starts=[index * HIDDEN], ends=[(index + 1) * HIDDEN]
        )
        part = builder.reshape_const(builder.aiOnnx, [part], heads_shape)
        return builder.aiOnnx.transpose([part], perm=[0, 2, 3, 1] if transpose else [0, 2, 1, 3])

    q, kt, v = heads(0, False), heads(1, True), heads(2, False)
    with builder.nameScope("Z"):
        scores = builder.aiOnnx.matmul([q, kt])
        scale = builder.aiOnnx.constant(np.array(1 / np.sqrt(QKV_LENGTH), np.float32), "C")
        scores = builder.aiOnnx.add([builder.aiOnnx.mul([scores, scale]), mask], "ApplyMask")
        z = builder.aiOnnx.matmul([builder.aiOnnx.softmax([scores], axis=-1), v])
        z = builder.aiOnnx.transpose([z], perm=[0, 2, 1, 3])
        return builder.reshape_const(builder.aiOnnx, [z], [SEQUENCE * batch, HIDDEN])


def _run(tmp_path, index, variant, qkv_data, inputs, masks):
    replicas = variant.get("replication", 1)
    phased = variant.get("phased", False)
    stages = variant.get("stages", 2)
    layers = 3
    stride = variant.get("stride", 2 // stages)
    batch = BATCH // replicas
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.onnx.ml": 1, "ai.graphcore": 1})
    mask = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch, 1, 1, SEQUENCE]), "mask")
    x_in = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch * SEQUENCE, HIDDEN]), "x_in")
    anchors = {}
    x = x_in
    for layer in range(layers):
        qkv = builder.addInitializedInputTensor(qkv_data, f"qkv_{layer}")
        anchors[popart.reservedGradientPrefix() + qkv] = popart.AnchorReturnType("All")
        with (
            builder.virtualGraph(layer % stages if phased else layer),
            builder.executionPhase(layer * stride),
        ):
            x = _attention(builder, builder.aiOnnx.matmul([x, qkv]), mask, batch)
    last = layers - 1
    with (
        builder.virtualGraph(last % stages if phased else last),
        builder.executionPhase(last * stride),
    ):
        loss = builder.aiGraphcore.l1loss([x], 0.2, popart.ReductionType.Sum)
    gradients = list(anchors)
    anchors[x] = popart.AnchorReturnType("All")

    opts = popart.SessionOptions()
    opts.executionPhaseSettings.stages = stages
    opts.executionPhaseSettings.phases = layers * stride if phased else 0
    opts.enableOutlining = variant.get("outlining", False)
    if "phase_schedule" in variant:
        opts.executionPhaseSettings.schedule = variant["phase_schedule"]
    recompute = variant.get("recompute", False)
    opts.autoRecomputation = (
        popart.RecomputationType.Standard if recompute else popart.RecomputationType.NoRecompute
    )
    opts.outlineThreshold = -np.inf
    opts.enableOutliningCopyCostPruning = False
    opts.virtualGraphMode = (
        popart.VirtualGraphMode.ExecutionPhases if phased else popart.VirtualGraphMode.Manual
    )
    opts.explicitRecomputation = recompute
    opts.aliasZeroCopy = variant.get("alias_zero_copy", False)
    opts.batchSerializationSettings.factor = variant.get("batch_serialize", 1)
    if "batch_schedule" in variant:
        opts.batchSerializationSettings.batchSchedule = variant["batch_schedule"]
    if "batch_concat" in variant:
        concat = variant["batch_concat"]
        opts.batchSerializationSettings.concatOnVirtualGraphChange = concat
        opts.batchSerializationSettings.concatOnExecutionPhaseChange = concat
        if not concat:
            opts.executionPhaseSettings.activationIOSchedule = (
                popart.ExecutionPhaseIOSchedule.OnDemand
            )
    if variant.get("loop"):
        opts.batchSerializationSettings.transformContext = (
            popart.BatchSerializationTransformContext.Bwd
        )
        opts.batchSerializationSettings.method = popart.BatchSerializationMethod.Loop
    if "locations" in variant:
        for kind in ("activation", "weight", "optimizerState", "accumulator"):
            setattr(opts, f"{kind}TensorLocationSettings", variant["locations"])
    if "weight_locations" in variant:
        opts.weightTensorLocationSettings = variant["weight_locations"]
    if replicas > 1:
        opts.replicatedGraphCount = replicas
        opts.enableReplicatedGraphs = True
    if "io_tiles" in variant:
        opts.numIOTiles = variant["io_tiles"]

    ipus = (stages if phased else layers + 1) * replicas
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus, "tilesPerIPU": 1472})
    with device:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(BATCHES_PER_STEP, anchors),
            userOptions=opts,
            loss=loss,
            optimizer=popart.ConstSGD(0.1),
            patterns=popart.Patterns(popart.PatternsLevel.Default),
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        results = session.initAnchorArrays()
        # Each replica streams its part of the batch: the host arrays split along the batch.
        feed = {x_in: inputs, mask: masks}
        if replicas > 1:
            feed = {
                x_in: inputs.reshape(BATCHES_PER_STEP, replicas, -1, HIDDEN),
                mask: masks.reshape(BATCHES_PER_STEP, replicas, batch, 1, 1, SEQUENCE),
            }
        step = popart.PyStepIO(feed, results)
        for _ in range(2):
            session.run(step)
        path = tmp_path / f"attention_{index}.onnx"
        session.modelToHost(str(path))
    if replicas > 1:  # the replicas' gradients summed, their outputs joined
        for key, value in results.items():
            if key in gradients:
                results[key] = value.sum(axis=1)
            else:
                results[key] = value.reshape(BATCHES_PER_STEP, SEQUENCE * BATCH, HIDDEN)
    return results, onnx.load(str(path))


def _variants():
    common = dict(phased=True, recompute=True, alias_zero_copy=True, batch_serialize=4,
                  replication=2, locations=IO_OFF_CHIP, io_tiles=192)  # fmt: skip
    variants = [
        {},  # the reference
        dict(batch_serialize=4),
        dict(outlining=True, recompute=True, alias_zero_copy=True, locations=OFF_CHIP),
        dict(phased=True, locations=OFF_CHIP),
        dict(phased=True, outlining=True, locations=OFF_CHIP),
        dict(phased=True, outlining=True, recompute=True, locations=OFF_CHIP),
        dict(phased=True, outlining=True, recompute=True, alias_zero_copy=True, locations=OFF_CHIP),
        dict(common, stages=1, stride=4, outlining=True, loop=True, batch_concat=False,
             batch_schedule=popart.BatchSerializationBatchSchedule.OverlapOnCompute),
        dict(common, stages=1, stride=1, batch_concat=True,
             phase_schedule=popart.ExecutionPhaseSchedule.BatchClusteredIO),
    ]  # fmt: skip
    for schedule in (
        popart.BatchSerializationBatchSchedule.Scheduler,
        popart.BatchSerializationBatchSchedule.Isomorphic,
        popart.BatchSerializationBatchSchedule.OverlapOnIo,
        popart.BatchSerializationBatchSchedule.OverlapOnCompute,
    ):
        variants.append(
            dict(common, stages=1, stride=4, batch_concat=False, batch_schedule=schedule)
        )
    for outlining in (False, True):
        for storage in (popart.TensorStorage.OnChip, popart.TensorStorage.OffChip):
            variants.append(dict(
                phased=True, outlining=outlining, recompute=outlining,
                alias_zero_copy=outlining, replication=2, locations=OFF_CHIP,
                weight_locations=_location(
                    storage, sharding=popart.ReplicatedTensorSharding.On
                ),
            ))  # fmt: skip
    return variants


@pytest.mark.slow
@pytest.mark.follows("test_attention_streamingmemory")
def test_attention_streamingmemory(tmp_path):
    rng = np.random.default_rng(0xDEAD1337)
    qkv_data = rng.normal(0, 0.02, [HIDDEN, HIDDEN * 3]).astype(np.float32)
    # Batch i of a step attends to its first i positions.
    positions = np.arange(SEQUENCE).reshape(1, 1, 1, SEQUENCE)
    masks = np.stack([np.broadcast_to(positions < i, [BATCH, 1, 1, SEQUENCE])
                      for i in range(BATCHES_PER_STEP)])  # fmt: skip
    masks = np.ascontiguousarray((1 - masks.astype(np.float32)) * -1000.0, np.float32)
    inputs = rng.normal(0, 0.02, [BATCHES_PER_STEP, BATCH * SEQUENCE, HIDDEN]).astype(np.float32)

    variants = _variants()
    reference, reference_model = _run(tmp_path, 0, variants[0], qkv_data, inputs, masks)
    for index, variant in enumerate(variants[1:], start=1):
        results, model = _run(tmp_path, index, variant, qkv_data, inputs, masks)
        for key, value in reference.items():
            np.testing.assert_allclose(results[key], value, rtol=1e-5, atol=1e-8,
                                       err_msg=f"{key} of variant {variant}")  # fmt: skip
        for expected, actual in zip(reference_model.graph.initializer, model.graph.initializer,
                                    strict=True):  # fmt: skip
            np.testing.assert_allclose(numpy_helper.to_array(actual),
                                       numpy_helper.to_array(expected), rtol=1e-5, atol=1e-8,
                                       err_msg=f"{expected.name} of variant {variant}")  # fmt: skip
