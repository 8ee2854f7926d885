"""graphcore/popart tests/integration/streamingmemory_tests/streamingmemory_test_0.py: a
matmul chain trained with its tensors off chip (streaming memory), on chip, and sharded
across replicas (replicated tensor sharding), over execution phases, with SGD0/1/2, Adam,
LAMB (const and not, Sum and Mean reduction) and gradient clipping: every variant's
weights equal those of the plain model, and two replicas of half the batch equal one
replica of the whole. The original runs them on IPU hardware; here on emulated IPUs (see
`popart_streaming_checks`)."""

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


@pytest.mark.follows("test_weight_update")
def test_weight_update(tmp_path):
    plain = run_model(tmp_path, "without_phased.onnx", "normal", enable_outlining=True)
    phased = run_model(
        tmp_path, "with_phased.onnx", "phased",
        activations=OFF_CHIP, weights=OFF_CHIP, optimizer_state=OFF_CHIP, accumulators=OFF_CHIP,
    )  # fmt: skip
    check_model(plain, phased)


@pytest.mark.follows("test_onchip_memory")
def test_onchip_memory(tmp_path):
    plain = run_model(tmp_path, "model_normal.onnx", "normal")
    for name, (act, weights, state) in {
        "act": (ON_CHIP, OFF_CHIP, OFF_CHIP),
        "weights": (OFF_CHIP, ON_CHIP, OFF_CHIP),
        "opt_state": (OFF_CHIP, OFF_CHIP, ON_CHIP),
    }.items():
        model = run_model(
            tmp_path, f"model_onchip_{name}.onnx", "phased",
            activations=act, weights=weights, optimizer_state=state, accumulators=ON_CHIP,
        )  # fmt: skip
        check_model(plain, model)


@pytest.mark.follows("test_replicated_sgd0_weight_update")
def test_replicated_sgd0_weight_update(tmp_path):
    def phased(name, **kwargs):
        return run_model(tmp_path, name, "phased", activations=OFF_CHIP, **kwargs)

    reference = phased("phased.onnx", batch_size=4, weights=OFF_CHIP,
                       optimizer_state=OFF_CHIP, accumulators=OFF_CHIP)  # fmt: skip
    check_model(reference, phased("phased_replicated.onnx", batch_size=2, num_replicas=2,
                                  weights=OFF_CHIP, optimizer_state=OFF_CHIP,
                                  accumulators=OFF_CHIP))  # fmt: skip
    check_model(reference, phased("phased_replicated_rws.onnx", batch_size=2, num_replicas=2,
                                  weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS,
                                  accumulators=OFF_CHIP_RTS))  # fmt: skip
    check_model(reference, phased("phased_replicated_rws_acc.onnx", batch_size=1,
                                  num_replicas=2, enable_accum=True, accum_factor=2,
                                  weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS,
                                  accumulators=ON_CHIP))  # fmt: skip


def _replicated_comparison(tmp_path, optimizer, variants, batch=2, reduction=None):
    """One replica of `batch` against two of batch/2 under each set of locations."""
    extra = {} if reduction is None else {"reduction": reduction}
    reference = run_model(
        tmp_path, "phased.onnx", "phased", batch_size=batch, num_iterations=2,
        optimizer=optimizer, activations=OFF_CHIP, weights=OFF_CHIP,
        optimizer_state=OFF_CHIP, accumulators=OFF_CHIP, **extra,
    )  # fmt: skip
    for index, locations in enumerate(variants):
        model = run_model(
            tmp_path, f"variant{index}.onnx", "phased", num_replicas=2, num_iterations=2,
            optimizer=optimizer, activations=OFF_CHIP, **locations, **extra,
        )  # fmt: skip
        check_model(reference, model)


@pytest.mark.follows("test_replicated_sgd1and2_weight_update")
@pytest.mark.parametrize("sgd_type", ["SGD1", "SGD2"])
def test_replicated_sgd1and2_weight_update(tmp_path, sgd_type):
    settings = {
        "defaultLearningRate": (0.00001, False),
        "defaultMomentum": (0.9, False),
        "defaultDampening": (0.2, False),
        "defaultVelocityScaling": (0.1, False),
        "lossScaling": (1.0, True),
        "defaultWeightDecay": (0.2, True),
    }
    mode = {
        "SGD1": popart.SGDAccumulatorAndMomentum.Combined,
        "SGD2": popart.SGDAccumulatorAndMomentum.Separate,
    }[sgd_type]
    variants = [
        dict(batch_size=1, weights=OFF_CHIP, optimizer_state=OFF_CHIP, accumulators=OFF_CHIP),
        dict(batch_size=1, weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS,
             accumulators=OFF_CHIP_RTS),
    ]  # fmt: skip
    if sgd_type == "SGD2":  # separate accumulators: only the optimizer state sharded
        variants.append(dict(batch_size=1, weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS,
                             accumulators=OFF_CHIP))  # fmt: skip
    _replicated_comparison(tmp_path, popart.SGD(settings, accumulatorAndMomentum=mode), variants)


@pytest.mark.follows("test_replicated_adam_weight_update")
def test_replicated_adam_weight_update(tmp_path):
    settings = lamb_settings(True)
    variants = [
        dict(batch_size=1, weights=OFF_CHIP, optimizer_state=OFF_CHIP, accumulators=OFF_CHIP),
        dict(batch_size=1, weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS,
             accumulators=OFF_CHIP_RTS),
    ]  # fmt: skip
    _replicated_comparison(tmp_path, popart.Adam(settings), variants)


@pytest.mark.slow
@pytest.mark.follows("test_replicated_lamb_weight_update")
@pytest.mark.parametrize("reduction", [popart.ReductionType.Sum, popart.ReductionType.Mean])
@pytest.mark.parametrize("is_const", [False, True])
def test_replicated_lamb_weight_update(tmp_path, is_const, reduction):
    settings = lamb_settings(is_const)
    variants = [
        dict(batch_size=2, weights=OFF_CHIP, optimizer_state=OFF_CHIP, accumulators=OFF_CHIP),
        dict(batch_size=2, weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS,
             accumulators=OFF_CHIP),
        dict(batch_size=1, enable_accum=True, accum_factor=2, weights=OFF_CHIP_RTS,
             optimizer_state=OFF_CHIP_RTS, accumulators=OFF_CHIP),
        dict(batch_size=1, enable_accum=True, accum_factor=2, weights=ON_CHIP,
             optimizer_state=OFF_CHIP_RTS, accumulators=ON_CHIP),
    ]  # fmt: skip
    _replicated_comparison(
        tmp_path, popart.Adam(settings, popart.AdamMode.Lamb), variants, batch=4,
        reduction=reduction,
    )  # fmt: skip


@pytest.mark.follows("test_gradient_clipping")
def test_gradient_clipping(tmp_path):
    def lamb():
        return popart.Adam(
            lamb_settings(is_const=False),
            popart.AdamMode.Lamb,
            weight_decay_mode=popart.WeightDecayMode.Decay,
            clip_norm_settings=[popart.ClipNormSettings.clipAllWeights(0.1)],
        )

    common = dict(batch_size=2, num_iterations=2, num_replicas=2)
    without_rts = run_model(tmp_path, "without_rts.onnx", optimizer=lamb(), **common)
    with_rts = run_model(
        tmp_path, "with_rts.onnx", optimizer=lamb(), activations=OFF_CHIP,
        weights=OFF_CHIP_RTS, optimizer_state=OFF_CHIP_RTS, accumulators=OFF_CHIP, **common,
    )  # fmt: skip
    check_model(without_rts, with_rts)
