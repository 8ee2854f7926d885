"""graphcore/popart tests/integration/streamingmemory_tests/streamingmemory_test_1.py:
replicated tensor sharding asked for without replicas (the original warns that it cannot
shard, and trains unsharded), in-placing under execution phases, and LAMB trained with
pipelining, gradient accumulation, off-chip and sharded optimizer state: the weights equal
the plain model's. The original runs them on IPU hardware; here on emulated IPUs (see
`popart_streaming_checks`)."""

import logging

import pytest
from popart_streaming_checks import (
    OFF_CHIP,
    OFF_CHIP_RTS,
    ON_CHIP,
    check_model,
    lamb_settings,
    run_model,
)

import popart


@pytest.mark.follows("test_sharding_without_replicas_warning")
def test_sharding_without_replicas_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="popart"):
        sharded = run_model(
            tmp_path, "warning.onnx", "phased", num_replicas=1, activations=OFF_CHIP,
            weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS, accumulators=OFF_CHIP_RTS,
        )  # fmt: skip
    warned = [r.getMessage() for r in caplog.records if "Unable to shard" in r.getMessage()]
    assert sorted(warned) == [
        f"[StreamingMemory] Unable to shard tensor W{i} due to lack of replication"
        for i in range(3)
    ]
    check_model(run_model(tmp_path, "plain.onnx", "normal"), sharded)


@pytest.mark.follows("test_inplacing_phased_constraints")
def test_inplacing_phased_constraints(tmp_path):
    optimizer = popart.SGD(
        {
            "defaultLearningRate": (0.1, True),
            "defaultMomentum": (0.0, False),
            "defaultWeightDecay": (0.0, False),
            "defaultDampening": (0.0, True),
        }
    )
    phased = run_model(
        tmp_path, "phased.onnx", "phased", num_layers=5, optimizer=optimizer,
        activations=OFF_CHIP, weights=OFF_CHIP, optimizer_state=OFF_CHIP, accumulators=OFF_CHIP,
    )  # fmt: skip
    plain = run_model(tmp_path, "plain.onnx", "normal", num_layers=5, optimizer=optimizer)
    check_model(plain, phased)


@pytest.mark.slow
@pytest.mark.follows("test_pipelined_streaming_lamb")
def test_pipelined_streaming_lamb(tmp_path):
    settings = lamb_settings(True)

    def run(name, mode, state, **kwargs):
        return run_model(
            tmp_path, name, mode, num_layers=2, num_iterations=2,
            optimizer=popart.Adam(settings, popart.AdamMode.Lamb), activations=ON_CHIP,
            weights=ON_CHIP, optimizer_state=state, accumulators=ON_CHIP, **kwargs,
        )  # fmt: skip

    normal = run("normal.onnx", "normal", ON_CHIP, batch_size=12)
    pipelined = dict(enable_accum=True, accum_factor=6)
    for name, state, batch, replicas in (
        ("pipelined.onnx", ON_CHIP, 2, 1),
        ("pipelined_streaming.onnx", OFF_CHIP_RTS, 2, 1),
        ("pipelined_streaming_rep.onnx", OFF_CHIP, 1, 2),
        ("pipelined_streaming_rep_rts.onnx", OFF_CHIP_RTS, 1, 2),
    ):
        model = run(name, "pipelined", state, batch_size=batch, num_replicas=replicas, **pipelined)
        check_model(normal, model)
