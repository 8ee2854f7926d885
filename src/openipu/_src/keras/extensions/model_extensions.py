"""The IPU methods that Keras models gain inside an IPUStrategy scope (keras-extensions.md).

`fit`, `evaluate` and `predict` keep Keras' own loops (callbacks, progress bar,
History, validation), but the data arrives in whole executions
(`data_handler.IPUDataHandler`) and each execution runs as one engine program
(`execution.ExecutionFunction`). The other methods set the options of the
original API; the options the engine does not need for its numbers (queue
depths, schedules, recomputation, ...) are validated and kept.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import tensorflow as tf
from tf_keras.src.engine import sequential
from tf_keras.src.utils import tf_utils

from openipu._src.config import poplar_flags
from openipu._src.engine.gradient_accumulation import (
    AccumulatorStore,
    GradientAccumulationReductionMethod,
)
from openipu._src.engine.outfeed_queue import IPUOutfeedQueue
from openipu._src.feeds import infeed
from openipu._src.int_like import plain_int
from openipu._src.integration import keras_internals
from openipu._src.keras.extensions import (
    data_handler,
    optimizer_checks,
    overrides,
    pipeline_stages,
)
from openipu._src.keras.extensions.execution import ExecutionFunction
from openipu._src.keras.extensions.gradient_accumulation import AccumulatingOptimizer
from openipu._src.keras.extensions.replicated_metrics import ReplicatedMetricReductionMethod
from openipu._src.pipelining import pipeline_options
from openipu._src.serving import keras_export
from openipu._src.system import configure

if TYPE_CHECKING:
    from tf_keras import Model as _KerasModel
else:
    _KerasModel = object  # the Keras model classes this is mixed into

#: The key under which earlier openipu versions saved a model's IPU options.
LEGACY_SAVED_OPTIONS_KEY = "ipu_options"


#: The keyword arguments of the optimizer wrapper gradient accumulation uses (the original's
#: GradientAccumulationOptimizerV2; `dtype` is taken apart).
_ACCUMULATION_OPTIMIZER_ARGUMENTS = frozenset(
    {"offload_weight_update_variables", "replicated_optimizer_state_sharding", "name", "dtype"}
)


def _check_accumulation_optimizer_kwargs(kwargs: dict) -> None:
    """The original's refusals (extensions_base.py), then what building its optimizer
    wrapper with the other arguments would refuse (a TypeError)."""
    if "opt" in kwargs:
        raise ValueError(
            "Found `opt` key in `gradient_accumulation_optimizer_kwargs`. This is not "
            "supported as the optimizer which the model has been compiled with is "
            "automatically wrapped."
        )
    if "num_mini_batches" in kwargs:
        raise ValueError(
            "Found `num_mini_batches` key in `gradient_accumulation_optimizer_kwargs`. Set the "
            "`gradient_accumulation_steps_per_replica` argument to "
            "`set_gradient_accumulation_options` instead."
        )
    if "experimental_normalize_gradients" in kwargs:
        raise ValueError(
            "Found `experimental_normalize_gradients` argument to "
            "`set_gradient_accumulation_options`. This argument has now been removed, use "
            "`gradient_accumulation_reduction_method` instead."
        )
    unknown = sorted(set(kwargs) - _ACCUMULATION_OPTIMIZER_ARGUMENTS)
    if unknown:
        raise TypeError(
            "GradientAccumulationOptimizerV2.__init__() got an unexpected keyword argument "
            f"'{unknown[0]}'"
        )


def _accumulation_dtype(value):
    """An accumulation dtype as the original takes it: a dtype, or a callable giving the
    dtype of a variable's accumulator (its `gradient_accumulation_dtype`)."""
    if value is None or (callable(value) and not isinstance(value, tf.DType)):
        return value
    return tf.as_dtype(value)


