"""The cost model stays calibrated against published IPU results (docs/cost-model.md).

The smallest case of benchmarks/cost_model_calibration.py runs here: one BERT-Large
encoder layer trained on an emulated IPU, its cycles scaled to the published bottleneck
stage of seven layers, against Graphcore's published BERT-Large phase 1 throughput on a
Bow Pod16. A change to the model's rules or constants that moves it out of 2x fails.
The rules the calibration rests on are checked on hand-made workloads.
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

from openipu._src.engine.cost_model import cost_options, cycles, estimate, op_flops
from openipu._src.engine.cost_model.workload import Operation, Workload

_BENCHMARK = pathlib.Path(__file__).parents[2] / "benchmarks" / "cost_model_calibration.py"


def _calibration():
    spec = importlib.util.spec_from_file_location("cost_model_calibration", _BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_bert_large_training_throughput_is_within_2x_of_the_published_figure():
    calibration = _calibration()
    case = next(c for c in calibration.CASES if c.name.startswith("BERT-Large ph1 SL128"))
    result = calibration.run(case, layers=1)
    assert result.estimate.chip.version == "ipu21" and result.estimate.fits
    assert 0.5 <= result.ratio <= 2.0, calibration.table([result])


def test_einsum_flops_count_every_multiply_add_of_the_equation():
    # Attention scores: [batch, query, heads, dim] x [batch, key, heads, dim].
    counted = op_flops.einsum_flops("aecd,abcd->acbe", [[8, 128, 16, 64], [8, 128, 16, 64]])
    assert counted == 2 * 8 * 16 * 128 * 128 * 64
    assert op_flops.einsum_flops("...d,de->...e", [[2, 3], [3, 4]]) == 0  # ellipsis: unknown


def _op(name, type_, flops, matmul, input_bytes, output_bytes):
    return Operation(name, type_, 0, flops, matmul, True, input_bytes, output_bytes, (),
                     ((name + ":0", output_bytes),))  # fmt: skip


def test_a_reduction_spreads_over_the_tiles_of_its_input():
    # A bias gradient reads 16 Mi fp16 elements and writes 64: all tiles share the work,
    # each loading its share of the input at 16 bytes a cycle (slower than its adds).
    bias_grad = _op("gradient_tape/b", "BiasAddGrad", 16 * 2**20, False, 32 * 2**20, 128)
    cost = cycles.operation_cycles(bias_grad, estimate.chip("ipu2"), cost_options.CostOptions())
    assert cost.compute == math.ceil((32 * 2**20 + 128) / (1472 * 16))


def test_recomputation_runs_the_forward_pass_again():
    forward = _op("model/dense/MatMul", "MatMul", 2 * 1472 * 64 * 100, True, 0, 0)
    backward = _op("gradient_tape/model/dense/MatMul", "MatMul", 2 * 1472 * 64 * 200, True, 0, 0)
    update = _op("SGD/ResourceApplyGradientDescent", "ResourceApplyGradientDescent", 0, False,
                 0, 0)  # fmt: skip
    workload = Workload((forward, backward, update), ())
    plain = estimate.estimate(workload, cost_options.CostOptions())
    again = estimate.estimate(workload, cost_options.CostOptions(recomputation=True))
    forward_cycles = 100 * cycles.MATMUL_CYCLES_PER_PEAK_CYCLE + plain.chip.sync_cycles
    assert again.cycles.recomputation == forward_cycles
    assert again.cycles.per_step == plain.cycles.per_step + forward_cycles
