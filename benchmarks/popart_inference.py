"""PopART inference: an InferenceSession against onnxruntime on the CPU, on the same models.

Three ONNX models are built with `popart.Builder`: an MLP, a small CNN and one transformer
encoder block. Each runs through a `popart.InferenceSession` (`batchesPerStep` batches per
`session.run`) and through onnxruntime's CPU provider (one `run` per batch of the same batches, same
batch size).
Prints samples per second of each and the ratio (openipu / onnxruntime; higher is better),
after checking that both give the same numbers.

    python benchmarks/popart_inference.py [--batches-per-step 16] [--repeats 10]
        [--compile auto|xla|graph]

The sessions and onnxruntime runs alternate, so that a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

import popart
from timing import best_rates


@dataclass
class Model:
    name: str
    proto: bytes
    input_id: str
    output_id: str
    batch: np.ndarray  # one batch of inputs


def _weight(builder, rng, shape, scale: float = 0.1):
    return builder.addInitializedInputTensor((rng.normal(size=shape) * scale).astype(np.float32))


def mlp(batch_size: int = 64) -> Model:
    rng = np.random.default_rng(0)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch_size, 784]), "x")
    h = x
    for width_in, width_out in [(784, 512), (512, 512)]:
        h = builder.aiOnnx.gemm([h, _weight(builder, rng, [width_in, width_out]),
                                 _weight(builder, rng, [width_out])])  # fmt: skip
        h = builder.aiOnnx.relu([h])
    logits = builder.aiOnnx.gemm([h, _weight(builder, rng, [512, 10]), _weight(builder, rng, [10])])
    y = builder.aiOnnx.softmax([logits], axis=1)
    builder.addOutputTensor(y)
    data = rng.normal(size=(batch_size, 784)).astype(np.float32)
    return Model("MLP 784-512-512-10", builder.getModelProto(), x, y, data)


def cnn(batch_size: int = 32) -> Model:
    rng = np.random.default_rng(1)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch_size, 1, 28, 28]), "x")
    h = x
    for channels_in, channels_out in [(1, 16), (16, 32)]:
        kernel = _weight(builder, rng, [channels_out, channels_in, 3, 3], 0.3)
        h = builder.aiOnnx.conv([h, kernel, _weight(builder, rng, [channels_out])],
                                pads=[1, 1, 1, 1])  # fmt: skip
        h = builder.aiOnnx.relu([h])
        h = builder.aiOnnx.maxpool([h], num_outputs=1, kernel_shape=[2, 2], strides=[2, 2])[0]
    h = builder.aiOnnx.flatten([h], axis=1)
    logits = builder.aiOnnx.gemm([h, _weight(builder, rng, [32 * 7 * 7, 10], 0.05),
                                  _weight(builder, rng, [10])])  # fmt: skip
    builder.addOutputTensor(logits)
    data = rng.normal(size=(batch_size, 1, 28, 28)).astype(np.float32)
    return Model("CNN 2x(conv3x3-relu-maxpool)-dense", builder.getModelProto(), x, logits, data)


def transformer_block(
    batch_size: int = 8, sequence: int = 64, width: int = 128, heads: int = 4
) -> Model:
    rng = np.random.default_rng(2)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    onnx_ops = builder.aiOnnx
    head_width = width // heads
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch_size, sequence, width]), "x")

    def const(values, dtype=np.int64):
        return onnx_ops.constant(np.array(values, dtype))

    def dense(h, width_in, width_out):
        product = onnx_ops.matmul([h, _weight(builder, rng, [width_in, width_out])])
        return onnx_ops.add([product, _weight(builder, rng, [width_out])])

    def split_heads(h):
        h = onnx_ops.reshape([h, const([batch_size, sequence, heads, head_width])])
        return onnx_ops.transpose([h], perm=[0, 2, 1, 3])

    def layer_norm(h):
        mean = onnx_ops.reducemean([h], axes=[-1], keepdims=1)
        centred = onnx_ops.sub([h, mean])
        variance = onnx_ops.reducemean([onnx_ops.mul([centred, centred])], axes=[-1], keepdims=1)
        scale = onnx_ops.sqrt([onnx_ops.add([variance, const(1e-5, np.float32)])])
        normed = onnx_ops.div([centred, scale])
        gamma = builder.addInitializedInputTensor(np.ones(width, np.float32))
        return onnx_ops.add([onnx_ops.mul([normed, gamma]), _weight(builder, rng, [width])])

    def gelu(h):
        inner = onnx_ops.erf([onnx_ops.mul([h, const(1 / np.sqrt(2), np.float32)])])
        half = onnx_ops.mul([h, const(0.5, np.float32)])
        return onnx_ops.mul([half, onnx_ops.add([inner, const(1.0, np.float32)])])

    q, k, v = (split_heads(dense(x, width, width)) for _ in range(3))
    scores = onnx_ops.matmul([q, onnx_ops.transpose([k], perm=[0, 1, 3, 2])])
    scores = onnx_ops.mul([scores, const(1 / np.sqrt(head_width), np.float32)])
    probabilities = onnx_ops.softmax([scores], axis=3)
    context = onnx_ops.transpose([onnx_ops.matmul([probabilities, v])], perm=[0, 2, 1, 3])
    context = onnx_ops.reshape([context, const([batch_size, sequence, width])])
    h = layer_norm(onnx_ops.add([x, dense(context, width, width)]))
    feed_forward = dense(gelu(dense(h, width, 4 * width)), 4 * width, width)
    y = layer_norm(onnx_ops.add([h, feed_forward]))
    builder.addOutputTensor(y)
    data = rng.normal(size=(batch_size, sequence, width)).astype(np.float32)
    return Model(f"Transformer encoder block (S={sequence}, D={width}, H={heads})",
                 builder.getModelProto(), x, y, data)  # fmt: skip


def session_runner(model: Model, batches_per_step: int) -> tuple[Callable[[], None], Callable]:
    """`run()` for one session.run of `batches_per_step` batches, and the first batch's output."""
    data_flow = popart.DataFlow(batches_per_step, {model.output_id: popart.AnchorReturnType("ALL")})
    # A whole Mk2 IPU: the IPU Model's default of 4 tiles (the original's defaultFewTiles)
    # holds 2.4 MB, too little for the transformer block's activations.
    device = popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 1472})
    session = popart.InferenceSession(model.proto, data_flow, device)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    inputs = step_inputs(model, batches_per_step)
    stepio = popart.PyStepIO({model.input_id: inputs}, anchors)
    run = lambda: session.run(stepio)  # noqa: E731
    run.executor = lambda: _executor(session)  # type: ignore[attr-defined]
    return run, lambda: anchors[model.output_id][0]


