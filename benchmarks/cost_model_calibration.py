"""The cost model's estimates against published IPU results (issue 18, calibration).

Each case builds its model in openipu as a user would (Keras in an IPUStrategy scope, the
IPUConfig options the published run used), trains one step, reads the compiled program's
cost estimate and turns its cycles per step into samples per second per IPU, which is
compared with the published throughput divided by the IPUs it used. The sources and the
method are in docs/cost-model.md.

Published runs pipeline BERT over four IPUs per replica; a replica runs as fast as its
slowest stage. A case compiles one stage's share on one IPU: the published bottleneck
stage's encoder layers (7 of BERT-Large's 24, 4 of BERT-Base's 12), or, with
`--layers N`, N of them with the cycles scaled by (stage layers / N), the layers being
identical. Per-IPU throughput is then micro-batch / stage time / 4 (the replica's four
stages run concurrently; the fill and drain bubble would add 0.3% and 1.2% at the
published 2040 and 510 micro-batches per step). Only the throughput is scaled, never the
memory: "fits" is the compiled program's own answer.

    python benchmarks/cost_model_calibration.py [--case NAME] [--layers N] [--summary]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.engine import compiled_program
from openipu._src.engine.cost_model import cost_options, out_of_memory
from openipu._src.engine.cost_model.estimate import CostEstimate

PERFORMANCE_RESULTS = "https://www.graphcore.cn/performance-results/"
MLPERF_RESNET = "https://www.graphcore.ai/posts/accelerating-resnet50-training-on-the-ipu-behind-our-mlperf-benchmark"


@dataclasses.dataclass(frozen=True)
class Case:
    """One published result and how to build the part of it one IPU runs."""

    name: str
    published: str  # what was measured, where
    published_per_ipu: float  # samples/s per IPU: the published total / the IPUs used
    micro_batch: int
    build: Callable[[int], tuple[tf.keras.Model, np.ndarray, np.ndarray]]  # (layers)
    stage_layers: int = 0  # encoder layers of the published bottleneck stage (0: all)
    stages: int = 1  # IPUs per replica in the published run
    matmul_proportion: float = 0.6  # available memory proportion the published run set
    partials_half: bool = False
    accumulation: int = 1  # micro-batches per weight update in the published run
    memory_only: bool = False  # the published fact is where it fits, not how fast it runs
    version: str = "ipu21"  # the published run's IPU: Bow ("ipu21") or Mk2 ("ipu2")


@dataclasses.dataclass(frozen=True)
class Result:
    case: Case
    layers: int
    estimate: CostEstimate
    seconds: float

    @property
    def samples_per_second_per_ipu(self) -> float:
        if self.case.memory_only:
            return float("nan")
        step = self.estimate.cycles.per_step / self.estimate.chip.clock_hz
        if self.case.stage_layers:
            step *= self.case.stage_layers / self.layers
        return self.case.micro_batch / step / self.case.stages

    @property
    def ratio(self) -> float:
        """Estimate over published: > 1 means the model is optimistic."""
        if self.case.memory_only:
            return float("nan")
        return self.samples_per_second_per_ipu / self.case.published_per_ipu


def resnet50(_: int) -> tuple[tf.keras.Model, np.ndarray, np.ndarray]:
    model = tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3))
    x = np.zeros((20, 224, 224, 3), np.float16)
    return model, x, np.zeros((20,), np.int32)


def bert_encoder(hidden: int, heads: int, micro_batch: int, sequence: int = 128):
    """`layers` BERT encoder layers (post-norm attention and GELU feed-forward, as in
    Devlin et al.) over the hidden states a pipeline stage receives from the one before."""

    def build(layers: int) -> tuple[tf.keras.Model, np.ndarray, np.ndarray]:
        inputs = tf.keras.Input((sequence, hidden), batch_size=micro_batch)
        x = inputs
        for _ in range(layers):
            attention = tf.keras.layers.MultiHeadAttention(heads, hidden // heads)(x, x)
            x = tf.keras.layers.LayerNormalization()(x + attention)
            feed_forward = tf.keras.layers.Dense(4 * hidden, activation="gelu")(x)
            x = tf.keras.layers.LayerNormalization()(
                x + tf.keras.layers.Dense(hidden)(feed_forward)
            )
        model = tf.keras.Model(inputs, x)
        data = np.zeros((micro_batch, sequence, hidden), np.float16)
        return model, data, data

    return build


# Bow Pod16, TensorFlow 1, batch 1920 = micro-batch 20 x 6 accumulated x 16 replicas of one
# IPU (graphcore/examples, mk2_resnet50_mlperf_pod16_bs20), recomputation, half partials,
# fp16 (16.16): 42029 images/s.
RESNET50 = Case(
    "ResNet-50 v1.5 training",
    f"Bow Pod16, TF1, bs 1920, 16.16: 42029 img/s ({PERFORMANCE_RESULTS})",
    42029 / 16,
    20,
    resnet50,
    partials_half=True,
    accumulation=6,
)

# Bow Pod16, TensorFlow 2 (SDK 3.3), 4 replicas x 4 pipelined IPUs, micro-batch 8, stages
# of 3+emb / 7 / 7 / 7 layers, available memory 0.15-0.25, LAMB
# (graphcore/examples nlp/bert/tensorflow2/configs/pretrain_large_128_phase1.json).
BERT_LARGE = Case(
    "BERT-Large ph1 SL128 training",
    f"Bow Pod16, TF2, bs 65280, 16.16: 4527 seq/s ({PERFORMANCE_RESULTS})",
    4527 / 16,
    8,
    bert_encoder(1024, 16, 8),
    stage_layers=7,
    stages=4,
    matmul_proportion=0.25,
    accumulation=2040,
)

CASES = (
    RESNET50,
    # MLPerf Training v1.1 on an IPU-POD16 of Mk2 IPUs (1.33 GHz): "30k images per second"
    # (Graphcore's blog on the submission); the same examples' model at the same
    # micro-batch is assumed (the submission's per-replica micro-batch is not given there).
    dataclasses.replace(
        RESNET50,
        name="ResNet-50 v1.5 training, Mk2",
        published=f"IPU-POD16 (Mk2), MLPerf v1.1: about 30000 img/s ({MLPERF_RESNET})",
        published_per_ipu=30000 / 16,
        version="ipu2",
    ),
    BERT_LARGE,
    # Bow Pod16, TensorFlow 2 (SDK 3.3), 4 replicas x 4 pipelined IPUs, micro-batch 32,
    # stages of emb / 4 / 4 / 4 layers (pretrain_base_128_phase1.json).
    Case(
        "BERT-Base ph1 SL128 training",
        f"Bow Pod16, TF2, bs 65280, 16.16: 15173 seq/s ({PERFORMANCE_RESULTS})",
        15173 / 16,
        32,
        bert_encoder(768, 12, 32),
        stage_layers=4,
        stages=4,
        matmul_proportion=0.28,
        accumulation=510,
    ),
    # Held out of the fit (docs/cost-model.md): BERT-Base phase 2, sequence length 384, Bow
    # Pod16, TensorFlow 2 (SDK 3.3), 4 replicas x 4 pipelined IPUs, micro-batch 8 x 510
    # accumulated, stages of emb / 4 / 4 / 4 layers (pretrain_base_384_phase2.json).
    Case(
        "BERT-Base ph2 SL384 training",
        f"Bow Pod16, TF2, bs 16320, 16.16: 4387 seq/s ({PERFORMANCE_RESULTS})",
        4387 / 16,
        8,
        bert_encoder(768, 12, 8, sequence=384),
        stage_layers=4,
        stages=4,
        matmul_proportion=0.28,
        accumulation=510,
    ),
    # The same BERT-Large set-up, all 24 encoder layers on one IPU: the published runs
    # pipeline it over four IPUs, because it does not fit on one.
    dataclasses.replace(
        BERT_LARGE,
        name="BERT-Large ph1, 24 layers on 1 IPU",
        published="needs 4 IPUs: pipelined over 4 in every published run (same config)",
        published_per_ipu=0.0,
        stage_layers=24,
        stages=1,
        memory_only=True,
    ),
)


# Programs compiled so far, by (build, layers): cases differing only in the chip they ran
# on share one program and its configured options.
_COMPILED: dict[
    tuple[object, int], tuple[compiled_program.CompiledProgram, cost_options.CostOptions]
] = {}


def run(case: Case, layers: int = 0) -> Result:
    """Compiles and runs one training step of `case`; its estimate on the case's IPU."""
    layers = layers or case.stage_layers
    started = time.perf_counter()
    if (case.build, layers) not in _COMPILED:
        _COMPILED[(case.build, layers)] = _compile(case, layers)
    program, options = _COMPILED[(case.build, layers)]
    # The configured options, on the published run's chip (an emulated IPU's own version is
    # an IPU Model's, "ipu2" at most).
    estimate = program.cost(dataclasses.replace(options, version=case.version))
    assert estimate is not None
    return Result(case, layers, estimate, time.perf_counter() - started)