class IPUModelState:
    """The IPU options of one model."""

    def __init__(self, device_ordinal: int) -> None:
        self.device_ordinal = device_ordinal
        self.gradient_accumulation_steps: int | None = None
        self.gradient_accumulation_reduction = GradientAccumulationReductionMethod.SUM
        self.gradient_accumulation_dtype: Any = None  # a DType or a callable (see above)
        self.gradient_accumulation_kwargs: dict = {}
        self.accumulator_store = AccumulatorStore("gradient_accumulation_counter")
        self.pipelining_steps: int | None = None
        self.pipelining_device_mapping: list[int] | None = None
        self.pipelining_accumulate_outfeed: bool | None = None
        self.pipelining_reduction = GradientAccumulationReductionMethod.SUM
        self.pipelining_kwargs: dict = {}
        #: The assignment set (or read from PipelineStage scopes); empty: not pipelined.
        self.pipeline_assignment: list = []
        #: The stages of the pipeline when the model declares them (the first API's
        #: PipelineSequential, whose empty stages pass their inputs on); None: up to the
        #: last stage a layer is assigned to, each of which needs a layer.
        self.pipeline_stage_count: int | None = None
        #: A Sequential model's assignment still matches its layers (none added or popped).
        self.assignment_valid = False
        #: A subclassed model's call traced as a graph (`pipeline_stages.TracedGraph`).
        self.traced_graph: pipeline_stages.TracedGraph | None = None
        self.infeed_options: dict = {}
        self.outfeed_options: dict = {}
        self.asynchronous_callbacks = False
        #: While fit/evaluate/predict run with asynchronous callbacks: the callback calls per
        #: step (one per replica, as the original's polling thread); else 0.
        self.step_callbacks = 0
        self.replicated_metric_reduction = ReplicatedMetricReductionMethod.NONE
        self.executing = False
        # The first API's state (api_v1): the constructor's accumulation count, and
        # whether the model is being built (the only time it may be called directly).
        self.first_api_accumulation = 1
        self.building = False
        self.step_batches = 1  # batches per Keras step (the first API's steps are updates)
        self.lock = threading.Lock()
        self.replacing = 0
        self.layer_replacement = False  # the pipelined first API's option, kept
        self.real_optimizer = None
        self.warned_batch_normalization = False


