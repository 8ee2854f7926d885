"""A process near Linux's memory-mapping limit stops making XLA executables (TensorFlow never
frees them) and runs new programs as TensorFlow graphs, with the same numbers, instead of
crashing later with a segmentation fault."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.engine import compile_policy, compiled_program, xla_cache_room


def _run_matmul_program(strategy) -> tuple[np.ndarray, np.ndarray]:
    weights = np.arange(12, dtype=np.float32).reshape(3, 4) / 10

    @tf.function
    def step(x):
        return tf.nn.relu(tf.matmul(x, weights) - 0.5)

    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    return strategy.run(step, args=(tf.constant(x),)).numpy(), np.maximum(x @ weights - 0.5, 0)


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(xla_cache_room, "_warned", False)


def test_programs_compile_with_xla_while_the_process_has_room(strategy_on, fresh_warning):
    strategy = strategy_on(1)
    with strategy.scope():
        result, expected = _run_matmul_program(strategy)
    np.testing.assert_allclose(result, expected, rtol=1e-6)
    assert compiled_program.recent()[-1].executor is compile_policy.CompileMode.XLA


def test_near_the_limit_new_programs_run_as_graphs_with_one_warning(
    strategy_on, fresh_warning, monkeypatch, caplog
):
    # The process already holds more mappings than 80% of this limit.
    monkeypatch.setattr(xla_cache_room, "_map_limit", lambda: 100)
    strategy = strategy_on(1)
    with caplog.at_level(logging.WARNING, logger=xla_cache_room.__name__), strategy.scope():
        first, expected = _run_matmul_program(strategy)
        assert compiled_program.recent()[-1].executor is compile_policy.CompileMode.GRAPH
        second, _ = _run_matmul_program(strategy)
    np.testing.assert_allclose(first, expected, rtol=1e-6)
    np.testing.assert_allclose(second, expected, rtol=1e-6)
    warnings = [r.getMessage() for r in caplog.records if r.name == xla_cache_room.__name__]
    assert len(warnings) == 1 and "vm.max_map_count" in warnings[0]


def test_the_limit_is_the_kernels():
    with open("/proc/sys/vm/max_map_count") as file:
        assert xla_cache_room._map_limit() == int(file.read())
