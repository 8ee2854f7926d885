"""What graphcore/popart's optimizer_tests/*_mixed_mode_test_py_*.py share: a model of four
Gemm layers trained for a few steps with optimizers whose values are const (compiled in) or
non-const (streamed from the host, replaceable) in various mixes, default and weight-specific,
replaced during training; every mix must train the weights (and optimizer state) the first
one trains. The original also repeats each mix with outlining on; openipu does no outlining,
so those repeats are left out."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

import popart
from conftest import create_test_device

SIZE = 10

OptimizerMap = dict[int, popart.Optimizer]


def _train(opt_map: OptimizerMap, steps: int, dtype: type, path: pathlib.Path) -> dict:
    np.random.seed(1878)
    builder = popart.Builder()
    type_name = "FLOAT" if dtype == np.float32 else "FLOAT16"
    data = builder.addInputTensor(popart.TensorInfo(type_name, [SIZE, SIZE]))
    out = data
    for layer in range(4):
        w = builder.addInitializedInputTensor(
            np.random.rand(SIZE, SIZE).astype(dtype), f"w_{layer}"
        )
        b = builder.addInitializedInputTensor(np.random.rand(SIZE).astype(dtype), f"b_{layer}")
        out = builder.aiOnnx.gemm([out, w, b], 1, 1, False, False)
    loss = builder.aiGraphcore.identityloss([out])
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {}),
        optimizer=opt_map[0],
        loss=loss,
        patterns=popart.Patterns(popart.PatternsLevel.All),
        deviceInfo=create_test_device(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    for step in range(steps):
        if step in opt_map and step > 0:
            session.updateOptimizerFromHost(opt_map[step])
        session.run(popart.PyStepIO({data: np.ones((SIZE, SIZE), dtype)}, {}))
    session.modelToHost(str(path))
    return {
        init.name: numpy_helper.to_array(init) for init in onnx.load(str(path)).graph.initializer
    }


def check_same_training(
    opt_maps: list[OptimizerMap],
    tmp_path: pathlib.Path,
    dtype: type,
    steps: int = 10,
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> None:
    """Every optimizer map trains what the first one does (float16 within its precision).

    The original's np.allclose defaults (atol 1e-8) hold on its compiler; here a const value
    may be folded into the arithmetic where a streamed one is not, so a weight near 0 that
    is the difference of unit-sized numbers may differ by a float32 ulp at 0.5 (6e-8).
    """
    if dtype == np.float16:
        rtol, atol = max(rtol, 1e-2), max(atol, 1e-3)
    else:
        atol = max(atol, 1e-7)
    first = _train(opt_maps[0], steps, dtype, tmp_path / "first.onnx")
    assert any(name.startswith("w_") for name in first)
    for index, opt_map in enumerate(opt_maps[1:], 1):
        other = _train(opt_map, steps, dtype, tmp_path / f"mix{index}.onnx")
        assert sorted(other) == sorted(first)
        for name, value in first.items():
            np.testing.assert_allclose(
                other[name].astype(np.float32),
                value.astype(np.float32),
                rtol=rtol,
                atol=atol,
                err_msg=f"mix {index}: {name}",
            )


def one_non_const_each(
    make: Callable[[dict], popart.Optimizer],
    values: dict[str, float],
    always_const: tuple[str, ...] = (),
) -> list[OptimizerMap]:
    """All values const, then each value in turn non-const (the others const)."""
    maps = [{0: make({key: (value, True) for key, value in values.items()})}]
    for chosen in values:
        if chosen in always_const:
            continue
        maps.append({0: make({key: (value, key != chosen) for key, value in values.items()})})
    return maps


def specific_mixes(
    make: Callable[[dict], popart.Optimizer],
    rates: tuple[float, float],
    defaults: dict[str, float],
    specifics: dict[str, float],
    fixed: dict | None = None,
) -> list[OptimizerMap]:
    """Three mixes of a non-const learning rate replaced after five steps, default values
    and values specific to w_0 and b_0: (1) all else const, (2) all else non-const, (3) the
    first default key const, its specific value non-const and the second specific value
    const, the rest non-const."""
    first_key = next(iter(specifics))
    default_first = "default" + first_key[0].upper() + first_key[1:]

    def mix(rate: float, kind: int) -> popart.Optimizer:
        settings = {"defaultLearningRate": (rate, False), **(fixed or {})}
        for key, value in defaults.items():
            settings[key] = (value, kind == 1 or (kind == 3 and key == default_first))
        optimizer = make(settings)
        specific = {}
        for key, value in specifics.items():
            const = kind == 1 or (kind == 3 and key != first_key)
            specific[key] = (value, const)
        for weight in ("w_0", "b_0"):
            optimizer.insertSpecific(weight, specific)
        return optimizer

    return [{0: mix(rates[0], kind), 5: mix(rates[1], kind)} for kind in (1, 2, 3)]


def op_debug_contexts(tmp_path: pathlib.Path, run: Callable[[], object], op: str) -> list[dict]:
    """The Poplar debug contexts of the IR's ops whose op id names `op` that `run` makes."""
    filename = str(tmp_path / "debug.json")
    popart.initializePoplarDebugInfo(filename, "json")
    try:
        run()
    finally:
        popart.closePoplarDebugInfo()
    with open(filename, encoding="utf-8") as file:
        data = json.load(file)
    found = [c for c in data["contexts"] if c.get("layer") == "popart" and op in c.get("opid", "")]
    # As the original checks: each is the child of a context of the optimizer's debug
    # context (named after the optimizer), of layer "popartbuilder".
    by_id = {c["id"]: c for c in data["contexts"]}
    for context in found:
        parent = by_id[context["parentId"]]
        assert parent["layer"] == "popartbuilder"
        assert data["stringTable"][parent["name"]] == op.lower()
    return found
