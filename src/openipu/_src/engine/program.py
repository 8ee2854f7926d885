"""Programs driven from Python: N steps per call, inputs and outputs as stacked buffers.

Keras `fit`/`evaluate`/`predict` and PopART `session.run` hold their data on
the host and call the device once per N steps (steps per execution, batches
per step). `LoopProgram` is their common entry to the engine: one call runs
one compiled region holding a device loop of N iterations, whose infeed is
the stacked inputs of the call and whose outputs come back stacked through an
outfeed. It is the same device loop as `loops.repeat`, not a second engine.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.engine import compile_policy, device_loop, region, replication
from openipu._src.system import configure


class LoopProgram:
    """`step(element)` run `iterations` times per call on an emulated IPU device.

    `outputs` is "all" (every step's outputs, stacked) or "last" (only the final
    step's). The step may return None (no outputs).

    The device is `/device:IPU:<device_ordinal>` of the configured IPU system, unless
    `host_device` is given: front ends with their own device model (PopART's DeviceManager)
    pass the host device of their emulated IPU, and `device_ordinal` then only names the
    IPU whose seed stream the program's random ops use.
    """

    def __init__(
        self,
        step: Callable,
        iterations: int,
        *,
        device_ordinal: int = 0,
        host_device: str | None = None,
        outputs: str = "all",
        compile_mode: compile_policy.CompileMode | None = None,
        name: str = "ipu_program",
    ) -> None:
        from openipu._src.feeds.outfeed import IPUOutfeedMode, IPUOutfeedQueue

        if outputs not in ("all", "last"):
            raise ValueError(f"outputs must be 'all' or 'last', got {outputs!r}")
        self._step = step
        self.iterations = iterations
        self._device_ordinal = device_ordinal
        self._host_device = host_device
        self._compile_mode = compile_mode
        mode = IPUOutfeedMode.ALL if outputs == "all" else IPUOutfeedMode.LAST
        self._outfeed = IPUOutfeedQueue(mode)
        self._has_outputs = False
        self._function = tf.function(self._program, autograph=False, reduce_retracing=True)
        self.__name__ = name

    def __call__(self, stacked_inputs):
        """Runs `iterations` steps over `stacked_inputs`; returns the stacked outputs (or None)."""
        if self._compile_mode is None and self._last_mode is None:
            # Trace first: if the region must run as a graph, rebuild it outside the XLA
            # context (see region._PlainContext) before it ever runs.
            self._function.get_concrete_function(stacked_inputs)
            if self._last_mode is compile_policy.CompileMode.GRAPH:
                self._compile_mode = compile_policy.CompileMode.GRAPH
                self._function = tf.function(self._program, autograph=False, reduce_retracing=True)
        return self._function(stacked_inputs)

    @property
    def compiled_mode(self) -> compile_policy.CompileMode | None:
        return self._last_mode

    _last_mode: compile_policy.CompileMode | None = None

    def _program(self, stacked_inputs):
        host_device = self._host_device or (
            configure.current_system("an IPU program").device(self._device_ordinal).host_device()
        )
        infeed = device_loop.StackedInput(stacked_inputs)

        def body(element):
            outputs = replication.run_in_replica_context(self._step, element)
            if outputs is None:
                return []
            self._has_outputs = True
            return [self._outfeed.enqueue(outputs)]

        def build():
            return device_loop.repeat(self.iterations, body, [], infeed)

        region.compile_region(
            build,
            [],
            host_device,
            ipu_ordinal=self._device_ordinal,
            flat_return_rules=False,
            mode=self._compile_mode,
            on_mode=self._record_mode,
        )
        return self._outfeed.dequeue() if self._has_outputs else None

    def _record_mode(self, mode: compile_policy.CompileMode) -> None:
        self._last_mode = mode
