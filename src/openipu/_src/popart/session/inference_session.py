"""`popart.InferenceSession`: runs an ONNX model forward on an emulated IPU.

Its program runs on the faster of two executors (the guide's rule: measure, and let the
engine pick the fastest executor per program): the TensorFlow lowering every session
compiles (XLA or a graph), or, for models whose every op means the same to onnxruntime
(`onnx_runtime_model.qualifies`), onnxruntime's CPU kernels. Both are checked to agree on
the same inputs before onnxruntime may be timed; `OPENIPU_COMPILE=onnxruntime` skips the
timing (and `xla` or `graph` keeps TensorFlow).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from openipu._src.engine import compile_policy, compiled_program
from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.compiled_program import CompiledProgram
from openipu._src.engine.onnx_runtime_program import (
    OnnxRuntimeProgram,
    faster_program,
    host_cores,
)
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.options.enums import SyntheticDataMode
from openipu._src.popart.session import bound_run, onnx_runtime_model
from openipu._src.popart.session.ir import Ir
from openipu._src.popart.session.session_core import SessionCore
from openipu._src.popart.session.stepio import StepIO

logger = logging.getLogger(__name__)


class InferenceSession(SessionCore):
    """`InferenceSession(fnModel, dataFlow, deviceInfo, inputShapeInfo=InputShapeInfo(),
    patterns=None, userOptions=SessionOptions(), name='inference')`.

    `fnModel` is a serialized ModelProto, a ModelProto or an ONNX file name.
    """

    _training = False
    _default_name = "inference"
    _onnx_runtime: OnnxRuntimeProgram | None = None
    _onnx_runtime_stale = False
    _bound: bound_run.BoundRun | None = None

    @classmethod
    def fromIr(cls, ir: Ir, deviceInfo: DeviceInfo, name: str = "fromIr") -> InferenceSession:  # noqa: N802, N803
        """A session built from another session's `getIr()`."""
        if not isinstance(ir, Ir):
            # The binding takes `const Ir &` (python/popart/popart_core/popart.cpp): pybind11's
            # TypeError for anything else.
            raise OptionTypeError(f"fromIr needs an Ir (session.getIr()), got {type(ir).__name__}")
        if deviceInfo is None:
            # willow/src/session.cpp, InferenceSession::createFromIr (its words).
            raise popart_exception("InferenceSession::createFromIr: Must pass valid DeviceInfo.")
        return cls(
            ir.model,
            ir.data_flow,
            deviceInfo,
            ir.input_shape_info,
            ir.patterns,
            ir.options,
            name,
        )

    # -- the executor ----------------------------------------------------------------------

    def _compile(self) -> None:
        self._onnx_runtime = self._cached_onnx_runtime()
        if self._onnx_runtime is None:
            super()._compile()
            if self._cached_program is None and self._onnx_runtime_may_run():
                self._try_onnx_runtime()
        self._facts.compile_mode = self._compiled_mode_name()

    def _cached_onnx_runtime(self) -> OnnxRuntimeProgram | None:
        """The onnxruntime program the engine cache (or a loaded executable) names: no
        TensorFlow program to compile, nothing to measure (the lowering is traced if it is
        ever needed). None when it names another executor, or onnxruntime cannot run it."""
        cached = self._cached_program
        if cached is None or cached.executor is not CompileMode.ONNX_RUNTIME:
            return None
        if not self._onnx_runtime_may_run():
            return None
        programs = self._new_onnx_runtime_programs()
        chosen = next(
            (p for p in programs if p.compiled.step_schedule is cached.step_schedule), None
        )
        if chosen is not None:
            compiled_program.record(chosen.compiled)
        return chosen

    def _compiled_program(self) -> CompiledProgram | None:
        if self._onnx_runtime is not None:
            return self._onnx_runtime.compiled
        return super()._compiled_program()

    def _onnx_runtime_may_run(self) -> bool:
        forced = compile_policy.forced_mode()
        options = self._options
        return (
            forced in (None, CompileMode.ONNX_RUNTIME)
            and self._placement is None
            and options.syntheticDataMode is SyntheticDataMode.Off
            and not options.enableFloatingPointChecks
            # onnxruntime rounds float16 results to nearest.
            and not options.enableStochasticRounding
            # onnxruntime runs one model for every replica: no per-group weights.
            and not any(variable.split for variable in self._grouped.values())
            and onnx_runtime_model.qualifies(self._model, self._inputs, self._spec.device_anchors)
        )

    def _new_onnx_runtime_programs(self) -> list[OnnxRuntimeProgram]:
        """onnxruntime running the model batch by batch, batch by batch with the batches
        shared out among the host's cores, and, where the model's batch dimension can be
        freed, all of a call's batches at once."""
        spec = self._spec
        anchors = spec.device_anchors
        model = onnx_runtime_model.runnable_model(
            self._model, self._weights.current(), self._inputs, anchors
        )
        batches = spec.batches_per_step * spec.replicas
        cores = min(host_cores(), batches) if not spec.returns_last_batch_only else 1
        variants: list[tuple[bytes, bool, int]] = [(model, False, 1)]
        if cores > 1:
            variants.append((model, False, cores))
        free = onnx_runtime_model.with_free_batch(model)
        if free is not None and batches > 1:
            variants.append((free, True, 1))
        programs = []
        for variant, together, variant_cores in variants:
            try:
                programs.append(
                    OnnxRuntimeProgram(
                        variant,
                        [plan.tensor_id for plan in anchors],
                        spec.batches_per_step,
                        replicas=spec.replicas,
                        outputs="last" if spec.returns_last_batch_only else "all",
                        ipu_ordinal=spec.ipu_ordinal,
                        name=spec.name,
                        batches_together=together,
                        cores=variant_cores,
                    )
                )
            except Exception as error:  # noqa: BLE001 - a variant onnxruntime refuses: skip it
                logger.debug("%s: onnxruntime refuses a variant (%s)", self._name, error)
        return programs

    def _try_onnx_runtime(self) -> None:
        """Runs the model on onnxruntime where it agrees with the lowering and is faster."""
        seed = self._random.seed
        try:
            inputs = self._trial_inputs()
            lowered = self._built_program()(inputs)
            candidates = []
            for candidate in self._new_onnx_runtime_programs():
                try:
                    agrees = _agree(lowered, candidate(inputs))
                except Exception as error:  # noqa: BLE001 - e.g. a shape that fixes the batch
                    logger.debug("%s: an onnxruntime variant fails (%s)", self._name, error)
                    continue
                if agrees:
                    candidates.append(candidate)
            if not candidates:
                logger.info("%s: onnxruntime's results differ; TensorFlow runs it", self._name)
                return
            forced = compile_policy.forced_mode() is CompileMode.ONNX_RUNTIME
            if forced:
                chosen: OnnxRuntimeProgram | None = candidates[-1]
            else:
                fastest = faster_program([self._built_program(), *candidates], inputs)
                chosen = candidates[fastest - 1] if fastest > 0 else None
            if chosen is not None:
                self._onnx_runtime = chosen
                compiled_program.record(chosen.compiled)
        except Exception as error:  # noqa: BLE001 - any failure: the lowering runs the model
            logger.debug("%s: onnxruntime cannot run it (%s)", self._name, error)
        finally:
            self._random.seed = seed

    def _trial_inputs(self) -> dict[str, Any]:
        """Inputs to compare and time the executors on: random floats, zero indices."""
        rng = np.random.default_rng(0)
        inputs = {}
        for plan in self._inputs:
            dtype = plan.signature.numpy_dtype
            shape = plan.program_shape
            if np.issubdtype(dtype, np.floating):
                inputs[plan.tensor_id] = rng.normal(size=shape).astype(dtype)
            else:
                inputs[plan.tensor_id] = np.zeros(shape, dtype)
        return inputs

    def _device_weights_changed(self) -> None:
        # onnxruntime holds the weights as constants: it takes the new ones before a run.
        self._onnx_runtime_stale = self._onnx_runtime is not None

    def _program_to_run(self) -> Callable[[dict[str, Any]], Any]:
        if self._onnx_runtime is None:
            return self._built_program()
        if self._onnx_runtime_stale:
            schedule = self._onnx_runtime.compiled.step_schedule
            self._onnx_runtime = next(
                program
                for program in self._new_onnx_runtime_programs()
                if program.compiled.step_schedule is schedule
            )
            self._onnx_runtime_stale = False
        return self._onnx_runtime

    def _stacked_inputs(self, stepio: StepIO) -> dict[str, Any]:
        if self._onnx_runtime is None:
            return super()._stacked_inputs(stepio)
        # onnxruntime reads numpy arrays: TensorFlow tensors viewed as arrays were measured
        # slower to feed it (the CNN of benchmarks/popart_inference.py: 0.55 against 0.31 ms
        # per batch).
        arrays = stepio.read_inputs(self._inputs)
        return {
            plan.tensor_id: np.ascontiguousarray(
                plan.program_values(arrays[plan.tensor_id]), plan.signature.numpy_dtype
            )
            for plan in self._inputs
        }

    def _bound_call(self, stepio: StepIO) -> Callable[[], None] | None:
        bound = self._bound
        if (
            bound is None
            or self._onnx_runtime_stale
            or not bound.serves(self._onnx_runtime, stepio)
        ):
            return None
        return bound.call

    def _bind_for_next_runs(
        self, program: object, stacked: dict[str, Any], stepio: StepIO, outputs: dict[str, Any]
    ) -> None:
        self._bound = None
        on_onnx_runtime = self._onnx_runtime
        if on_onnx_runtime is not None and program is on_onnx_runtime:
            self._bound = bound_run.bind(on_onnx_runtime, stacked, stepio, outputs, self._anchors)

    def _compiled_mode_name(self) -> str:
        if self._onnx_runtime is not None:
            return self._onnx_runtime.compiled.describe()
        return super()._compiled_mode_name()


def _agree(lowered: dict[str, Any] | None, candidate: dict[str, Any] | None) -> bool:
    lowered, candidate = lowered or {}, candidate or {}
    if set(lowered) != set(candidate):
        return False
    for name, value in lowered.items():
        expected = np.asarray(value)
        got = np.asarray(candidate[name])
        if expected.shape != got.shape or expected.dtype != got.dtype:
            return False
        if not np.allclose(got, expected, rtol=1e-3, atol=1e-5, equal_nan=True):
            return False
    return True
