"""The batches of an inference step run together (vectorized) and give what the loop over
them gives, and what onnxruntime gives batch by batch."""

from __future__ import annotations

import numpy as np
import pytest
from reference_models import for_reference

import popart
from openipu._src.engine.compile_policy import CompileMode
from openipu._src.popart.session import step_program

BATCH, CHANNELS, SIZE = 2, 3, 6


def mixed_model() -> tuple[bytes, str, dict[str, str]]:
    """Ops whose meaning depends on the batch axis (a reduction over it, a reshape that folds
    it, a softmax over the first axis), a pool, 3-D matmuls and a random op."""
    rng = np.random.default_rng(3)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    ops = builder.aiOnnx
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [BATCH, CHANNELS, SIZE, SIZE]), "x")

    scale = builder.addInitializedInputTensor(rng.normal(size=(CHANNELS, 1, 1)).astype(np.float32))
    scaled = ops.relu([ops.mul([x, scale])])
    pooled = ops.maxpool([scaled], num_outputs=1, kernel_shape=[2, 2], strides=[2, 2])[0]
    batch_mean = ops.reducemean([pooled], axes=[0], keepdims=1)  # over the batch
    centred = ops.sub([pooled, batch_mean])
    rows = ops.reshape([centred, ops.constant(np.array([BATCH * CHANNELS, 9], np.int64))])
    over_first_axis = ops.softmax([rows], axis=0)
    sequences = ops.reshape([centred, ops.constant(np.array([BATCH, CHANNELS, 9], np.int64))])
    attention = ops.matmul([sequences, ops.transpose([sequences], perm=[0, 2, 1])])
    noisy = ops.add([attention, ops.randomuniformlike([attention])])
    outputs = {"softmax": over_first_axis, "attention": attention, "noisy": noisy}
    for name in outputs.values():
        builder.addOutputTensor(name)
    return builder.getModelProto(), x, outputs


def run_session(proto, x, anchors, data, seed, together: bool, monkeypatch):
    with monkeypatch.context() as patch:
        if not together:
            patch.setattr(
                step_program.SessionProgramSpec,
                "steps_are_independent",
                property(lambda spec: False),
            )
        session = popart.InferenceSession(
            proto,
            popart.DataFlow(len(data), list(anchors)),
            popart.DeviceManager().createIpuModelDevice({}),
        )
        session.prepareDevice()
    session.setRandomSeed(seed)
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, arrays))
    program = session._program  # noqa: SLF001
    assert program.runs_steps_together is together
    # Vectorized under XLA; as a graph, unrolled.
    assert program.unrolls_steps is (together and program.compiled_mode is CompileMode.GRAPH)
    return arrays, session.getRandomSeed(), program.compiled_mode


@pytest.mark.parametrize(
    ("batches_per_step", "compile_mode"), [(1, "auto"), (4, "auto"), (4, "graph")]
)
def test_batches_together_match_the_loop_and_onnxruntime(
    batches_per_step, compile_mode, monkeypatch
):
    """Vectorized under XLA (auto), unrolled as a graph (graph)."""
    onnxruntime = pytest.importorskip("onnxruntime")
    monkeypatch.setenv("OPENIPU_COMPILE", compile_mode)
    proto, x, outputs = mixed_model()
    data = np.random.default_rng(5).normal(size=(batches_per_step, BATCH, CHANNELS, SIZE, SIZE))
    data = data.astype(np.float32)
    anchors = list(outputs.values())
    together, seed_together, mode = run_session(proto, x, anchors, data, 7, True, monkeypatch)
    # The loop on the executor the batches together got: XLA and TensorFlow's kernels draw
    # other random numbers from one seed (and a loop the engine decides for starts as a graph).
    monkeypatch.setenv("OPENIPU_COMPILE", "xla" if mode is CompileMode.XLA else "graph")
    looped, seed_looped, _ = run_session(proto, x, anchors, data, 7, False, monkeypatch)

    # onnx.reference gives Softmax-11 the axis semantics of Softmax-13; onnxruntime does not.
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    reference = onnxruntime.InferenceSession(
        for_reference(proto).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    for name in ("softmax", "attention"):
        tensor = outputs[name]
        expected = np.stack([reference.run([tensor], {x: batch})[0] for batch in data])
        expected = expected.reshape(together[tensor].shape)  # one batch: no batch axis
        np.testing.assert_allclose(together[tensor], expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(together[tensor], looped[tensor], rtol=1e-5, atol=1e-5)
    # The random op draws the same numbers from the same per-batch seeds.
    np.testing.assert_allclose(
        together[outputs["noisy"]], looped[outputs["noisy"]], rtol=1e-5, atol=1e-5
    )
    noise = together[outputs["noisy"]] - together[outputs["attention"]]
    assert noise.min() >= 0 and noise.max() < 1
    if batches_per_step > 1:
        assert not np.allclose(noise[0], noise[1])  # each batch its own numbers
    assert seed_together == seed_looped == 7 + batches_per_step


def test_models_with_host_prints_keep_the_loop(monkeypatch):
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y = builder.aiGraphcore.printtensor([builder.aiOnnx.relu([x])], title="relu")
    builder.addOutputTensor(y)
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(3, [y]),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    data = np.array([[-1, 2], [3, -4], [5, 6]], np.float32)
    session.run(popart.PyStepIO({x: data}, arrays))
    np.testing.assert_array_equal(arrays[y], np.maximum(data, 0))
    assert session._program.runs_steps_together is False  # noqa: SLF001


def test_convolutional_models_run_as_graphs_with_batches_unrolled():
    """The engine's choice for convolutions (oneDNN's fused kernels): a graph, in which the
    batches run as unrolled copies of the model."""
    onnxruntime = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(6)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    ops = builder.aiOnnx
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [BATCH, CHANNELS, SIZE, SIZE]), "x")
    kernel = builder.addInitializedInputTensor(rng.normal(size=(4, CHANNELS, 3, 3)).astype("f"))
    bias = builder.addInitializedInputTensor(rng.normal(size=(4,)).astype(np.float32))
    y = ops.relu([ops.conv([x, kernel, bias], pads=[1, 1, 1, 1])])
    builder.addOutputTensor(y)
    proto = builder.getModelProto()
    session = popart.InferenceSession(
        proto, popart.DataFlow(3, [y]), popart.DeviceManager().createIpuModelDevice({})
    )
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    data = rng.normal(size=(3, BATCH, CHANNELS, SIZE, SIZE)).astype(np.float32)
    session.run(popart.PyStepIO({x: data}, arrays))
    reference = onnxruntime.InferenceSession(
        for_reference(proto).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    expected = np.stack([reference.run([y], {x: batch})[0] for batch in data])
    np.testing.assert_allclose(arrays[y], expected, rtol=1e-4, atol=1e-4)
    assert session._program.compiled_mode is CompileMode.GRAPH  # noqa: SLF001
    assert session._program.unrolls_steps  # noqa: SLF001