def step_inputs(model: Model, batches_per_step: int) -> np.ndarray:
    """The batches of one step, each in its own memory (as a program reading a dataset has
    them): both sides read the same arrays."""
    return np.stack([model.batch] * batches_per_step)


def _executor(session) -> str:
    """What the session's program runs on, and how it runs a call's batches, from its
    report's "compiled as" line."""
    for line in str(session.getReport()).splitlines():
        if "compiled as" in line:
            described = line.split("compiled as", 1)[1]
            executor = described.split(" on ")[0].split(":", 1)[-1].strip()
            schedule = described.split(" run as ")[-1].split(",")[0].strip()
            return f"{executor}; {schedule}"
    return "?"


def onnxruntime_runner(model: Model, batches_per_step: int) -> tuple[Callable[[], None], Callable]:
    """`run()` for `batches_per_step` onnxruntime runs of one batch, and the batch's output."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        without_initializer_inputs(model.proto), options, providers=["CPUExecutionProvider"]
    )
    # One run per batch of the step, over the same batches the session reads (reusing one
    # cache-hot batch for every run would favour onnxruntime).
    feeds = [{model.input_id: batch} for batch in step_inputs(model, batches_per_step)]

    def run() -> None:
        for feed in feeds:
            session.run([model.output_id], feed)

    return run, lambda: session.run([model.output_id], feeds[0])[0]


def without_initializer_inputs(proto: bytes) -> bytes:
    """The same model with its weights out of the graph inputs (PopART lists them there), so
    that onnxruntime treats them as constants and optimises with them, as it would normally,
    and without the Builder's own node attributes ('__debug_info_id', as the original's
    Builder writes), which onnxruntime refuses once it fuses a node holding one."""
    model = onnx.load_model_from_string(proto)
    for node in model.graph.node:
        kept = [a for a in node.attribute if not a.name.startswith("__")]
        del node.attribute[:]
        node.attribute.extend(kept)
    weights = {tensor.name for tensor in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    return model.SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches-per-step", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--compile", choices=["auto", "xla", "graph", "onnxruntime"], default="auto",
                        help="force how sessions compile (OPENIPU_COMPILE); auto: the session's choice")  # fmt: skip
    args = parser.parse_args()
    os.environ["OPENIPU_COMPILE"] = args.compile
    print(f"batches per step: {args.batches_per_step}; samples/s, best of {args.repeats} runs")
    for model in (mlp(), cnn(), transformer_block()):
        ours, our_output = session_runner(model, args.batches_per_step)
        theirs, their_output = onnxruntime_runner(model, args.batches_per_step)
        ours(), theirs()  # trace, compile, warm up
        rates = best_rates(
            {"ours": ours, "theirs": theirs},
            args.batches_per_step * model.batch.shape[0],
            args.repeats,
        )
        np.testing.assert_allclose(our_output(), their_output(), rtol=1e-3, atol=1e-4)
        print(f"{model.name} (batch {model.batch.shape[0]})")
        print(f"  openipu InferenceSession: {rates['ours']:12.0f} samples/s ({ours.executor()})")
        print(f"  onnxruntime (CPU):        {rates['theirs']:12.0f} samples/s")
        print(f"  ratio (openipu / onnxruntime): {rates['ours'] / rates['theirs']:.2f}")


if __name__ == "__main__":
    main()
