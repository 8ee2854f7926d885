"""The cost model of the chip: memory, cycles and out-of-memory of compiled programs.

References are independent: parameter counts and FLOPs computed by hand (numpy) for the
layers used, the published chip figures, and the model's own stated rules (e.g. fp16
halves weight bytes; recomputation lowers the activation peak; more tiles per IPU).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.engine import compiled_program
from openipu._src.engine.cost_model import cost_options, cycles, estimate, out_of_memory
from openipu._src.engine.cost_model.workload import VariableKind


def _configure(ipus=1, **model_options):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    for name, value in model_options.items():
        setattr(config.ipu_model, name, value)
    config.configure_ipu_system()
    return config


def _train_mlp(units=256, inputs=784, batch=32, dtype="float32", steps=4):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Dense(units, activation="relu", input_shape=(inputs,), dtype=dtype),
                tf.keras.layers.Dense(10, dtype=dtype),
            ]
        )
        model.compile(
            tf.keras.optimizers.Adam(),
            tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            steps_per_execution=steps,
        )
        x = np.random.rand(batch * steps, inputs).astype(dtype)
        y = np.random.randint(0, 10, batch * steps).astype(np.int32)  # IPU infeeds carry no int64
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
    return [p for p in compiled_program.recent() if p.name.endswith("_train")][-1]


@pytest.fixture(autouse=True)
def _reset():
    yield
    ipu.config.reset_ipu_configuration()


def test_keras_training_step_memory_and_flops_match_the_layers():
    _configure()
    program = _train_mlp()
    cost = program.cost()
    assert cost is not None and cost.fits
    params = 784 * 256 + 256 + 256 * 10 + 10
    by_kind = {kind: 0 for kind in VariableKind}
    for variable in cost.workload.variables:
        by_kind[variable.kind] += variable.bytes
    # Weights (fp32) and Adam's two slots per weight.
    assert by_kind[VariableKind.WEIGHT] >= params * 4
    assert by_kind[VariableKind.WEIGHT] < params * 4 + 1024  # plus a few counters
    assert by_kind[VariableKind.OPTIMIZER_STATE] == 2 * params * 4
    # The forward matmuls of one step: 2 x batch x in x out each; backward: the weights'
    # gradients of both layers and the second layer's input gradient (not the first's).
    matmul_flops = sum(op.flops * op.repeats for op in cost.workload.operations if op.matmul)
    forward = 2 * 32 * (784 * 256 + 256 * 10)
    assert matmul_flops == 2 * forward + 2 * 32 * 256 * 10
    report = cost.to_report(program.to_dict())
    assert report["chip"] == {"version": "ipu2", "tiles": 1472, "bytes_per_tile": 638976,
                              "clock_hz": 1.33e9}  # fmt: skip
    assert len(report["ipus"][0]["tile_bytes"]) == 1472
    assert report["cycles"]["per_call"] == report["cycles"]["per_step"] * 4
    assert report["ipus"][0]["categories"]["optimizer_state"] == 2 * params * 4


def test_the_ipu_version_and_tiles_change_the_figures():
    _configure(version="ipu1")
    ipu1 = _train_mlp().cost()
    ipu.config.reset_ipu_configuration()
    _configure(tiles_per_ipu=64)
    small = _train_mlp().cost()
    assert ipu1.chip.tiles == 1216 and ipu1.chip.bytes_per_tile == 256 * 1024
    assert small.chip.tiles == 64
    assert max(small.memory[0].tile_bytes) > max(ipu1.memory[0].tile_bytes)
    assert small.cycles.per_step > ipu1.cycles.per_step  # fewer tiles: less parallel work


def test_options_that_matter_on_the_chip_change_the_estimate():
    _configure()
    program = _train_mlp()
    base = program.cost(cost_options.CostOptions())
    recomputed = program.cost(cost_options.CostOptions(recomputation=True))
    offloaded = program.cost(cost_options.CostOptions(offload_optimizer_state=True))
    starved = program.cost(cost_options.CostOptions(available_memory_proportion=0.0001))
    assert recomputed.memory[0].categories["activations"] < base.memory[0].categories["activations"]
    assert offloaded.memory[0].categories["optimizer_state"] == 0
    assert offloaded.memory[0].categories["remote_buffers"] > 0
    assert starved.cycles.per_step > base.cycles.per_step  # matmuls planned in slices
    with_io = program.cost(cost_options.CostOptions(num_io_tiles=32))
    assert with_io.cycles.compute >= base.cycles.compute


def test_half_precision_halves_the_weights_and_speeds_up_matmuls():
    _configure()
    single = _train_mlp().cost()
    ipu.config.reset_ipu_configuration()
    _configure()
    half = _train_mlp(dtype="float16").cost()

    def weights(cost):
        return sum(v.bytes for v in cost.workload.variables if v.kind is VariableKind.WEIGHT)

    assert weights(half) == pytest.approx(weights(single) / 2, rel=0.01)
    matmul = [c for c in single.cycles.operations if c.operation.matmul]
    matmul_half = [c for c in half.cycles.operations if c.operation.matmul]
    assert sum(c.compute for c in matmul_half) < sum(c.compute for c in matmul)


def test_a_program_that_does_not_fit_fails_to_compile_like_the_hardware():
    _configure(tiles_per_ipu=4)  # 4 tiles of 624 KiB: about 2.4 MB

    @tf.function
    def step(x):
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            return ipu.ipu_compiler.compile(lambda: [tf.matmul(x, x)], [])

    with pytest.raises(tf.errors.InternalError) as caught:
        step(tf.ones([1024, 1024]))  # 4 MB each for the input and the output
    message = str(caught.value)
    assert out_of_memory.PREFIX in message
    assert "Out of memory on tile" in message and "638976 bytes" in message


def test_allow_out_of_memory_compiles_anyway(monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"debug.allowOutOfMemory": "true"}')
    _configure(tiles_per_ipu=4)

    @tf.function
    def step(x):
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            return ipu.ipu_compiler.compile(lambda: [tf.matmul(x, x)], [])

    result = step(tf.ones([1024, 1024]))
    np.testing.assert_allclose(np.asarray(result[0])[0, :3], [1024.0] * 3)
    assert not compiled_program.recent()[-1].cost().fits


def test_replicas_add_all_reduce_cycles_over_the_ipu_links():
    _configure(ipus=2)
    program = _train_mlp(steps=2)
    assert program.replicas == 2
    cost = program.cost()
    weights = sum(v.bytes for v in cost.workload.variables if v.kind is VariableKind.WEIGHT)
    expected = np.ceil(2 * (2 - 1) / 2 * weights / cost.chip.ipu_link_bytes_per_second * 1.33e9)
    assert cost.cycles.collectives == pytest.approx(expected, rel=0.01)
    single = program.cost(cost_options.CostOptions())
    assert single.cycles.per_step == cost.cycles.per_step  # same options, same replicas


def test_estimate_of_a_hand_made_workload_matches_the_chip_rates():
    from openipu._src.engine.cost_model.workload import Operation, Workload

    # One fp16 matmul of 2 x 1472 x 64 x 2 multiply-adds: exactly 2 cycles of the matrix
    # units at their peak, 3 times that at the share of the peak real layers reach.
    flops = 2 * 1472 * 64 * 2
    op = Operation("mm", "MatMul", 0, flops, True, True, 0, 0, (), (("mm:0", 0),))
    cost = estimate.estimate(Workload((op,), ()), cost_options.CostOptions())
    assert cycles.MATMUL_CYCLES_PER_PEAK_CYCLE == 3
    assert cost.cycles.compute == 2 * 3
    assert cost.cycles.per_step == 2 * 3 + cost.chip.sync_cycles


def test_outlining_shares_the_code_of_identical_operations():
    from openipu._src.engine.cost_model.memory import CODE_BYTES_PER_OPERATION
    from openipu._src.engine.cost_model.workload import Operation, Workload

    # Four identical additions and one of another size: five operations' code, or with
    # PopART's outlining two (the four copies call one subgraph).
    sizes = [64, 64, 64, 64, 128]
    ops = tuple(
        Operation(f"add{i}", "AddV2", 0, n, False, False, 8 * n, 4 * n, (), ((f"a{i}:0", 4 * n),))
        for i, n in enumerate(sizes)
    )
    workload = Workload(ops, ())

    def code(outlining: bool) -> int:
        options = cost_options.CostOptions(outlining=outlining)
        return estimate.estimate(workload, options).memory[0].categories["code"]

    assert code(False) - code(True) == 3 * CODE_BYTES_PER_OPERATION


def test_auto_report_writes_a_cost_report_that_openipu_report_renders(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys

    monkeypatch.setenv(
        "POPLAR_ENGINE_OPTIONS",
        json.dumps({"autoReport.all": "true", "autoReport.directory": str(tmp_path)}),
    )
    _configure()
    program = _train_mlp()
    written = json.loads((tmp_path / f"{program.name}.cost.json").read_text())
    expected = program.cost().to_report(program.to_dict())
    assert written["cycles"] == expected["cycles"]
    assert written["ipus"][0]["categories"] == expected["ipus"][0]["categories"]
    result = subprocess.run(
        [sys.executable, "-m", "openipu", "report", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "report.html").read_text()
    assert program.name in page and str(expected["cycles"]["per_step"]) in page


def _pipelined_program(schedule, count=4, momentum=False, **options):
    from tensorflow.python.ipu import pipelining_ops

    _configure(ipus=2)
    strategy = ipu.ipu_strategy.IPUStrategy()
    data = tf.data.Dataset.from_tensor_slices(
        (np.ones([64, 256], np.float32), np.ones([64, 1], np.float32))
    ).batch(4, drop_remainder=True)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        w1 = tf.Variable(tf.ones([256, 512]), name="stage_one_weight")
        w2 = tf.Variable(tf.ones([512, 1]), name="stage_two_weight")

        def stage1(x, y):
            return tf.matmul(x, w1), y

        def stage2(h, y):
            return tf.reduce_mean(tf.square(tf.matmul(h, w2) - y))

        keras_optimizer = tf.keras.optimizers.SGD(0.001, momentum=0.9)

        def optimizer_function(loss):
            if momentum:
                return pipelining_ops.OptimizerFunctionOutput(
                    keras_optimizer, loss, variables=[w1, w2]
                )
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.001)
            return pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

        @tf.function(jit_compile=True)
        def net():
            return pipelining_ops.pipeline(
                [stage1, stage2],
                **options,
                gradient_accumulation_count=count,
                repeat_count=2,
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=optimizer_function,
                device_mapping=[0, 1],
                pipeline_schedule=schedule,
            )

        strategy.run(net)
    return compiled_program.recent()[-1]


def test_a_pipeline_puts_each_stage_on_its_ipu_and_pays_its_schedules_bubble():
    from tensorflow.python.ipu import pipelining_ops

    grouped = _pipelined_program(pipelining_ops.PipelineSchedule.Grouped).cost()
    assert len(grouped.memory) == 2 and len(grouped.cycles.per_stage) == 2
    weights = {v.name.split(":")[0]: v.ipu for v in grouped.workload.variables}
    assert weights["stage_one_weight"] == 0 and weights["stage_two_weight"] == 1
    assert grouped.memory[0].categories["weights"] >= 256 * 512 * 4
    assert grouped.memory[1].categories["weights"] < 256 * 512 * 4
    assert grouped.workload.pipeline_schedule == "Grouped"
    assert grouped.workload.gradient_accumulation_count == 4
    # Grouped: the slowest stage sets the pace; filling and draining 2 stages forwards and
    # backwards costs 2 (S - 1) of its micro-batch steps per group of 4.
    slowest = max(grouped.cycles.per_stage)
    assert grouped.cycles.pipeline_bubble == int(np.ceil(2 * slowest / 4))
    assert grouped.cycles.per_step == slowest + grouped.cycles.pipeline_bubble
    ipu.config.reset_ipu_configuration()
    sequential = _pipelined_program(pipelining_ops.PipelineSchedule.Sequential).cost()
    # Sequential runs the stages one after another: no overlap, no bubble.
    assert sequential.cycles.pipeline_bubble == 0
    assert sequential.cycles.per_step == sum(sequential.cycles.per_stage)


def test_pre_compile_estimates_the_program_without_running_it():
    # DeviceConnectionType.PRE_COMPILE: compiled for the chip, never run (outputs are zeros),
    # which is how the original profiles a program without an IPU.
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.device_connection.type = ipu.config.DeviceConnectionType.PRE_COMPILE
    config.device_connection.version = "ipu2"
    config.configure_ipu_system()

    @tf.function
    def step(x):
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            return ipu.ipu_compiler.compile(lambda: [tf.matmul(x, x)], [])

    result = step(tf.ones([256, 256]))
    assert not np.any(np.asarray(result[0]))  # not run
    cost = compiled_program.recent()[-1].cost()
    matmuls = [op for op in cost.workload.operations if op.matmul]
    assert [op.flops for op in matmuls] == [2 * 256**3]


def test_offloaded_optimizer_state_lives_in_streaming_memory():
    from tensorflow.python.ipu import pipelining_ops

    grouped = pipelining_ops.PipelineSchedule.Grouped
    on_chip = _pipelined_program(grouped, momentum=True).cost()
    ipu.config.reset_ipu_configuration()
    offloaded = _pipelined_program(
        grouped, momentum=True, offload_weight_update_variables=True
    ).cost()
    # Momentum keeps one slot per weight: stage one's 256 x 512 floats.
    assert on_chip.memory[0].categories["optimizer_state"] >= 256 * 512 * 4
    assert on_chip.memory[0].categories["remote_buffers"] == 0
    assert offloaded.memory[0].categories["optimizer_state"] == 0
    assert offloaded.memory[0].categories["remote_buffers"] >= 256 * 512 * 4
