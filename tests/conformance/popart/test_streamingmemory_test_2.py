"""graphcore/popart tests/integration/streamingmemory_tests/streamingmemory_test_2.py: RMSProp
(the Adaptive optimizer, L2 regularization, non-const values) trained with pipelining and
gradient accumulation, its optimizer state on chip, off chip, and sharded across replicas
off and on chip: the weights equal the plain model's. The original runs it on IPU hardware;
here on emulated IPUs (see `popart_streaming_checks`)."""

import pytest
from popart_streaming_checks import (
    OFF_CHIP,
    OFF_CHIP_RTS,
    ON_CHIP,
    ON_CHIP_RTS,
    check_model,
    run_model,
)

import popart


@pytest.mark.slow
@pytest.mark.follows("test_pipelined_streaming_rmsprop")
def test_pipelined_streaming_rmsprop(tmp_path):
    optimizer = popart.Adaptive(
        {
            "defaultLearningRate": (0.005, False),
            "defaultMomentum": (0.8, False),
            "defaultWeightDecay": (0.1, False),
            "defaultEps": (1e-6, False),
            "lossScaling": (10.0, False),
        },
        popart.AdaptiveMode.RMSProp,
        popart.WeightDecayMode.L2Regularization,
        popart.DataType.FLOAT,
        popart.DataType.FLOAT,
        popart.DataType.FLOAT,
        popart.DataType.FLOAT,
        True,
    )

    def run(name, mode, state, **kwargs):
        return run_model(
            tmp_path, name, mode, num_layers=2, num_iterations=2, optimizer=optimizer,
            activations=ON_CHIP, weights=ON_CHIP, optimizer_state=state, accumulators=ON_CHIP,
            **kwargs,
        )  # fmt: skip

    normal = run("normal.onnx", "normal", ON_CHIP, batch_size=12)
    for name, state, batch, replicas in (
        ("pipelined.onnx", ON_CHIP, 2, 1),
        ("pipelined_streaming.onnx", OFF_CHIP_RTS, 2, 1),
        ("pipelined_streaming_rep.onnx", OFF_CHIP, 1, 2),
        ("pipelined_streaming_rep_rts.onnx", OFF_CHIP_RTS, 1, 2),
        ("pipelined_streaming_rep_rts_onchip.onnx", ON_CHIP_RTS, 1, 2),
    ):
        model = run(
            name, "pipelined", state, batch_size=batch, num_replicas=replicas,
            enable_accum=True, accum_factor=6,
        )  # fmt: skip
        check_model(normal, model)
