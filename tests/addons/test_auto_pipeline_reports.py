"""auto_pipeline's `utils.types`, `utils.pva_utils` (on a report shaped as pva's, with figures
summed by hand) and `prediction.max_throughput` (its cost and its search)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from ipu_tensorflow_addons.keras.experimental.auto_pipeline.prediction import max_throughput
from ipu_tensorflow_addons.keras.experimental.auto_pipeline.utils import (
    pva_utils,
    types,
    types_utils,
)
from openipu._src.addons.auto_pipeline import partition, profiling


def test_typed_dicts_have_the_fields_of_the_profiles():
    layer = types_utils.get_empty_layer_info()
    assert set(types.LayerInfo.__annotations__) == set(layer)
    assert set(types.MemoryLayerInfo.__annotations__) == set(layer["memory"])
    assert set(types.CycleInfo.__annotations__) == {"forward", "backward", "total"}
    assert set(types.MemoryRangeInfo.__annotations__) >= {"totalMemory", "maxTemporary", "shared"}
    assert set(types.IPUClusterInfo.__annotations__) == {"clock", "memory", "connection"}
    config: types.AutoPipelineConfiguration = {"memoryProportion": 0.8, "usePoplarEstimation": True}
    assert set(config) == set(types.AutoPipelineConfiguration.__annotations__)


def _tile(vertex, exchange, state, control, always_live, total):
    category = NS(
        vertexCode=NS(total=vertex),
        internalExchangeCode=NS(total=exchange),
        vertexInstanceState=NS(total=state),
        controlCode=NS(total=control),
    )
    return NS(
        memory=NS(category=category, alwaysLiveBytes=always_live, total=NS(excludingGaps=total))
    )


def _step(name, ptype, live, tile_cycles=(), compute_cycles=()):
    program = NS(
        name=name,
        type=ptype,
        estimatedCyclesByTile=list(tile_cycles),
        computeset=NS(estimatedCyclesByTile=list(compute_cycles)),
    )
    return NS(program=program, notAlwaysLiveMemoryForIpu=lambda ipu: NS(bytes=live[ipu]))


def _report():
    tiles = [_tile(10, 20, 30, 40, 1000, 1500), _tile(1, 2, 3, 4, 100, 200)]
    steps = [
        _step("StreamCopy", pva_utils.PType.StreamCopyBegin, [300]),
        _step("dense/MatMul", pva_utils.PType.OnTileExecute, [900], compute_cycles=[5, 70, 9]),
        _step("dense/exchange", pva_utils.PType.DoExchange, [500], tile_cycles=[11, 4]),
        _step("relu/op", pva_utils.PType.OnTileExecute, [400], compute_cycles=[8]),
    ]
    programs = [
        NS(
            name="dense/exchange",
            type=pva_utils.PType.DoExchange,
            codeBytesByTile=[6, 7],
            controlCodeByTile=[1],
        ),
        NS(
            name="other/exchange",
            type=pva_utils.PType.DoExchange,
            codeBytesByTile=[50],
            controlCodeByTile=[2],
        ),
        NS(name="sync", type=pva_utils.PType.SyncAns, codeBytesByTile=[], controlCodeByTile=[3, 3]),
    ]
    variables = [
        NS(name="dense/kernel", size=4096),
        NS(name="dense/bias", size=64),
        NS(name="code", size=9999),
    ]
    compilation = NS(
        ipus=[NS(tiles=tiles)],
        livenessProgramSteps=steps,
        programs=programs,
        alwaysLiveVariables=variables,
    )
    return NS(compilation=compilation)


def test_pva_utils_sum_a_report_s_figures():
    report = _report()
    assert pva_utils.check_report(report, "dense") and not pva_utils.check_report(report, "conv")
    assert pva_utils.get_vertex_code(report) == 11
    assert pva_utils.get_vertex_instance_state(report) == 33
    assert pva_utils.get_internal_exchange_code(report) == 22
    assert pva_utils.get_internal_exchange_code(report, name="dense") == 13
    assert pva_utils.get_control_code(report) == 44
    assert pva_utils.get_control_code(report, name="dense") == 1 + 6
    assert pva_utils.get_total_memory(report) == 1700
    assert pva_utils.get_parameter_from_not_always_alive(report) == 300
    assert pva_utils.get_max_live_memory(report) == 900 - 300
    assert pva_utils.get_parameter_from_always_live(report, name="dense") == 4096
    assert pva_utils.get_parameter_from_always_live(report) == (1000 - 100) + (100 - 10)
    assert pva_utils.get_layer_cycle(report, "dense", compile_only=True) == 70 + 11


def test_pva_utils_refuse_an_openipu_cost_report():
    cost_report = {"ipus": [{"total_bytes": 10}], "cycles": {}}
    with pytest.raises(TypeError, match="get_total_memory reads a Poplar profile report"):
        pva_utils.get_total_memory(cost_report)


def _stage(total):
    return {"cycle": {"forward": 0, "backward": 0, "total": total}}


def test_pipeline_cost_is_the_slowest_stage_per_batch():
    assert max_throughput.get_pipeline_cost([_stage(100), _stage(300), _stage(200)], 4) == 225


def test_search_needs_poplar_reports_and_says_so():
    def create_args(batch_size):
        cluster = {"clock": 1, "memory": 1, "connection": [{}]}
        return {
            "ipuConfig": None,
            "batchSize": batch_size,
            "autoPipeConfig": {},
            "clusterInfo": cluster,
        }

    with pytest.raises(NotImplementedError, match="Poplar"):
        max_throughput.search_for_max_throughput({"batch_size": [1, 2]}, {}, create_args, object)


def test_search_bisects_batch_sizes_and_grids_ipu_counts(monkeypatch):
    """Batches above 24 per IPU do not compile; a stage's cycles grow with the batch, and
    fall with more IPUs: the best is the largest batch that fits on the most IPUs."""
    profiled = []

    def profile_pipelined_model(create_model, create_dataset, batch_size, stages, ipu_config):
        n_ipu = ipu_config
        profiled.append((batch_size, n_ipu))
        if batch_size > 24 * n_ipu:
            raise RuntimeError("out of memory")
        return [_stage((2000 + 10 * batch_size) // n_ipu)] * n_ipu

    monkeypatch.setattr(profiling, "create_model_profile", lambda *args: ["profile"])
    monkeypatch.setattr(
        partition, "get_auto_pipeline_partition_by_cycle_and_transfer", lambda *a: [0, 1]
    )
    monkeypatch.setattr(profiling, "profile_pipelined_model", profile_pipelined_model)

    def create_args(batch_size, n_ipu):
        cluster = {"clock": 1, "memory": 1, "connection": [{}] * n_ipu}
        return {
            "ipuConfig": n_ipu,
            "batchSize": batch_size,
            "autoPipeConfig": {},
            "clusterInfo": cluster,
        }

    config, stages = max_throughput.search_for_max_throughput(
        {"batch_size": list(range(1, 65))}, {"n_ipu": [1, 2]}, create_args, object
    )
    assert config == {"n_ipu": 2, "batch_size": 48}
    assert stages == [0, 1]
    # Bisection: about log2(64) candidates per IPU count, not all 64.
    assert len(profiled) <= 2 * 7


def test_stage_profiles_estimated_from_layer_profiles():
    from ipu_tensorflow_addons.keras.experimental.auto_pipeline.prediction import (
        partition_evaluate,
    )

    def layer(forward, parameters, outputs, code):
        info = types_utils.get_empty_layer_info()
        info["cycle"]["forward"] = forward
        info["memory"].update(
            exclusive={"parameter": parameters},
            shared={"code": code},
            inputs=outputs,
            outputs=outputs,
        )
        return info

    layers = [layer(100, 10, 1024, 7), layer(200, 20, 2048, 7), layer(50, 5, 4096, 3)]
    model = {"layerName": ["a", "b", "c"], "layerType": ["Dense"] * 3, "layerInfo": layers}
    # 1 byte per cycle each way, 10 idle cycles per transfer.
    link = {"recvGBps": 1.0, "sendGBps": 1.0, "recvIdleCycle": 10, "sendIdleCycle": 10}
    cluster = {"clock": 1024**3, "memory": 900, "connection": [dict(link), dict(link)]}
    first, second = partition_evaluate.estimate_pipelined_model_profile(model, cluster, [0, 2, 3])
    host = (10 + 1024) + (10 + 4096)  # model input to IPU 0, model output from IPU 1
    # IPU 0 sends the outputs of layer 2 (the original passes the next stage's first layer).
    assert first["cycle"]["forward"] == 300 and first["cycle"]["total"] == 300 + (10 + 4096) + host
    assert second["cycle"]["total"] == 50 + (10 + 4096) + host
    assert first["memory"]["exclusive"] == {"parameter": 30}
    assert first["memory"]["totalMemory"] == 30 + 7  # shared code counted once