def _compile(
    case: Case, layers: int
) -> tuple[compiled_program.CompiledProgram, cost_options.CostOptions]:
    """The program of one training step of `case` and the options it was configured with."""
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.allow_recompute = True  # every published run here recomputes activations
    partials = {"partialsType": "half"} if case.partials_half else {}
    config.matmuls.poplar_options = {
        "availableMemoryProportion": str(case.matmul_proportion),
        **partials,
    }
    config.convolutions.poplar_options = dict(partials)
    config.configure_ipu_system()
    previous = tf.keras.backend.floatx()
    tf.keras.backend.set_floatx("float16")  # 16.16: fp16 weights and arithmetic
    try:
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            model, x, y = case.build(layers)
            loss = (
                tf.keras.losses.SparseCategoricalCrossentropy()
                if y.ndim == 1
                else tf.keras.losses.MeanSquaredError()
            )
            model.compile(tf.keras.optimizers.SGD(0.01, momentum=0.9), loss, steps_per_execution=1)
            try:
                model.fit(x, y, batch_size=case.micro_batch, epochs=1, verbose=0)
            except out_of_memory.OutOfMemoryError:
                if not case.memory_only:
                    raise  # a published run that fits must fit (it failed to compile)
        program = [p for p in compiled_program.recent() if p.name.endswith("_train")][-1]
        options = cost_options.from_config(config, gradient_accumulation_count=case.accumulation)
    finally:
        tf.keras.backend.set_floatx(previous)
        ipu.config.reset_ipu_configuration()
    return program, options


def table(results: list[Result]) -> str:
    rows = [
        "| model | published (per IPU) | estimate (per IPU) | ratio | fits | source |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if r.case.memory_only:
            rows.append(
                f"| {r.case.name} | does not fit | {'fits' if r.estimate.fits else 'does not fit'} "
                f"| - | {'yes' if r.estimate.fits else 'NO'} | {r.case.published} |"
            )
            continue
        rows.append(
            f"| {r.case.name} | {r.case.published_per_ipu:.0f}/s "
            f"| {r.samples_per_second_per_ipu:.0f}/s | {r.ratio:.2f} "
            f"| {'yes' if r.estimate.fits else 'NO'} | {r.case.published} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="run only the case whose name starts with this")
    parser.add_argument("--layers", type=int, default=0, help="encoder layers to build")
    parser.add_argument("--summary", action="store_true", help="print each estimate")
    args = parser.parse_args()
    results = []
    for case in CASES:
        if args.case and not case.name.lower().startswith(args.case.lower()):
            continue
        result = run(case, args.layers)
        results.append(result)
        print(f"{case.name}: {result.seconds:.0f} s", flush=True)
        if args.summary:
            print(result.estimate.summary(), flush=True)
    print(table(results))


if __name__ == "__main__":
    main()
