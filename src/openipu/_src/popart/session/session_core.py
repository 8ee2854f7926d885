"""What every PopART session does: model, data flow, device, weights, runs, files, reports.

A session is created from an ONNX model, a DataFlow, a device and options. Creating it
checks and lowers the model (`lowering/`), checks the options against the device and the
model, and plans the inputs and anchors. `prepareDevice` puts the weights and the random
seed on the device's host device and compiles the program (`step_program.py`), which
`run` calls once per step: `batchesPerStep` batches read from the step IO, anchors written
back in the shapes of their return types (`anchors.py`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import json
import logging
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import tensorflow as tf

from openipu._src.engine import floating_point_checks, host_arrays
from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.compiled_program import CompiledProgram
from openipu._src.engine.cost_model import chip as chip_figures
from openipu._src.engine.cost_model import out_of_memory
from openipu._src.engine.cost_model.estimate import CostEstimate
from openipu._src.engine.program import LoopProgram
from openipu._src.popart import reserved_names
from openipu._src.popart.builder import annotation_names
from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.builder.tensor_info import TensorInfo
from openipu._src.popart.dataflow import DataFlow
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.devices.enums import DeviceConnectionType, DeviceType
from openipu._src.popart.errors import (
    OutOfMemoryException,
    incompatible_arguments,
    popart_exception,
    popart_runtime_error,
    poplar_application_runtime_error,
    poplar_exception,
    poplar_runtime_error,
)
from openipu._src.popart.external_data import read_entry, write_back_to_back
from openipu._src.popart.input_shape_info import InputShapeInfo
from openipu._src.popart.logging import python_logger
from openipu._src.popart.lowering import lower_model
from openipu._src.popart.lowering.ops.ai_graphcore import ABORT_MESSAGE
from openipu._src.popart.options.enums import (
    Instrumentation,
    IrSerializationFormat,
    RecomputationType,
    SyntheticDataMode,
    VirtualGraphMode,
)
from openipu._src.popart.options.patterns import Patterns
from openipu._src.popart.options.session_options import SessionOptions
from openipu._src.popart.options.typed_fields import check_instance
from openipu._src.popart.pybind_arguments import STR, Arg, Signature, bind
from openipu._src.popart.session import (
    device_chip,
    engine_cache,
    executable_file,
    grouped_weights,
    ir_view,
    memory_budget,
    model_writer,
    option_fingerprint,
    option_rules,
    placement,
    reports,
    shift_graph_file,
    tensor_locations,
)
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.constexpr_log import trace_constant_folding
from openipu._src.popart.session.engine_option_names import check_engine_option_names
from openipu._src.popart.session.ir import Ir
from openipu._src.popart.session.model_ops import with_strided_group_norms
from openipu._src.popart.session.model_source import read_model
from openipu._src.popart.session.poplar_type_support import check_poplar_types
from openipu._src.popart.session.random_state import RandomState, rng_state_size
from openipu._src.popart.session.replicas import Replicas
from openipu._src.popart.session.step_program import SessionProgramSpec, build_program
from openipu._src.popart.session.stepio import InputPlan, StepIO
from openipu._src.popart.session.tensor_types import (
    TensorSignature,
    TensorTypes,
    input_signatures,
)
from openipu._src.popart.session.weights import WeightStore
from openipu._src.popart.session.weights_io import PyWeightsIO
from openipu._src.popart.utility import debug_info_stream

logger = logging.getLogger("popart.session")

# The programs a session can run by handle (`run(programHandle, stepio)`); "" is the main one.
_MAIN_PROGRAM = ""
_logger = python_logger("session")
_devicex_logger = python_logger("devicex")
# Ops that draw random numbers (their PopART ops' requiresRandomSeed).
_RANDOM_OP_TYPES = frozenset({
    "Dropout", "ShapedDropout", "RandomNormal", "RandomUniform", "RandomNormalLike",
    "RandomUniformLike", "Bernoulli", "Multinomial",
})  # fmt: skip
_FORWARD_ONLY_PROGRAM = "implicitPipeliningFwdOnly"


def _check_something_is_computed(model: onnx.ModelProto, anchors: list[str]) -> None:
    """The original prunes the ops no anchor needs and refuses a main graph left empty
    (willow/src/transforms/prune.cpp; prune_all_error_test)."""
    needed = set(anchors)
    for node in reversed(model.graph.node):
        if needed.intersection(node.output):
            return
    raise popart_exception("All operations in the main graph were pruned, nothing to compute")


class SessionCore:
    """The members that inference and training sessions share."""

    _training = False
    _default_name = "session"
    _warned_floating_point_checks = False

    def __init__(
        self,
        fnModel: Any,  # noqa: N803 - the original's argument names
        dataFlow: DataFlow,  # noqa: N803
        deviceInfo: DeviceInfo,  # noqa: N803
        inputShapeInfo: InputShapeInfo | None = None,  # noqa: N803
        patterns: Patterns | None = None,
        userOptions: SessionOptions | None = None,  # noqa: N803
        name: str | None = None,
    ) -> None:
        kind = type(self).__name__
        name = self._default_name if name is None else name
        if deviceInfo is None:
            raise popart_exception(f"Must pass a valid deviceInfo to {kind}")
        self._device = check_instance(deviceInfo, DeviceInfo, f"{kind} deviceInfo")
        self._data_flow = copy.deepcopy(check_instance(dataFlow, DataFlow, f"{kind} dataFlow"))
        if self._data_flow.batchesPerStep() <= 0:
            # setBatchesPerStep takes any int, as the original's; a step of no batches cannot
            # run, so the session refuses it with the DataFlow constructor's words.
            raise popart_exception(
                f"{kind}: 'Batches per step' must be greater than zero, got "
                f"{self._data_flow.batchesPerStep()} (DataFlow.setBatchesPerStep)"
            )
        shape_info = check_instance(
            InputShapeInfo() if inputShapeInfo is None else inputShapeInfo,
            InputShapeInfo,
            f"{kind} inputShapeInfo",
        )
        self._shape_info = copy.deepcopy(shape_info)
        self._patterns = copy.deepcopy(
            check_instance(
                Patterns() if patterns is None else patterns, Patterns, f"{kind} patterns"
            )
        )
        self._options = copy.deepcopy(
            check_instance(
                SessionOptions() if userOptions is None else userOptions,
                SessionOptions,
                f"{kind} userOptions",
            )
        )
        self._name = check_instance(name, str, f"{kind} name")

        source = read_model(fnModel)
        self._model = source.model
        ir_view.check_excluded_patterns(self._model)
        trace_constant_folding(self._model)
        #: Where the initializers the model keeps in external files are (optimizer state of
        #: such weights joins them: `_place_external_state`).
        self._external = source.external_locations
        self._check_options()
        # Weights grouped over the replicas: the program sees one replica's shapes.
        self._grouped = grouped_weights.plan(self._model, self.replicationFactor)
        replica_model = grouped_weights.replica_model(self._model, self._grouped)
        self._lowered = lower_model(
            with_strided_group_norms(replica_model)
            if self._options.groupNormStridedChannelGrouping
            else replica_model
        )
        self._input_signatures = input_signatures(
            self._lowered, self._shape_info, replica_model.graph
        )
        self._types = TensorTypes(
            replica_model, self._lowered, self._input_signatures, self.replicationFactor
        )
        self._weights = WeightStore(
            {
                **self._lowered.initializers,
                **grouped_weights.host_values(self._model, self._grouped),
            },
            self._grouped,
        )
        self._weights.constant_weights = not self._training and bool(self._options.constantWeights)
        self._weights.no_variables_caching = not self._options.enableVariablesCaching
        self._after_lowering()
        self._inputs = self._plan_inputs()
        self._anchors = self._plan_anchors()
        self._write_dot_files()
        if self._options.serializedPoprithmsShiftGraphsDir:
            # The original's scheduler writes it while the session prepares its IR.
            shift_graph_file.write_shift_graph(
                self._options.serializedPoprithmsShiftGraphsDir, self._model.graph
            )
        if debug_info_stream.is_open():
            ir_view.record_debug_infos(self._ir_request())
        if not self._training:
            _check_something_is_computed(self._model, self._data_flow.anchors())
        self._replicas = Replicas(self.replicationFactor)
        auto = None
        if self._options.virtualGraphMode == VirtualGraphMode.Auto:
            auto = ir_view.auto_virtual_graphs(self._ir_request())
        self._placement = placement.plan(self._model, self._options, self._device, auto)
        spec = self._device.spec
        self._random = RandomState(
            rng_state_size(spec.num_ipus, spec.tiles_per_ipu, 6), self._device
        )
        self._spec = self._program_spec()
        self._program: LoopProgram | None = None
        self._prepared = False
        self._engine_loaded = False
        self._weights_from_host_called = False
        self._host_weights_in_sync = False
        self._loaded_executable: str | None = None
        #: The engine cache's decisions for this program (`engine_cache`), when it had them.
        self._cached_program: CompiledProgram | None = None
        self._facts = reports.ProgramFacts(
            session_name=self._name,
            device=str(self._device),
            batches_per_step=self._data_flow.batchesPerStep(),
            replication_factor=self.replicationFactor,
            anchors={plan.tensor_id: repr(plan.art) for plan in self._anchors},
        )

    # -- construction ------------------------------------------------------------------------

    def _check_options(self) -> None:
        option_rules.check_options(
            self._options,
            self._device,
            self._data_flow,
            self._model,
            self._training,
            self._loss_for_rules(),
        )

        self._patterns.ensureMandatoryPatternsEnabled()

    def _loss_for_rules(self) -> str | None:
        """The loss the option rules see (a training session's; its pipeline has backward
        stages)."""
        return None

    def _after_lowering(self) -> None:
        """What a kind of session plans once the model is lowered (training: the loss, the
        trained weights and their optimizer state)."""

    def _plan_inputs(self) -> list[InputPlan]:
        broadcast = self._broadcast_inputs()
        return [
            InputPlan(
                tensor_id,
                info,
                self._data_flow.batchesPerStep(),
                self.replicationFactor,
                tensor_id in broadcast,
                self.accumulationFactor,
            )
            for tensor_id, info in self._input_signatures.items()
        ]

    def _broadcast_inputs(self) -> set[str]:
        """Inputs the builder marked `ReplicatedStreamMode.Broadcast` (model metadata)."""
        broadcast = set()
        prefix = annotation_names.INPUT_SETTINGS_PREFIX
        for entry in self._model.metadata_props:
            if entry.key.startswith(prefix):
                settings = json.loads(entry.value or "{}")
                if settings.get("replicatedStreamMode") == "Broadcast":
                    broadcast.add(entry.key[len(prefix) :])
        return broadcast

    def _plan_anchors(self) -> list[AnchorPlan]:
        anchor_ids = self._data_flow.anchors()
        if not anchor_ids and not self._training:
            raise popart_exception("User must specify an anchor tensor when doing inference.")
        infos = self._anchor_signatures(anchor_ids)
        return [
            AnchorPlan(
                tensor_id,
                self._data_flow.art(tensor_id),
                infos[tensor_id],
                self._data_flow.batchesPerStep(),
                self.accumulationFactor,
                self.replicationFactor,
            )
            for tensor_id in anchor_ids
        ]

    def _anchor_signatures(self, anchor_ids: list[str]) -> dict[str, TensorSignature]:
        known = self._lowered.tensor_names()
        for tensor_id in anchor_ids:
            if tensor_id not in known:
                raise popart_exception(self._unknown_anchor(tensor_id, known))
        return self._types.resolve(anchor_ids)

    def _unknown_anchor(self, tensor_id: str, known: list[str]) -> str:
        if tensor_id.startswith(reserved_names.reservedGradientPrefix()) and not self._training:
            return (
                f"Anchor tensor '{tensor_id}' is a gradient: only a TrainingSession computes "
                "gradients"
            )
        close = difflib.get_close_matches(tensor_id, known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"Anchor tensor '{tensor_id}' is not a tensor of the model.{hint}"

    # -- properties ----------------------------------------------------------------------

    @property
    def dataFlow(self) -> DataFlow:  # noqa: N802 - the original's names
        return copy.deepcopy(self._data_flow)

    @property
    def replicationFactor(self) -> int:  # noqa: N802
        return self._options.getReplicationFactor()

    @property
    def accumulationFactor(self) -> int:  # noqa: N802
        return self._options.getAccumulationFactor()

    # -- preparing the device ----------------------------------------------------------------

    def prepareDevice(self, loadEngine: bool = True, err: Any = None) -> None:  # noqa: N802, N803
        """Puts the weights on the device and compiles the program."""
        check_instance(loadEngine, bool, "prepareDevice loadEngine")
        if self._prepared:
            return
        memory_budget.check_fits(self._inputs, self._anchors, memory_budget.host_memory_bytes())
        option_rules.check_virtual_graph_range(self._options, self._device, self._model)
        check_engine_option_names(self._options.engineOptions)
        if self._options.compileEngine:
            self._place_variables()
            cache_entry = self._engine_cache_entry()
            if cache_entry is not None:
                self._cached_program = engine_cache.load(cache_entry, self._fingerprint())
            cached = self._cached_program
            if cached is not None and cached.executor is not CompileMode.ONNX_RUNTIME:
                self._spec = dataclasses.replace(self._spec, compile_mode=cached.executor)
            check_poplar_types(self._model.graph, self._types.dtype)
            self._program = self._build_program()
            self._compile()
            _devicex_logger.info("Graph compiled")  # willow/src/popx/irlowering.cpp
            compiled = self._compiled_program()
            if cache_entry is not None and cached is None and compiled is not None:
                engine_cache.store(cache_entry, self._fingerprint(), self._name, compiled)
            if self._can_execute():
                self._device.ensure_attached_for("run the session")
        self._prepared = True
        if loadEngine and self._program is not None:
            self._mark_engine_loaded()

    def _mark_engine_loaded(self) -> None:
        if not self._engine_loaded:
            _devicex_logger.info("Engine loaded")  # willow/src/popx/devicex.cpp
        self._engine_loaded = True

    def _engine_cache_entry(self) -> str | None:
        """The engine cache entry of this program (`enableEngineCaching`), or None."""
        if not self._options.enableEngineCaching:
            return None
        return engine_cache.entry_path(
            self._options.cachePath, self._fingerprint(), device=str(self._device)
        )

    def _compiled_program(self) -> CompiledProgram | None:
        """The decisions of the program that runs the session (None before compiling)."""
        return self._program.compiled if self._program is not None else None

    def _place_variables(self) -> None:
        """Creates the device's variables (each replica has its copy: see `replicas.py`)."""
        self._weights.place_on(self._device.host_device())
        self._random.place_on(self._device.host_device())

    def _built_program(self) -> LoopProgram:
        if self._program is None:
            raise popart_exception(f"{self._name}: the program is not built (prepareDevice)")
        return self._program

    def _build_program(self) -> LoopProgram:
        return build_program(self._spec, self._weights.program_values, self._random)

    def _program_spec(self) -> SessionProgramSpec:
        return SessionProgramSpec(
            lowered=self._lowered,
            inputs=self._inputs,
            anchors=self._anchors,
            batches_per_step=self._data_flow.batchesPerStep(),
            synthetic_data=self._options.syntheticDataMode,
            host_device=self._device.host_device(),
            ipu_ordinal=self._device.ipu_ordinal(),
            replicas=self.replicationFactor,
            compile_mode=self._compile_mode(),
            name=self._name,
            placement=self._placement,
            chip=device_chip.chip_options(self._device, self._options, self._variable_locations()),
            stochastic_rounding=self._half_tensors(),
        )

    def _half_tensors(self) -> tuple[tuple[str, bool], ...] | None:
        """With stochastic rounding: whether each tensor whose type inference knows is
        float16 (the program rounds those; see `lowering/stochastic_rounding.py`)."""
        if not self._options.enableStochasticRounding:
            return None
        known = self._types.inferred()
        return tuple((name, known[name].dtype == tf.float16) for name in sorted(known))

    def _variable_locations(self) -> dict[str, tensor_locations.ResolvedLocation]:
        """Where the session's variables live (on or off chip, sharded or not), by the
        tensor location settings (see `tensor_locations`)."""
        names = [*self._weights.weight_ids, *self._weights.state_ids]
        elements = {name: int(self._weights.host[name].size) for name in names}
        return tensor_locations.resolve(self._options, elements, self.replicationFactor)

    def _compile_mode(self) -> CompileMode | None:
        """The engine's choice (None): XLA, but a TensorFlow graph for models with convolutions.

        Measured on this CPU: with the channels-last lowering TensorFlow's oneDNN kernels fuse
        each convolution with its bias and activation, and XLA's CPU convolutions are 2-3x
        slower (`benchmarks/popart_inference.py`, the CNN: 31k images/s as a graph, 11k under
        XLA, on one core); a convolution's backward pass is slower still under XLA
        (`benchmarks/popart_training.py`, the CNN: about 800 samples/s under XLA against about
        4700 as a graph). Models without convolutions run faster under XLA (the MLP trains
        about 2x faster). Ops XLA cannot compile make the program a graph, and so does a
        failure to compile (see `_compile`); an Abort op too, whose check XLA would drop.
        """
        if self._lowered.has_op("Abort"):
            return CompileMode.GRAPH
        return None

    def _compile(self) -> None:
        """Traces and compiles the program with a first run on zeros (not seen by the user).

        A program XLA cannot compile (a shape that depends on a streamed value) is rebuilt to
        run as a TensorFlow graph, as the engine does for ops XLA has no kernel for.
        """
        seed = self._random.seed
        try:
            with self._floating_point_checks():
                self._warm_up()
        except out_of_memory.OutOfMemoryError as error:
            # prepareDevice's documented error (python/popart/python_files/session.py).
            estimate = error.estimate
            raise OutOfMemoryException(
                error.message.removeprefix(out_of_memory.PREFIX),
                summary_report=estimate.summary() if estimate is not None else "",
            ) from None
        except tf.errors.OpError as error:
            if self._built_program().compiled_mode is not CompileMode.XLA:
                # Zeros are not valid data for every model: the first real run will tell.
                logger.debug("Compiling %s on zeros failed: %s", self._name, error.message)
            else:
                logger.info("XLA cannot compile %s (%s): it runs as a TensorFlow graph",
                            self._name, error.message.splitlines()[0])  # fmt: skip
                self._spec = dataclasses.replace(self._spec, compile_mode=CompileMode.GRAPH)
                self._program = self._build_program()
                with contextlib.suppress(tf.errors.OpError), self._floating_point_checks():
                    self._warm_up()
        finally:
            self._random.seed = seed
        self._facts.compile_mode = self._compiled_mode_name()

    def _warm_up(self) -> None:
        try:
            self._built_program()(self._zero_inputs())
        except tf.errors.InvalidArgumentError as error:
            # An Abort op ends a run on zeros too; the program is compiled all the same.
            if ABORT_MESSAGE not in error.message:
                raise

    def _floating_point_checks(self) -> contextlib.AbstractContextManager[None]:
        """`enableFloatingPointChecks`: traps on invalid operations, divisions by zero and
        overflows, on IPU devices only (popx/irlowering.cpp `setFloatingPointBehaviour`)."""
        if not self._options.enableFloatingPointChecks:
            return contextlib.nullcontext()
        if self._device.type is not DeviceType.Ipu:
            if not self._warned_floating_point_checks:
                logger.warning("Floating point checks cannot be enabled for non IPU devices")
                self._warned_floating_point_checks = True
            return contextlib.nullcontext()
        # Poplar's FloatingPointBehaviour(inv, div0, oflo, esr=false, nanoo).
        return floating_point_checks.requesting(floating_point_checks.ALL_BITS)

    def _zero_inputs(self) -> dict[str, tf.Tensor]:
        if self._options.syntheticDataMode is not SyntheticDataMode.Off:
            return {}
        return {
            plan.tensor_id: tf.zeros(plan.program_shape, plan.signature.dtype)
            for plan in self._inputs
        }

    def _compiled_mode_name(self) -> str:
        compiled = self._program.compiled if self._program is not None else None
        return compiled.describe() if compiled is not None else "not compiled yet"

    def _can_execute(self) -> bool:
        return (
            self._device.type is not DeviceType.OfflineIpu
            and self._device.connectionType is not DeviceConnectionType.Never
        )

    def _require_prepared(self, what: str) -> None:
        if not self._prepared:
            raise popart_exception(f"{what} may only be called after prepareDevice()")

    def loadEngineAndConnectStreams(self) -> None:  # noqa: N802
        if not self._prepared:
            # willow/src/popx/devicex.cpp, loadEngineAndConnectStreams.
            raise popart_runtime_error(
                "Trying to load an engine but no compiled engine. Did you forget to call "
                "prepareDevice()?"
            )
        self._mark_engine_loaded()

    def setEngineIsLoaded(self, isLoaded: bool) -> None:  # noqa: N802, N803
        self._engine_loaded = check_instance(isLoaded, bool, "setEngineIsLoaded isLoaded")

    # -- running -------------------------------------------------------------------------

    def run(self, *args: Any, **kwargs: Any) -> None:
        """`run(stepio, debugName='')` or `run(programHandle, stepio, debugName='')`."""
        handle, stepio, debug_name = _run_arguments(args, kwargs)
        self._require_prepared("run")
        if not self._options.compileEngine:
            raise popart_exception(
                "SessionOptions.compileEngine is False: the graph was built but not compiled, "
                "so nothing can run or be transferred to the device"
            )
        self._device.ensure_attached_for("run the session")
        if handle not in (_MAIN_PROGRAM, _FORWARD_ONLY_PROGRAM) or (
            handle == _FORWARD_ONLY_PROGRAM
            and not self._options.createImplicitPipeliningFwdOnlyProgram
        ):
            raise popart_exception(
                f"Unknown program handle {handle!r}: this session has the main program ('')"
            )
        check_instance(stepio, StepIO, "run stepio (a PyStepIO or PyStepIOCallback)")
        logger.debug("run %s %s", self._name, debug_name)
        synthetic = self._options.syntheticDataMode is not SyntheticDataMode.Off
        self._check_can_run()
        bound = None if synthetic or handle != _MAIN_PROGRAM else self._bound_call(stepio)
        if bound is not None:
            # The same stepio's arrays as the last run: the program reads and writes them
            # in place (see _bound_call).
            bound()
            self._count_run(debug_name, same_program=True)
            return
        stacked = {} if synthetic else self._stacked_inputs(stepio)
        if self._options.enableStochasticRounding:
            self._random.start_rounding()
        try:
            with self._floating_point_checks():
                program = (
                    self._forward_only_program()
                    if handle == _FORWARD_ONLY_PROGRAM
                    else self._program_to_run()
                )
                outputs = program(stacked)
        except tf.errors.OpError as error:
            if ABORT_MESSAGE in error.message:
                # An Abort op ended the run: Poplar's abort program fails the engine's run.
                message = error.message[error.message.index(ABORT_MESSAGE) :]
                raise poplar_runtime_error(message.splitlines()[0]) from None
            if floating_point_checks.TRAPPED not in error.message:
                raise
            # Poplar's error, as popart.cpp registers it for Python.
            raise poplar_application_runtime_error(
                floating_point_checks.trap_message(error.message)
            ) from None
        self._count_run(debug_name)
        if not synthetic:
            values = self._anchor_values(outputs)
            stepio.write_anchors(self._anchors, values)
            if handle == _MAIN_PROGRAM:
                self._bind_for_next_runs(program, stacked, stepio, outputs or {})

    def _count_run(self, debug_name: str, *, same_program: bool = False) -> None:
        """The report's facts of a run (`same_program`: the last run's, already described)."""
        self._facts.runs += 1
        self._facts.run_names.append(debug_name)
        if not same_program:
            self._facts.compile_mode = self._compiled_mode_name()
        self._mark_engine_loaded()

    def _bound_call(self, stepio: StepIO) -> Callable[[], None] | None:
        """A run of the main program bound to `stepio`'s arrays, when the session made one
        after an earlier run with it (inference on onnxruntime): the program reads the
        inputs and writes the anchors in place, with nothing else to do per run."""
        return None

    def _bind_for_next_runs(
        self, program: object, stacked: dict[str, Any], stepio: StepIO, outputs: dict[str, Any]
    ) -> None:
        """After a run of the main program: prepares `_bound_call` where the session can."""

    def _program_to_run(self) -> Callable[[dict[str, Any]], Any]:
        """The compiled program a run calls (inference may swap executors: see there)."""
        return self._built_program()

    def _forward_only_program(self) -> Callable[[dict[str, Any]], Any]:
        """`createImplicitPipeliningFwdOnlyProgram`'s program (a training session's)."""
        return self._program_to_run()

    def _stacked_inputs(self, stepio: StepIO) -> dict[str, tf.Tensor]:
        arrays = stepio.read_inputs(self._inputs)
        return {
            plan.tensor_id: host_arrays.to_tensor(
                plan.program_values(arrays[plan.tensor_id]), plan.signature.dtype
            )
            for plan in self._inputs
        }

    def _check_can_run(self) -> None:
        """What else a run needs (training sessions: weights on the device)."""

    def _anchor_values(self, outputs: dict[str, tf.Tensor] | None) -> dict[str, np.ndarray]:
        outputs = outputs or {}
        # Every micro-batch's values come back, or the last one's when all anchors are Final.
        if self._spec.returns_last_batch_only:
            steps = [1, 1, self.replicationFactor]
        else:
            steps = [self._data_flow.batchesPerStep(), self.accumulationFactor,
                     self.replicationFactor]  # fmt: skip
        values = {}
        for plan in self._anchors:
            if plan.tensor_id not in outputs:  # no elements: nothing came from the device
                values[plan.tensor_id] = plan.from_steps(
                    np.zeros([*steps, *plan.signature.shape], plan.dtype)
                )
                continue
            # A view of the tensor's buffer (`.numpy()` would copy it): the values are copied
            # once, into the anchor arrays.
            value = np.asarray(outputs[plan.tensor_id]).astype(plan.dtype, copy=False)
            # Outfeeds stack the steps (unless only the last came back), then the replicas.
            leading = (0 if self._spec.returns_last_batch_only else 1) + (steps[2] > 1)
            per_step = value.shape[leading:]
            if per_step != plan.signature.shape or not _same_kind(value, plan):
                raise popart_exception(
                    f"Anchor '{plan.tensor_id}' came back as {value.dtype} {list(per_step)}, "
                    f"but its type is {plan.signature} (the model's declared output type does "
                    "not match what its ops compute)"
                )
            values[plan.tensor_id] = plan.from_steps(value.reshape([*steps, *plan.signature.shape]))
        return values

    def initAnchorArrays(self) -> dict[str, np.ndarray]:  # noqa: N802
        """One empty array per anchor, in its host shape and type."""
        return {plan.tensor_id: plan.empty_array() for plan in self._anchors}

    # -- weights -----------------------------------------------------------------------------

    def _device_weights_changed(self) -> None:
        """The host wrote the device's weights (a program holding them as constants rebuilds)."""

    def weightsFromHost(self) -> None:  # noqa: N802
        self._require_device_weights("weightsFromHost")
        self._weights.to_device()  # every replica's copy (see `replicas.py`)
        self._device_weights_changed()
        self._weights_from_host_called = True
        self._host_weights_in_sync = False

    def weightsToHost(self) -> None:  # noqa: N802
        self._require_device_weights("weightsToHost")
        self._weights.from_device()
        self._host_weights_in_sync = True

    def readWeights(self, weightsIo: PyWeightsIO) -> None:  # noqa: N802, N803
        self._weights.read_into(check_instance(weightsIo, PyWeightsIO, "readWeights weightsIo"))

    def writeWeights(self, weightsIo: PyWeightsIO) -> None:  # noqa: N802, N803
        check_instance(weightsIo, PyWeightsIO, "writeWeights weightsIo")
        self._refuse_if_constant_weights("writeWeights")
        # It changes the host weights only (Session::writeWeights in willow/src/session.cpp):
        # no weightsFromHost, not even prepareDevice, needs to come first.
        self._weights.write_from(weightsIo)

    def resetHostWeights(  # noqa: N802
        self,
        modelProtoOrFilename: Any,  # noqa: N803
        ignoreWeightsInModelWithoutCorrespondingHostWeight: bool = False,  # noqa: N803
    ) -> None:
        self._refuse_if_constant_weights("resetHostWeights")
        model = read_model(modelProtoOrFilename).model
        # Only the model's initializers are read, whatever its ops (willow/src/popx/
        # executablex.cpp, Executablex::resetWeights).
        self._weights.reset_from_model(model, ignoreWeightsInModelWithoutCorrespondingHostWeight)

    def _refuse_if_constant_weights(self, what: str) -> None:
        if not self._training and self._options.constantWeights:
            # The original's words (willow/src/session.cpp; constant_weights_error_test).
            raise popart_exception(
                f"Cannot call {what} when constantWeights is set. Set `constantWeights` to "
                "False in the `SessionOption`s when initialising the session to enable this "
                "behaviour."
            )

    def _require_device_weights(self, what: str) -> None:
        self._require_prepared(what)
        if not self._options.compileEngine:
            raise popart_exception(
                f"{what}: SessionOptions.compileEngine is False, so nothing can be transferred"
            )

    def modelToHost(self, fn: str) -> None:  # noqa: N802
        """Writes the model with the device's current weights to an ONNX file."""
        if not self._prepared:
            # It reads the weights from the device (willow/src/popx/devicex.cpp, weightsToHost).
            raise popart_runtime_error(
                "Devicex::prepare() must be called before Devicex::weightsToHost(const "
                "std::map<TensorId, MutableVoidData> &) is called."
            )
        weights = self._weights.current()
        model = model_writer.model_with_weights(self._model, weights, self._extra_initializers())
        model_writer.write_model(os.fspath(fn), model, self._external)
        # The host weights become the written ones, as after resetHostWeights: a later
        # weightsFromHost carries on from them (willow/src/session.cpp, modelToHost;
        # train_then_infer_test, test_modelToHost_calls_resetHostWeights).
        host = self._weights.host
        host.update({name: np.array(weights[name], copy=True) for name in host if name in weights})

    def _extra_initializers(self) -> dict[str, np.ndarray]:
        """Tensors a model file gets beside the model's own (training: optimizer state)."""
        return {}

    def updateExternallySavedTensorLocations(self, fromLocation: str, toLocation: str) -> None:  # noqa: N802, N803
        """Moves the data of the tensors saved in `fromLocation` to the new file `toLocation`:
        the file's data, back to back, for modelToHost to write there from then on (willow/src/
        session.cpp, updateExternallySavedTensorLocations: its checks, order and words)."""
        moving = f"Updating externally saved tensor location from file '{fromLocation}' to file "
        if os.path.exists(toLocation):
            raise popart_exception(
                f"{moving}'{toLocation}', but file '{toLocation}' already exists"
            )
        if not os.path.exists(fromLocation):
            raise popart_exception(
                f"{moving}'{toLocation}', but file '{fromLocation}' does not exist"
            )
        moved = [name for name, entry in self._external.items() if entry.location == fromLocation]
        if not moved:
            raise popart_exception(
                f"No ONNX model initializers have external location set to '{fromLocation}'"
            )
        data = [(name, read_entry(self._external[name])) for name in moved]
        self._external.update(write_back_to_back(toLocation, data))

    # -- host weights sync flags -------------------------------------------------------------

    def areHostWeightsInSync(self) -> bool:  # noqa: N802
        return self._host_weights_in_sync

    def markHostWeightsInSync(self) -> None:  # noqa: N802
        self._host_weights_in_sync = True

    def markHostWeightsOutOfSync(self) -> None:  # noqa: N802
        self._host_weights_in_sync = False

    def copyDeviceWeightsToHost(self) -> None:  # noqa: N802
        """Device -> host stream buffers -> host tensor data (skipped when already in sync)."""
        self._require_device_weights("copyDeviceWeightsToHost")
        if not self._host_weights_in_sync:
            self._weights.from_device()
        self._weights.host.update({name: v.numpy() for name, v in self._weights.device.items()})
        self._host_weights_in_sync = True

    # -- tensors -------------------------------------------------------------------------

    def getInfo(self, tensorId: str) -> TensorInfo:  # noqa: N802, N803
        if tensorId not in self._tensor_names():
            raise popart_exception(f"No tensor '{tensorId}' in the session's graph")
        return self._tensor_signature(tensorId).tensor_info()

    def getAllTensorIds(self) -> set[str]:  # noqa: N802
        self._require_prepared("getAllTensorIds")
        return set(self._tensor_names())

    def getTensorIds(self) -> set[str]:  # noqa: N802
        self._require_prepared("getTensorIds")
        return set(self._tensor_names())

    def _tensor_names(self) -> list[str]:
        """The session's tensors: the model's (training sessions add their own)."""
        return self._lowered.tensor_names()

    def _tensor_signature(self, tensor_id: str) -> TensorSignature:
        return self._types.get(tensor_id)

    def getIr(self) -> Ir:  # noqa: N802
        return Ir(
            copy.deepcopy(self._model),
            copy.deepcopy(self._data_flow),
            copy.deepcopy(self._options),
            copy.deepcopy(self._shape_info),
            copy.deepcopy(self._patterns),
            tuple(self._tensor_names()),
        )

    def _serializeIr(self, format: IrSerializationFormat) -> str:  # noqa: A002, N802
        """The ops the original's IR would hold, as its JSON (see `ir_view` for the limits)."""
        check_instance(format, IrSerializationFormat, "_serializeIr format")
        return ir_view.serialise(self._ir_request())

    def _ir_request(self) -> ir_view.IrRequest:
        signatures = {**self._types.inferred(), **self._input_signatures}
        return ir_view.IrRequest(
            model=self._model,
            tensors=ir_view.tensor_records(signatures),
            anchors=set(self._data_flow.anchors()),
            enabled_patterns=set(self._patterns.enabledPatterns()),
            constant_weights=bool(self._options.constantWeights),
            outlining=bool(self._options.enableOutlining),
            outline_threshold=float(self._options.outlineThreshold),
            explicit_recomputation=bool(self._options.explicitRecomputation),
            pipeline_recomputation=bool(self._options.enablePipelining)
            and self._options.autoRecomputation == RecomputationType.Pipeline,
            loss=self._ir_loss(),
            training=self._ir_training(),
            placement=self._ir_placement(),
            host_copy_ops=bool(self._options.useHostCopyOps),
            host_copy_priority=self._host_copy_priority(),
            off_chip=self._ir_off_chip(),
        )

    def _ir_placement(self) -> ir_view.Placement:
        options = self._options
        replicas = self.replicationFactor
        return ir_view.Placement(
            virtual_graphs=options.virtualGraphMode != VirtualGraphMode.Off,
            auto_virtual_graphs=options.virtualGraphMode == VirtualGraphMode.Auto,
            num_ipus=max(1, self._device.spec.num_ipus // max(1, replicas)),
            split_ratios=tuple(options.virtualGraphSplitRatios),
            accumulating=bool(options.enableGradientAccumulation),
            pipelining=bool(options.enablePipelining),
        )

    def _host_copy_priority(self) -> float:
        """The lowest priority unless batch serialisation, execution phases or explicit
        recomputation or main loops order the host copies (willow/src/transforms/hostiosetup.cpp)."""
        options = self._options
        phased = options.virtualGraphMode == VirtualGraphMode.ExecutionPhases
        if (
            options.batchSerializationSettings.factor < 2
            and (options.executionPhaseSettings.phases if phased else 0) < 2
            and not options.explicitRecomputation
            and not options.enableExplicitMainLoops
        ):
            return float("-inf")
        return 0.0

    def _ir_off_chip(self) -> set[str]:
        """The variables the tensor location settings keep in streaming memory."""
        if not hasattr(self, "_weights"):
            return set()
        return {name for name, where in self._variable_locations().items() if where.off_chip}

    def _ir_training(self) -> ir_view.IrTraining | None:
        """What a training session's IR adds (training sessions)."""
        return None

    def _write_dot_files(self) -> None:
        """The IR's .dot files, if `dotChecks` or POPART_DOT_CHECKS ask for any."""
        checks = ir_view.dot.requested_checks(self._options.dotChecks)
        if not checks:
            return
        options = self._options
        settings = ir_view.dot.DotSettings(
            checks=checks,
            log_dir=str(options.logDir),
            separate_graphs=bool(options.separateCallOpPdfs),
            first_op=int(options.firstDotOp),
            final_op=int(options.finalDotOp),
            op_names=bool(options.dotOpNames),
        )
        ir_view.write_dot_files(self._ir_request(), settings)

    def _ir_loss(self) -> str | None:
        """The loss tensor the IR's backward pass starts from (training sessions)."""
        return None

    def checkInplacingAmbiguity(self) -> None:  # noqa: N802
        """Nothing is done in place on an emulated IPU, so nothing is ambiguous."""

    def updateEngineCache(self) -> None:  # noqa: N802
        """There is no Poplar engine cache to refresh."""

    # -- random state ----------------------------------------------------------------------

    def _requires_random_seed(self) -> bool:
        """Whether the program draws random numbers: a random op, or stochastic rounding
        (willow/src/transforms/randomsetup.cpp, requiresRandomSeed)."""
        if self._options.enableStochasticRounding:
            return True
        return any(
            node.op_type in _RANDOM_OP_TYPES
            for graph in iter_graphs(self._model.graph)
            for node in graph.node
        )

    def getRandomSeed(self) -> int:  # noqa: N802
        if not self._requires_random_seed():
            # willow/src/session.cpp: a session without randomness has no seed to read.
            _logger.warning(
                "Trying to get the random seed, but this session has no random behaviour. "
                "Doing nothing."
            )
            return 0
        return self._random.seed

    def setRandomSeed(self, seedValue: int) -> None:  # noqa: N802, N803
        if not self._requires_random_seed():
            # willow/src/session.cpp: nothing to seed, before or after prepareDevice.
            _logger.warning(
                "Trying to set the random seed, but this session has no random behaviour. "
                "Doing nothing."
            )
            return
        if not self._prepared:
            # The seed lives on the device (willow/src/popx/devicex.cpp, setRandomSeedFromHost).
            raise popart_runtime_error(
                "Devicex::prepare() must be called before "
                "Devicex::setRandomSeedFromHost(uint64_t) is called."
            )
        self._random.seed = seedValue  # every replica's copy (see `replicas.py`)

    def getRNGState(self) -> list[int]:  # noqa: N802
        self._require_rng_state("getRNGState")
        if self._options.syntheticDataMode is not SyntheticDataMode.Off:
            # With synthetic data no RNG state streams to the host: it reads as empty
            # (willow/src/popx/devicex.cpp, getRngStateToHost; session_api_tests/rng_test.py).
            return []
        return self._random.rng_state

    def setRNGState(self, rngValue: list[int]) -> None:  # noqa: N802, N803
        self._require_rng_state("setRNGState")
        self._random.rng_state = rngValue

    def _require_rng_state(self, what: str) -> None:
        if not self._options.enableLoadAndOffloadRNGState:
            raise popart_exception(
                f"{what} needs SessionOptions.enableLoadAndOffloadRNGState = True"
            )
        self._require_prepared(what)

    def getCycleCount(self, id: str = "") -> int:  # noqa: A002, N802 - the original's names
        """The cycles of the last run on the modelled chip (the cost model's estimate).

        As the original (session.cpp, devicex.cpp): run first, with
        instrumentWithHardwareCycleCounter; the id "" is the whole program's counter.
        """
        if self._facts.runs == 0:
            raise popart_runtime_error("Must call run before getCycleCount.")
        if not self._options.instrumentWithHardwareCycleCounter:
            raise popart_runtime_error(
                "SessionOption 'instrumentWithHardwareCycleCounter' must be set to true in "
                "order to measure cycle count"
            )
        estimate = self._cost_estimate()
        counters = self._cycle_counters()
        if id not in counters or estimate is None:
            raise popart_runtime_error(
                f"Invalid id for cycle counter, '{id}'. Make sure you have set "
                "SessionOption::hardwareInstrumentations correctly."
            )
        # The outer counter times the whole call; an inner one the last iteration of the
        # batches-per-step loop (one step), as each IPU's first tile counts it.
        return estimate.cycles_per_call if counters[id] == "outer" else estimate.cycles.per_step

    def _cycle_counters(self) -> dict[str, str]:
        """The cycle counters the program has, by id (willow/src/popx/popprograms.cpp):
        "" with Instrumentation.Outer; with Instrumentation.Inner, outside implicit
        pipelining, "inner_ipu_<i>" for each IPU of a replica."""
        wanted = set(self._options.hardwareInstrumentations)
        counters = {"": "outer"} if Instrumentation.Outer in wanted else {}
        options = self._options  # willow/include/popart/sessionoptions.hpp
        implicit_pipelining = options.enablePipelining and not (
            options.useHostCopyOps and options.enableExplicitMainLoops
        )
        if Instrumentation.Inner in wanted and not implicit_pipelining:
            ipus = self._device.numIpus // max(self.replicationFactor, 1)
            counters.update({f"inner_ipu_{i}": "inner" for i in range(ipus)})
        return counters

    def _cost_estimate(self) -> CostEstimate | None:
        """The cost model's estimate of the compiled program on the device's chip."""
        if self._program is not None and self._program.compiled is None:
            # Not traced yet (the engine cache named onnxruntime): trace it now, as needed.
            with contextlib.suppress(tf.errors.OpError):
                self._warm_up()
        compiled = self._program.compiled if self._program is not None else None
        if compiled is None:
            return None
        chip = device_chip.chip_options(self._device, self._options)
        try:
            return compiled.cost(chip) if chip is not None else compiled.cost()
        except Exception as error:  # noqa: BLE001 - reports go on without the estimate
            logger.warning("%s: no cost estimate (%s)", self._name, error)
            return None

    # -- reports -------------------------------------------------------------------------

    def _require_engine_profile(self) -> None:
        """The checks before a report (willow/src/popx/devicex.cpp, doProfileChecks): a
        compiled engine; then Poplar's, the CPU target keeps no profile."""
        if not self._prepared or self._program is None:
            raise popart_runtime_error(
                "Session must have been prepared before a report can be fetched"
            )

    def _require_device_profile(self) -> None:
        if self._device.type is DeviceType.Cpu:
            raise poplar_exception("Profiling is disabled for current device type.")

    def getSummaryReport(self, resetProfile: bool = True) -> str:  # noqa: N802, N803
        self._require_engine_profile()
        self._require_device_profile()
        report = reports.summary_report(self._model, self._facts, self._cost_estimate())
        if resetProfile:
            self._facts.runs = 0
            self._facts.run_names.clear()
        return report

    def getSerializedGraph(self) -> bytes:  # noqa: N802
        self._require_engine_profile()
        return reports.serialized_graph(self._model, self._facts, self._placement)

    def getReport(self) -> reports.Report:  # noqa: N802
        self._require_engine_profile()
        self._require_device_profile()
        return reports.Report(
            reports.summary_report(self._model, self._facts, self._cost_estimate()),
            self.getSerializedGraph(),
            self._report_target(),
            self._facts.run_names,
        )

    def _report_target(self) -> reports.Target:
        version = self._device.version if self._device.version in chip_figures.VERSIONS else "ipu2"
        figures = chip_figures.chip(version, int(self._device.tilesPerIPU or 0))
        return reports.Target(
            reports.Architecture(version), self._device.numIpus, figures.tiles,
            figures.bytes_per_tile,
        )  # fmt: skip

    # -- executables ---------------------------------------------------------------------

    def _fingerprint(self) -> str:
        return executable_file.model_fingerprint(
            self._model,
            {
                "batchesPerStep": self._data_flow.batchesPerStep(),
                "anchors": [(p.tensor_id, repr(p.art)) for p in self._anchors],
                "inputs": [(p.tensor_id, str(p.signature)) for p in self._inputs],
                "replicationFactor": self.replicationFactor,
                "syntheticDataMode": self._options.syntheticDataMode.name,
                "options": option_fingerprint.options_fingerprint(self._options),
                **self._fingerprint_settings(),
            },
        )

    def _fingerprint_settings(self) -> dict[str, Any]:
        """What else the program depends on (training: the loss, optimizer, accumulation)."""
        return {}

    def compileAndExport(self, filename: str, err: Any = None) -> None:  # noqa: N802
        """Writes an executable that `loadExecutable` of a session of the same model reads."""
        path = executable_file.resolve_path(filename, executable_file.EXECUTABLE_FILE_NAME)
        self._write_executable(path, with_model=True, with_variables=True)

    def saveExecutable(  # noqa: N802
        self,
        path: str,
        savePopartMetadata: bool = True,  # noqa: N803
        saveVariables: bool = True,  # noqa: N803
    ) -> None:
        self._require_prepared("saveExecutable")
        target = executable_file.resolve_path(path, executable_file.EXECUTABLE_FILE_NAME)
        self._write_executable(target, with_model=savePopartMetadata, with_variables=saveVariables)

    def saveVariables(self, path: str) -> None:  # noqa: N802
        self._require_prepared("saveVariables")
        target = executable_file.resolve_path(path, executable_file.VARIABLES_FILE_NAME)
        artifact = executable_file.SessionArtifact(
            "variables", self._fingerprint(), self._name, variables=self._weight_values()
        )
        executable_file.write_artifact(target, artifact)

    def _weight_values(self) -> dict[str, np.ndarray]:
        current = self._weights.current()
        return {
            name: current[name] for name in [*self._weights.weight_ids, *self._weights.state_ids]
        }

    def _write_executable(self, path: str, with_model: bool, with_variables: bool) -> None:
        model = None
        if with_model:
            model = model_writer.model_with_weights(self._model, self._weights.current())
        artifact = executable_file.SessionArtifact(
            "executable",
            self._fingerprint(),
            self._name,
            model=None if model is None else model.SerializeToString(),
            variables=self._weight_values() if with_variables else {},
            program=self._compiled_program(),
        )
        executable_file.write_artifact(path, artifact)

    def loadExecutable(self, *args: Any, **kwargs: Any) -> None:  # noqa: N802
        """Uses an executable written for this model; call it before prepareDevice."""
        # The binding takes `const std::string &filename` (python/popart/popart_core/
        # popart.cpp): another type is pybind11's TypeError before anything else is checked.
        _, values = bind(
            "loadExecutable", [Signature((Arg("filename", STR),))], args, kwargs,
            owner=f"popart_core.{'_Training' if self._training else '_Inference'}SessionCore",
        )  # fmt: skip
        filename: str = values["filename"]
        # Session::loadExecutableFromFile (willow/src/session.cpp): "Could not open file" first.
        artifact = executable_file.read_artifact(filename)
        if self._prepared:
            raise popart_exception("loadExecutable must be called before prepareDevice()")
        if artifact.kind != "executable":
            raise popart_exception(
                f"{filename} holds {artifact.kind} (saveVariables), not an executable"
            )
        if artifact.fingerprint != self._fingerprint():
            raise popart_exception(
                f"The executable in {filename} was compiled for another model or other settings "
                f"(session '{artifact.name}'), not for this session"
            )
        if artifact.variables:
            self._weights.restore(artifact.variables)
        self._loaded_executable = os.fspath(filename)
        # The executable's compile decisions: prepareDevice builds that executor only.
        self._cached_program = artifact.program


def _same_kind(value: np.ndarray, plan: AnchorPlan) -> bool:
    if plan.dtype == np.dtype(object):
        return value.dtype.kind in "OSU"
    return value.dtype == plan.dtype


def _run_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any, str]:
    """(programHandle, stepio, debugName) from either `run` overload."""
    if args and isinstance(args[0], str):
        handle, rest = args[0], list(args[1:])
    else:
        handle, rest = kwargs.pop("programHandle", _MAIN_PROGRAM), list(args)
    stepio = rest.pop(0) if rest else kwargs.pop("stepio", None)
    debug_name = rest.pop(0) if rest else kwargs.pop("debugName", "")
    if rest or kwargs:
        raise TypeError(f"run() got unexpected arguments {rest or sorted(kwargs)}")
    if stepio is None:  # no overload of the original's run takes that: pybind11's TypeError
        raise incompatible_arguments(
            "run",
            ["(self, stepio: IStepIO, debugName: str = '')",
             "(self, programHandle: str, stepio: IStepIO, debugName: str = '')"],
            list(args),
            "run needs a step IO: session.run(popart.PyStepIO(inputs, anchors))",
        )  # fmt: skip
    return handle, stepio, check_instance(debug_name, str, "run debugName")