class KerasExtensions(_KerasModel):
    """Mixed into Keras model classes created in an IPUStrategy scope."""

    if TYPE_CHECKING:
        # Keras's, which this class makes ExecutionFunctions (make_*_function below).
        train_function: ExecutionFunction | None
        test_function: ExecutionFunction | None
        predict_function: ExecutionFunction | None

    #: fit/evaluate/predict count steps by the original's rules (`step_rules`).
    _ipu_original_step_rules = True

    @property
    def _ipu(self) -> IPUModelState:
        # Kept in the instance dict, past Keras' attribute tracking: options are not weights.
        state = self.__dict__.get("_ipu_state")
        if state is None:
            state = IPUModelState(self.__dict__.get("_ipu_device_ordinal", 0))
            self.__dict__["_ipu_state"] = state
        return state

    def compile(self, *args, **kwargs):
        # The original's Keras (2.6) makes a variable of `steps_per_execution` as given, so a
        # tensor (`dataset.cardinality()`) or a TF1 Dimension works there; this Keras compares
        # it with "auto" first, which a tensor cannot be.
        if "steps_per_execution" in kwargs:
            kwargs["steps_per_execution"] = plain_int(kwargs["steps_per_execution"])
        return super().compile(*args, **kwargs)

    # Gradient accumulation -------------------------------------------------------------------

    def set_gradient_accumulation_options(
        self,
        gradient_accumulation_steps_per_replica=None,
        gradient_accumulation_reduction_method="sum",
        use_v2_gradient_accumulation_optimizer=False,
        **gradient_accumulation_optimizer_kwargs,
    ) -> None:
        """Accumulate gradients over that many micro-batches per replica before each update."""
        # As the original's extensions_base.py `_set_gradient_accumulation_options_impl`:
        # a count given as None keeps the one set before; the optimizer's keyword arguments
        # replace those given before.
        steps = gradient_accumulation_steps_per_replica
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise ValueError(
                "Expected `gradient_accumulation_steps_per_replica` to be a positive integer, "
                f"but got {steps} instead."
            )
        reduction = GradientAccumulationReductionMethod.parse(
            gradient_accumulation_reduction_method, "gradient_accumulation_reduction_method"
        )
        kwargs = dict(gradient_accumulation_optimizer_kwargs)
        _check_accumulation_optimizer_kwargs(kwargs)
        dtype = kwargs.pop("dtype", None)
        if steps is not None:
            self._ipu.gradient_accumulation_steps = steps
        self._ipu.gradient_accumulation_reduction = reduction
        self._ipu.pipelining_reduction = reduction  # one method, as the original's
        self._ipu.gradient_accumulation_dtype = _accumulation_dtype(dtype)
        self._ipu.gradient_accumulation_kwargs = dict(
            kwargs,
            use_v2_gradient_accumulation_optimizer=bool(use_v2_gradient_accumulation_optimizer),
        )
        self._reset_execution_functions()

    # Pipelining ------------------------------------------------------------------------------

    def set_pipelining_options(
        self,
        gradient_accumulation_steps_per_replica=None,
        device_mapping=None,
        accumulate_outfeed=None,
        gradient_accumulation_reduction_method="sum",
        **pipelining_kwargs,
    ) -> None:
        """Options of a pipelined model: its pipeline depth, stage-to-IPU mapping and more.

        As the original's extensions_base.py `_set_pipelining_options_impl`: options given
        as None keep their value."""
        state = self._ipu
        # One reduction method for both kinds of accumulation, set by either options call.
        state.pipelining_reduction = GradientAccumulationReductionMethod.parse(
            gradient_accumulation_reduction_method, "gradient_accumulation_reduction_method"
        )
        state.gradient_accumulation_reduction = state.pipelining_reduction
        steps = gradient_accumulation_steps_per_replica
        if steps is not None:
            if not isinstance(steps, int) or steps < 1:
                raise ValueError(
                    "Expected `gradient_accumulation_steps_per_replica` to be a positive "
                    f"integer, but got {steps} instead."
                )
            state.pipelining_steps = steps
        if device_mapping is not None:
            if not isinstance(device_mapping, list) or not all(
                isinstance(d, int) for d in device_mapping
            ):
                raise ValueError("Expected `device_mapping` to be a list of integers.")
            state.pipelining_device_mapping = list(device_mapping)
        if accumulate_outfeed is not None:
            state.pipelining_accumulate_outfeed = bool(accumulate_outfeed)
        _check_pipelining_kwargs_keys(pipelining_kwargs)
        state.pipelining_kwargs = pipeline_options.check_keras_pipelining_kwargs(pipelining_kwargs)
        self._reset_execution_functions()

    def set_pipeline_stage_assignment(self, pipeline_stage_assignment) -> None:
        """Assigns every layer invocation to a pipeline stage (see the original's
        *_extensions.py: ints or records for a Sequential model, records otherwise)."""
        kind = pipeline_stages.kind_of(self)
        if kind == "sequential":
            pipeline_stage_assignment = pipeline_stages.sequential_assignment(
                self, pipeline_stage_assignment
            )
            self._ipu.assignment_valid = True
        else:
            if kind == "model" and self._ipu_traced_graph() is None:
                raise RuntimeError(
                    f"Cannot set pipeline stage assignments for model `{self.name}` which has "
                    "not been built yet. Please call `model.build()` first, or assign pipeline "
                    "stages in your graph definition using PipelineStage scopes."
                )
            pipeline_stages.check_assignment(self, pipeline_stage_assignment)
        self._ipu.pipeline_assignment = pipeline_stage_assignment
        self._ipu.pipeline_stage_count = None
        self._reset_execution_functions()

    def get_pipeline_stage_assignment(self) -> list:
        """A copy of the assignment set, else unassigned records of every layer invocation
        (nested models: a record holding theirs), in execution order."""
        if pipeline_stages.kind_of(self) == "model" and self._ipu_traced_graph() is None:
            raise RuntimeError(
                f"Cannot get pipeline stage assignments for model `{self.name}` which has not "
                "been built yet. Please call `model.build()` first."
            )
        if self._ipu.pipeline_assignment:
            return list(self._ipu.pipeline_assignment)
        return pipeline_stages.default_assignment(self)

    def reset_pipeline_stage_assignment(self) -> None:
        """The model is no longer pipelined."""
        self._ipu.pipeline_assignment = []
        self._ipu.assignment_valid = False
        self._ipu.pipeline_stage_count = None
        self._reset_execution_functions()

    def print_pipeline_stage_assignment_summary(self, line_length=None, print_fn=None) -> None:
        pipeline_stages.print_summary(
            self, self.get_pipeline_stage_assignment(), line_length, print_fn
        )

    def _is_pipelined(self) -> bool:
        if pipeline_stages.kind_of(self) == "model":
            self._ipu_traced_graph()
        return bool(self._ipu.pipeline_assignment)

    @property
    def _pipeline_stage_assignment_valid(self) -> bool:
        return self._ipu.assignment_valid

    def _pipeline_records(self) -> list | None:
        """The layer records (nested models' in place) if the model is pipelined, else None."""
        if pipeline_stages.kind_of(self) == "model" and pipeline_stages.uses_stage_scopes(self):
            self._ipu_traced_graph(quiet=True)
        if not self._ipu.pipeline_assignment:
            return None
        records = pipeline_stages.flatten(self._ipu.pipeline_assignment)
        declared = self._ipu.pipeline_stage_count is not None
        if not declared and all(r.pipeline_stage is not None for r in records):
            pipeline_stages.check_no_empty_stage(records)
        return records

    def _ipu_traced_graph(self, quiet: bool = False) -> pipeline_stages.TracedGraph | None:
        """A built subclassed model's call as a graph (traced once per build); its
        PipelineStage scopes give its assignment if none was set (as the original's
        model_extensions.py `_update_graph_network`). None while not built.

        `quiet`: a call that cannot be traced on Keras inputs gives None (models that use no
        PipelineStage run as before); the partial-assignment error is raised all the same.
        """
        state = self._ipu
        if state.traced_graph is not None and not state.traced_graph.current(self):
            state.traced_graph = None  # built or called with other inputs since: trace again
        if state.traced_graph is None and self.built:
            try:
                state.traced_graph = pipeline_stages.TracedGraph(self)
            except Exception:
                if not quiet:
                    raise
                return None
            if not state.pipeline_assignment:
                try:
                    scoped = pipeline_stages.assignment_from_scopes(self)
                except ValueError:
                    state.traced_graph = None  # refused each time, as the original's build
                    raise
                if scoped is not None:
                    self.set_pipeline_stage_assignment(scoped)
        return state.traced_graph

    def _ipu_built_from_shape(self) -> None:
        """A subclassed model built by `build(input_shape)`: as the original, whose build
        traces the call as a graph network, it can be saved (inputs of the shapes it was
        built with) and its PipelineStage scopes are read now."""
        if self.save_spec() is None:
            specs = pipeline_stages._input_specs_of(self)  # noqa: SLF001
            keras_internals.set_save_spec(
                self,
                tf.nest.map_structure(
                    lambda spec: tf.TensorSpec([None, *spec.shape[1:]], spec.dtype), specs
                ),
            )
        self._ipu.traced_graph = None
        if pipeline_stages.uses_stage_scopes(self) or self._ipu.pipeline_assignment:
            self._ipu_traced_graph()

    def _init_graph_network(self, *args, **kwargs):
        result = super()._init_graph_network(*args, **kwargs)
        if pipeline_stages.kind_of(self) == "functional":
            # As the original's functional.py: the scopes give the assignment at construction.
            scoped = pipeline_stages.assignment_from_scopes(self)
            if scoped is not None:
                pipeline_stages.check_assignment(self, scoped)
                self._ipu.pipeline_assignment = scoped
        return result

    def add(self, layer):
        if self._ipu.pipeline_assignment:
            # sequential_extensions.py `_add_delegate`: the assignment no longer holds.
            self._ipu.assignment_valid = False
        return super().add(layer)

    def pop(self):
        if self._ipu.pipeline_assignment:
            self._ipu.assignment_valid = False
        return super().pop()

    # Queues, callbacks, replication ----------------------------------------------------------

    def set_infeed_queue_options(self, **kwargs) -> None:
        """Options of the infeeds fit/evaluate/predict create (`prefetch_depth`: the batches
        the host prepares ahead of the device)."""
        # keras/ipu/extensions/extensions_base.py `_set_infeed_queue_options_impl`.
        for name in ("dataset", "infeed_spec", "element_spec"):
            if name in kwargs:
                raise ValueError(
                    f"Found `{name}` key in `kwargs`. This argument is automatically set by Keras."
                )
        if "_internal_id" in kwargs:
            raise ValueError(
                "Found `_internal_id` key in `kwargs`. This argument is not compatible with Keras."
            )
        # The infeed takes any other keyword (IPUInfeedQueue(**kwargs)); its values are
        # checked as the infeed checks them.
        if "prefetch_depth" in kwargs:
            infeed._validate_prefetch_depth(kwargs["prefetch_depth"])  # noqa: SLF001
        self._ipu.infeed_options = dict(kwargs)
        self._reset_execution_functions()

    def set_outfeed_queue_options(self, **kwargs) -> None:
        """Options of the outfeeds fit/evaluate/predict create (e.g. `buffer_depth`)."""
        # keras/ipu/extensions/extensions_base.py `_set_outfeed_queue_options_impl`.
        for name in ("outfeed_mode", "device_ordinal"):
            if name in kwargs:
                raise ValueError(
                    f"Found `{name}` key in `kwargs`. This argument is not compatible with Keras."
                )
        IPUOutfeedQueue(**kwargs)  # a TypeError for an unknown keyword, as the original's
        self._ipu.outfeed_options = dict(kwargs)
        self._reset_execution_functions()

    def set_asynchronous_callbacks(self, asynchronous=False) -> None:
        """Callbacks run after every step, each with its step's results, while the device runs
        the next execution (the original's polling thread); see `_asynchronous_callbacks_apply`."""
        self._ipu.asynchronous_callbacks = bool(asynchronous)

    def set_replication_options(self, replicated_metric_reduction_method="NONE") -> None:
        """How metrics are reduced across replicas."""
        method = replicated_metric_reduction_method
        if (
            isinstance(method, str)
            and method.upper() in ReplicatedMetricReductionMethod.__members__
        ):
            method = ReplicatedMetricReductionMethod[method.upper()]
        if not isinstance(method, ReplicatedMetricReductionMethod):
            raise ValueError(
                "replicated_metric_reduction_method must be one of NONE, LIST, SUM, MEAN, "
                f"got {replicated_metric_reduction_method!r}"
            )
        self._ipu.replicated_metric_reduction = method

    # The original's private attributes ----------------------------------------------------------
    # Programs (and the original's own tests) read the options back through these names of
    # keras/ipu/extensions/extensions_base.py; here they are views of the model's IPU state.

    @property
    def _gradient_accumulation_steps_per_replica(self) -> int | None:
        return self._ipu.gradient_accumulation_steps

    @property
    def _gradient_accumulation_reduction_method(self) -> GradientAccumulationReductionMethod:
        return self._ipu.gradient_accumulation_reduction

    @property
    def _gradient_accumulation_optimizer_kwargs(self) -> dict:
        kwargs = dict(self._ipu.gradient_accumulation_kwargs)
        kwargs.pop("use_v2_gradient_accumulation_optimizer", None)
        if self._ipu.gradient_accumulation_dtype is not None:
            kwargs["dtype"] = self._ipu.gradient_accumulation_dtype
        return kwargs

    @property
    def _use_v2_gradient_accumulation_optimizer(self) -> bool:
        return bool(
            self._ipu.gradient_accumulation_kwargs.get("use_v2_gradient_accumulation_optimizer")
        )

    @property
    def _pipelining_gradient_accumulation_steps_per_replica(self) -> int | None:
        return self._ipu.pipelining_steps

    @property
    def _pipelining_device_mapping(self) -> list[int] | None:
        return self._ipu.pipelining_device_mapping

    @property
    def _pipelining_accumulate_outfeed(self) -> bool | None:
        return self._ipu.pipelining_accumulate_outfeed

    @property
    def _pipelining_kwargs(self) -> dict:
        return dict(self._ipu.pipelining_kwargs)

    @property
    def _infeed_kwargs(self) -> dict:
        return dict(self._ipu.infeed_options)

    @property
    def _outfeed_kwargs(self) -> dict:
        return dict(self._ipu.outfeed_options)

    @property
    def _asynchronous_callbacks(self) -> bool:
        return self._ipu.asynchronous_callbacks

    # fit / evaluate / predict ------------------------------------------------------------------

    # Serving -----------------------------------------------------------------------------------

    def export_for_ipu_serving(
        self,
        export_dir,
        batch_size=None,
        output_names=None,
        preprocessing_step=None,
        preprocessing_step_signature=None,
        postprocessing_step=None,
        postprocessing_step_signature=None,
        purge_export_dir=False,
    ):
        """Writes a SavedModel for TensorFlow Serving (see `ipu.serving.export_keras`)."""
        return keras_export.export_model(
            self,
            export_dir,
            batch_size,
            output_names,
            preprocessing_step,
            preprocessing_step_signature,
            postprocessing_step,
            postprocessing_step_signature,
            purge_export_dir,
        )

    def fit(self, *args, **kwargs):
        # Stock Keras's refusal comes first, before the IPU checks read eager values.
        keras_internals.disallow_inside_tf_function("fit")
        self._check_fit_options()
        self._check_overrides("fit")
        with self._ipu_execution("fit"):
            return super().fit(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        # Stock Keras's refusal comes first, before the IPU checks read eager values.
        keras_internals.disallow_inside_tf_function("evaluate")
        self._check_overrides("evaluate")
        with self._ipu_execution("evaluate"):
            return super().evaluate(*args, **kwargs)

    def predict(self, *args, **kwargs):
        # Stock Keras's refusal comes first, before the IPU checks read eager values.
        keras_internals.disallow_inside_tf_function("predict")
        self._check_overrides("predict")
        with self._ipu_execution("predict"):
            return super().predict(*args, **kwargs)

    def _check_overrides(self, mode: str) -> None:
        if not self._ipu_original_step_rules:
            return  # the first API's models (api_v1) define their own functions
        cls = overrides.user_class(self, KerasExtensions)
        overrides.check(self, cls, mode, pipelined=self._pipeline_records() is not None)

    @contextlib.contextmanager
    def _ipu_execution(self, mode: str) -> Iterator[None]:
        outer = self._ipu.executing
        outer_step_calls = self._ipu.step_callbacks
        self._ipu.executing = True
        try:
            replicas = self._ipu_replica_count()
            self._ipu.step_callbacks = replicas if self._asynchronous_callbacks_apply(mode) else 0
            # A Keras step is one step of every replica: it takes one batch (or, in the
            # first API, one weight update's batches) per replica.
            data_mode = data_handler.DataMode(
                mode,
                replicas=replicas,
                batches_per_step=self._ipu.step_batches,
                original_rules=self._ipu_original_step_rules,
                step_callbacks=self._ipu.step_callbacks,
            )
            with data_handler.ipu_data_mode(self, data_mode):
                yield
        finally:
            functions = (self.train_function, self.test_function, self.predict_function)
            for function in functions:
                if isinstance(function, ExecutionFunction):
                    function.finish()
            self._ipu.executing = outer
            self._ipu.step_callbacks = outer_step_calls

    def _asynchronous_callbacks_apply(self, mode: str) -> bool:
        """Whether callbacks run per step, asynchronously (`set_asynchronous_callbacks`).

        As the original's extensions_base.py: not for fit and evaluate of a pipelined model
        that accumulates its outfeed (there are no per-step results then).
        """
        if not self._ipu.asynchronous_callbacks:
            return False
        if mode == "predict":
            return True
        accumulated = (
            self._ipu.pipelining_accumulate_outfeed and self._pipeline_records() is not None
        )
        return not accumulated

    def _validate_and_get_metrics_result(self, logs):
        # Keras re-reads its metrics summed over all replicas; replicated IPU models
        # report what their replicas' steps reported (`set_replication_options`).
        # With synthetic outfeeds, they report the zeros the executions gave (as the
        # original, whose logs are the outfeed's results), not the metrics' variables.
        if self._ipu.executing and (
            self._ipu_replica_count() > 1 or poplar_flags.is_synthetic("outfeed")
        ):
            return tf_utils.sync_to_numpy_or_python_type(logs)
        return super()._validate_and_get_metrics_result(logs)

    def make_train_function(self, force=False):
        if self.train_function is None or force:
            self.train_function = ExecutionFunction(self, "train")
        return self.train_function

    def make_test_function(self, force=False):
        if self.test_function is None or force:
            self.test_function = ExecutionFunction(self, "test")
        return self.test_function

    def make_predict_function(self, force=False):
        if self.predict_function is None or force:
            self.predict_function = ExecutionFunction(self, "predict")
        return self.predict_function

    def _reset_execution_functions(self) -> None:
        self.train_function = None
        self.train_tf_function = None
        self.test_function = None
        self.predict_function = None

    def _ipu_ipus_per_replica(self) -> int:
        """IPUs one replica of this model needs: its pipeline's IPUs, else one."""
        records = self._pipeline_records()
        if records is None:
            return 1
        mapping = self._ipu.pipelining_device_mapping
        stages = self._ipu.pipeline_stage_count or len({r.pipeline_stage for r in records})
        return max(mapping[:stages]) + 1 if mapping else stages

    def _ipu_replica_count(self) -> int:
        """Replicas of this model on its device: the device's IPUs over the model's.

        As the original's extensions_base.py `_get_replication_factor`: the IPUs a
        replica needs are rounded up to a power of two, and the configured device is
        read when fit/evaluate/predict run, not when the strategy was created.
        """
        needed = self._ipu_ipus_per_replica()
        device = configure.current_system(f"Model {self.name!r}").device(self._ipu.device_ordinal)
        shard_count = 2 ** math.ceil(math.log2(needed))
        if needed > device.num_ipus:
            raise ValueError(
                f"Current device has {device.num_ipus} IPUs attached, however the current "
                f"model requires a multiple of {shard_count} IPUs."
            )
        return device.num_ipus // shard_count

    def _accumulation_steps(self) -> int | None:
        """Micro-batches per weight update: the pipeline depth or the accumulation count."""
        if self._pipeline_records() is not None:
            return self._ipu.pipelining_steps
        return self._ipu.gradient_accumulation_steps

    def _check_fit_options(self) -> None:
        records = self._pipeline_records()
        steps_per_execution_variable = keras_internals.steps_per_execution(self)
        steps_per_execution = (
            int(steps_per_execution_variable.numpy())
            if steps_per_execution_variable is not None
            else 1
        )
        if records is not None:
            if self._ipu.pipelining_steps is None:
                # keras/ipu/extensions/extensions_base.py
                # `_verify_and_get_gradient_accumulation_steps_per_replica`.
                raise ValueError(
                    "The model which you are attempting to train is pipelined, however "
                    "`gradient_accumulation_steps_per_replica` has not been set through "
                    "`set_pipelining_options()`. You need to set this value as pipelined "
                    "models will perform gradient accumulation when training."
                )
            pipeline_stages.validate(self, records, self._ipu.pipelining_device_mapping)
            pipeline_stages.check_weights_on_one_ipu(records, self._ipu.pipelining_device_mapping)
            if not self._ipu.warned_batch_normalization:
                self._ipu.warned_batch_normalization = pipeline_stages.warn_of_batch_normalization(
                    records
                )
        self._ipu_check_accumulation_divides(steps_per_execution)
        accumulation = self._accumulation_steps()
        if records is not None or (accumulation or 1) > 1:
            optimizer_checks.check_minimize_not_overridden(self.optimizer)

    def _ipu_check_accumulation_divides(self, steps_per_execution: int) -> None:
        """The RuntimeError of the original's extensions_base.py
        `_verify_and_get_gradient_accumulation_steps_per_replica`, which fit applies to each
        epoch's `steps_per_execution` (cut to the epoch's steps when it has fewer)."""
        accumulation = self._accumulation_steps()
        if accumulation is not None and steps_per_execution % accumulation:
            mode = "pipelined " if self._pipeline_records() is not None else ""
            raise RuntimeError(
                f"The {mode}model has been configured to use gradient accumulation for "
                "training, however the current `steps_per_execution` value (set to "
                f"{steps_per_execution}) is not divisible by "
                f"`gradient_accumulation_steps_per_replica` ({accumulation}). You need to "
                "adjust either `steps_per_execution` or `gradient_accumulation_steps_per_replica` "
                "to make sure that `steps_per_execution` is divisible by "
                "`gradient_accumulation_steps_per_replica`."
            )

    def _ipu_accumulating_optimizer(self) -> AccumulatingOptimizer | None:
        """A stand-in optimizer that accumulates, if the model accumulates gradients."""
        steps = self._accumulation_steps()
        if steps is None or steps == 1:
            return None
        pipelined = self._pipeline_records() is not None
        reduction = (
            self._ipu.pipelining_reduction
            if pipelined
            else self._ipu.gradient_accumulation_reduction
        )
        dtype = (
            _accumulation_dtype(self._ipu.pipelining_kwargs.get("gradient_accumulation_dtype"))
            if pipelined
            else self._ipu.gradient_accumulation_dtype
        )
        # The original's Keras pipelines default gradient_accumulation_for_captured_grads
        # to False (extensions_base.py `_set_pipelining_options_impl`).
        accumulate_captured = pipelined and bool(
            self._ipu.pipelining_kwargs.get("gradient_accumulation_for_captured_grads", False)
        )
        return AccumulatingOptimizer(
            self.optimizer,
            steps,
            reduction,
            self._ipu.accumulator_store,
            dtype,
            accumulate_captured=accumulate_captured,
        )

    @contextlib.contextmanager
    def _ipu_optimizer_replaced(self, stand_in) -> Iterator[None]:
        """While a train step is traced, `stand_in` is the model's optimizer.

        Replicas trace their steps in threads of their own: the first to enter
        puts the stand-in in place and the last to leave puts the optimizer back.
        """
        if stand_in is None:
            yield
            return
        state = self._ipu
        with state.lock:
            if state.replacing == 0:
                state.real_optimizer = self.optimizer
                object.__setattr__(self, "optimizer", stand_in)
            state.replacing += 1
        try:
            yield
        finally:
            with state.lock:
                state.replacing -= 1
                if state.replacing == 0:
                    object.__setattr__(self, "optimizer", state.real_optimizer)
                    state.real_optimizer = None

    # Saving ------------------------------------------------------------------------------------

    def _ipu_saved_options(self) -> dict:
        """The IPU options as the original saves them in `get_config()`: its keys and values
        (keras/ipu/extensions/extensions_base.py `_get_base_config`, and the stage assignment
        of functional_extensions.py / sequential_extensions.py `_get_config_delegate`)."""
        state = self._ipu
        pipelined = state.pipelining_steps is not None
        # The original keeps one reduction method, set by either options call.
        reduction = (
            state.pipelining_reduction if pipelined else state.gradient_accumulation_reduction
        )
        config: dict[str, Any] = {
            "gradient_accumulation_steps_per_replica": state.gradient_accumulation_steps,
            "gradient_accumulation_reduction_method": reduction.value,
            "replicated_metric_reduction_method": _METRIC_REDUCTION_VALUES[
                state.replicated_metric_reduction
            ],
            "asynchronous_callbacks": state.asynchronous_callbacks,
            "pipelining_gradient_accumulation_steps_per_replica": state.pipelining_steps,
            "pipelining_device_mapping": state.pipelining_device_mapping,
            "pipelining_accumulate_outfeed": state.pipelining_accumulate_outfeed,
            "infeed_kwargs": dict(state.infeed_options),
            "outfeed_kwargs": dict(state.outfeed_options),
        }
        assignment = self._ipu.pipeline_assignment
        if isinstance(self, sequential.Sequential):
            config["pipeline_stage_assignment_valid"] = self._ipu.assignment_valid
            config["pipeline_stage_assignment"] = [r.pipeline_stage for r in assignment]
        elif not any(r.is_nested_model for r in assignment):
            # Functional and subclassed models: (layer index, node index, stage) per record.
            index = {id(layer): i for i, layer in enumerate(self.layers)}
            config["pipeline_stage_assignment"] = [
                (index[id(r.layer)], r.node_index, r.pipeline_stage) for r in assignment
            ]
        return config

    def _ipu_restore_options(self, options: dict) -> None:
        """Sets the options `_ipu_saved_options` saved (extensions_base.py `_from_base_config`)."""
        state = self._ipu
        reduction = _parse_saved_reduction(options.get("gradient_accumulation_reduction_method"))
        steps = options.get("gradient_accumulation_steps_per_replica")
        if steps is not None:
            self.set_gradient_accumulation_options(steps, reduction)
        state.gradient_accumulation_reduction = reduction
        metric = options.get("replicated_metric_reduction_method")
        if metric is not None:
            self.set_replication_options(_METRIC_REDUCTION_BY_VALUE.get(metric, metric))
        state.asynchronous_callbacks = bool(options.get("asynchronous_callbacks", False))
        pipelining = (
            options.get("pipelining_gradient_accumulation_steps_per_replica"),
            options.get("pipelining_device_mapping"),
            options.get("pipelining_accumulate_outfeed"),
        )
        if any(value is not None for value in pipelining):
            self.set_pipelining_options(
                *pipelining, gradient_accumulation_reduction_method=reduction
            )
        state.pipelining_reduction = reduction
        if options.get("infeed_kwargs"):
            self.set_infeed_queue_options(**options["infeed_kwargs"])
        if options.get("outfeed_kwargs"):
            self.set_outfeed_queue_options(**options["outfeed_kwargs"])
        self._restore_stage_assignment(options)

    def _restore_stage_assignment(self, options: dict) -> None:
        """The saved assignment, as the original's `_deserialize_from_config_delegate`s: set
        as saved (a subclassed model's is checked when its call is traced)."""
        saved = options.get("pipeline_stage_assignment") or []
        kind = pipeline_stages.kind_of(self)
        if kind == "sequential":
            self._ipu.pipeline_assignment = [
                pipeline_stages.SequentialLayerPipelineStageAssignment(self.layers[i], stage)
                for i, stage in enumerate(saved)
            ]
            self._ipu.assignment_valid = bool(options.get("pipeline_stage_assignment_valid"))
        else:
            record = (
                pipeline_stages.FunctionalLayerPipelineStageAssignment
                if kind == "functional"
                else pipeline_stages.ModelLayerPipelineStageAssignment
            )
            self._ipu.pipeline_assignment = [
                record(self.layers[int(i)], int(node), stage) for i, node, stage in saved
            ]
        self._reset_execution_functions()


#: The original's values of ReplicatedMetricReductionMethod (extensions_base.py).
_METRIC_REDUCTION_VALUES = {
    ReplicatedMetricReductionMethod.NONE: 1,
    ReplicatedMetricReductionMethod.LIST: 2,
    ReplicatedMetricReductionMethod.SUM: 3,
    ReplicatedMetricReductionMethod.MEAN: 4,
}
_METRIC_REDUCTION_BY_VALUE = {value: method for method, value in _METRIC_REDUCTION_VALUES.items()}

#: The keys `_ipu_saved_options` adds to a model's config.
SAVED_OPTION_KEYS = (
    "gradient_accumulation_steps_per_replica",
    "gradient_accumulation_reduction_method",
    "experimental_gradient_accumulation_normalize_gradients",
    "pipelining_gradient_accumulation_steps_per_replica",
    "pipelining_accumulate_outfeed",
    "pipelining_device_mapping",
    "experimental_pipelining_normalize_gradients",
    "asynchronous_callbacks",
    "replicated_metric_reduction_method",
    "infeed_kwargs",
    "outfeed_kwargs",
    "pipeline_stage_assignment",
    "pipeline_stage_assignment_valid",
    "get_config_has_been_called",
)


def _check_pipelining_kwargs_keys(kwargs: dict) -> None:
    """The keys `set_pipelining_options` refuses (extensions_base.py
    `_set_pipelining_options_impl`), with the original's messages."""
    explicit = {
        "gradient_accumulation_count": "gradient_accumulation_steps_per_replica",
        "device_mapping": "device_mapping",
        "accumulate_outfeed": "accumulate_outfeed",
    }
    for key, argument in explicit.items():
        if key in kwargs:
            raise ValueError(
                f"Found `{key}` key in `pipelining_kwargs`. Set the `{argument}` argument to "
                "`set_pipelining_options` instead."
            )
    automatic = (
        "computational_stages",
        "repeat_count",
        "inputs",
        "infeed_queue",
        "outfeed_queue",
        "optimizer_function",
    )
    for key in automatic:
        if key in kwargs:
            raise ValueError(
                f"Found `{key}` key in `pipelining_kwargs`. This argument is automatically set "
                "by Keras."
            )
    for key in ("outfeed_loss", "outfeed_mask", "batch_serialization_iterations"):
        if key in kwargs:
            raise ValueError(
                f"Found `{key}` key in `pipelining_kwargs`. This argument is not compatible "
                "with Keras."
            )
    if "experimental_normalize_gradients" in kwargs:
        raise ValueError(
            "Found `experimental_normalize_gradients` argument to `set_pipelining_options`. "
            "This argument has now been removed, use `gradient_accumulation_reduction_method` "
            "instead."
        )


def _parse_saved_reduction(value) -> GradientAccumulationReductionMethod:
    if value is None:
        return GradientAccumulationReductionMethod.SUM
    if isinstance(value, int) and not isinstance(value, bool):
        return GradientAccumulationReductionMethod(value)
    return GradientAccumulationReductionMethod.parse(
        value, "gradient_accumulation_reduction_method"
    )
