"""What `IPUEstimator` and `IPUPipelineEstimator` share: train, evaluate, predict.

Each call builds a TF1 graph: the global step (on the host), the infeed of the
`input_fn`'s dataset, the mode's device loop (`ipu_compiler.compile` of the wrapper's
loop), the host side, a saver; then runs it in `session_loop.hooked_session` with the
stock hooks the estimator installed (checkpoints, summaries, logging) and the user's.
"""

from __future__ import annotations

import copy
import itertools
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.util import function_utils

from openipu._src.compiler import ipu_compiler, scopes
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.engine.outfeed_queue import IPUOutfeedMode, IPUOutfeedQueue
from openipu._src.estimator import checkpoints, distribution, session_loop
from openipu._src.estimator.model_fn_wrapper import HostSide, supported_kwargs
from openipu._src.estimator.run_config import RunConfig
from openipu._src.estimator.spec import LOSS_METRIC_KEY, ModeKeys, check_hooks_type
from openipu._src.estimator.steps import (
    HOST_DEVICE,
    GlobalStepCounterAndStopHook,
    local_batch_size,
)
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.system import configure

logger = logging.getLogger(__name__)

_INPUT_FN_KEY = "input_fn"
_BATCH_SIZE_KEY = "batch_size"
_RESERVED_PARAMS_KEYS = [_INPUT_FN_KEY]

#: ModelFnWrapper or ModelFnPipelineWrapper: the class, with its static `need_outfeed`.
WrapperFactory = Any


class _BuiltProgram:
    """One mode's graph: the host side of its compiled loop, its hooks, its infeed."""

    def __init__(self, host: HostSide, hooks: tuple[Any, ...], infeed: IPUInfeedQueue) -> None:
        self.host = host
        self.hooks = hooks
        self.infeed = infeed


class IPUEstimatorBase:
    """The estimator loop on the engine, shared by the IPU estimators.

    A subclass names the wrapper that builds its model_fn's programs (`_wrapper_class`).
    """

    _wrapper_class: WrapperFactory

    def __init__(
        self,
        model_fn: Callable[..., Any],
        model_dir: str | os.PathLike | None = None,
        config: RunConfig | None = None,
        params: dict | None = None,
        warm_start_from: Any = None,
        train_batch_size: int | None = None,
        eval_batch_size: int | None = None,
        predict_batch_size: int | None = None,
    ) -> None:
        self._verify_model_fn(model_fn, params)
        # The original's checks and messages (ipu_estimator.py).
        if config is None or not isinstance(config, RunConfig):
            raise ValueError("`config` must be provided with type `ipu_run_config.RunConfig`")
        if params is not None and not isinstance(params, dict):
            raise ValueError("`params` is expected to be of type `dict`")
        if params is not None and any(k in params for k in _RESERVED_PARAMS_KEYS):
            raise ValueError(
                f"{_RESERVED_PARAMS_KEYS} are reserved keys but existed in params {params}."
            )
        batch_sizes = (train_batch_size, eval_batch_size, predict_batch_size)
        self._any_batch_size_provided = any(b is not None for b in batch_sizes)
        if self._any_batch_size_provided and params is not None and _BATCH_SIZE_KEY in params:
            raise ValueError(
                f"{_BATCH_SIZE_KEY} cannot be passed in params when a batch size argument is passed"
            )
        num_replicas = config.ipu_run_config.num_replicas
        train_workers = _workers(config.train_distribute)
        eval_workers = _workers(config.eval_distribute)
        self._batch_size_for_train = local_batch_size(
            train_batch_size, train_workers, num_replicas, "train_batch_size"
        )
        self._batch_size_for_eval = local_batch_size(
            eval_batch_size, eval_workers, num_replicas, "eval_batch_size"
        )
        self._batch_size_for_predict = local_batch_size(
            predict_batch_size, 1, num_replicas, "predict_batch_size"
        )
        self._validate_config(config)
        # The stock Estimator's rules for model_dir.
        model_dir = os.fspath(model_dir) if model_dir is not None else None
        if model_dir is not None and config.model_dir is not None and model_dir != config.model_dir:
            raise ValueError(
                "`model_dir` are set both in constructor and `RunConfig`, but with different "
                f"values. In constructor: '{model_dir}', in `RunConfig`: '{config.model_dir}' "
            )
        model_dir = model_dir or config.model_dir
        if model_dir is None:
            model_dir = tempfile.mkdtemp()
            logger.warning("Using temporary folder as model directory: %s", model_dir)
        self._config = config.replace(model_dir=model_dir)
        self._model_dir = model_dir
        self._params = copy.deepcopy(params or {})
        self._user_model_fn = model_fn
        self._warm_start = checkpoints.warm_start_checkpoint(warm_start_from)
        self._ipu_device = f"/device:IPU:{config.ipu_run_config.ordinal}"

    # Properties of the stock Estimator -------------------------------------------------------

    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        return copy.deepcopy(self._config)

    @property
    def params(self) -> dict:
        return copy.deepcopy(self._params)

    @property
    def model_fn(self) -> Callable[..., Any]:
        """The model_fn bound to `self.params`: `model_fn(features, labels, mode, config)`."""

        def public_model_fn(features: Any, labels: Any, mode: str, config: Any) -> Any:
            available = {
                "features": features,
                "labels": labels,
                "mode": mode,
                "config": config,
                "params": self.params,
            }
            return self._user_model_fn(**supported_kwargs(self._user_model_fn, available))

        return public_model_fn

    def latest_checkpoint(self) -> str | None:
        """The latest checkpoint in `model_dir`, or None."""
        return checkpoints.latest_checkpoint(self._model_dir)

    def eval_dir(self, name: str | None = None) -> str:
        """The directory evaluation summaries (named `name`) are written to."""
        return os.path.join(self._model_dir, "eval" if not name else "eval_" + name)

    def _checkpoint_or_raise(self) -> str:
        path = self.latest_checkpoint()
        if path is None:
            # The stock Estimator's message.
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")
        return path

    def get_variable_names(self) -> list[str]:
        """The names of the variables of the latest checkpoint."""
        return [name for name, _ in tf.train.list_variables(self._checkpoint_or_raise())]

    def get_variable_value(self, name: str) -> np.ndarray:
        """The value of variable `name` in the latest checkpoint."""
        value: np.ndarray = tf.train.load_variable(self._checkpoint_or_raise(), name)
        return value

    # Validation --------------------------------------------------------------------------------

    def _verify_model_fn(self, model_fn: Callable[..., Any], params: dict | None) -> None:
        """Checks of the model_fn's signature when the estimator is made (none by default)."""

    def _validate_config(self, config: RunConfig) -> None:
        distributed = config.train_distribute or config.eval_distribute
        if distributed and config.ipu_run_config.iterations_per_loop > 1:
            raise NotImplementedError(
                "iterations_per_loop > 1 (got "
                f"{config.ipu_run_config.iterations_per_loop}) not supported with distribution"
            )

    def _validate_steps(self, steps: int | None) -> None:
        iterations = self._config.ipu_run_config.iterations_per_loop
        if steps is not None and steps % iterations != 0:
            raise ValueError(
                f"steps ({steps}) must be a multiple of iterations_per_loop ({iterations})"
            )

    def _setup_params(self, input_fn: Callable[..., Any], batch_size: int | None) -> None:
        self._params[_INPUT_FN_KEY] = input_fn
        if not self._any_batch_size_provided:
            return
        if batch_size is None:
            self._params.pop(_BATCH_SIZE_KEY, None)  # left from another mode's call
            return
        if "params" not in function_utils.fn_args(input_fn):
            raise ValueError(
                f"input_fn must have params argument to receive params['{_BATCH_SIZE_KEY}']"
            )
        self._params[_BATCH_SIZE_KEY] = batch_size

    # Building a mode's program ---------------------------------------------------------------

    def _configure_system(self) -> None:
        run_config = self._config.ipu_run_config
        options = run_config.ipu_options
        if options is None:
            if configure.maybe_current_system() is None:
                configure.configure_ipu_system(IPUConfig())  # one single-IPU device
            return
        if not isinstance(options, IPUConfig):
            raise TypeError("`config.ipu_options` must be an IPUConfig instance")
        configure.configure_ipu_system(options)
        if options.select_ipus not in ([], ()):
            configured = configure.current_system().device(run_config.ordinal).num_ipus
            wanted = run_config.num_shards * run_config.num_replicas
            if wanted != configured:
                raise ValueError(
                    f"`IPURunConfig` configured with {wanted} devices ({run_config.num_replicas} "
                    f"num_replicas times {run_config.num_shards} num_shards), but `IpuOptions` "
                    f"configured with {configured} devices"
                )

    def _replicas(self) -> int:
        """The replicas of the program: the device's IPUs over the IPUs one replica spans."""
        run_config = self._config.ipu_run_config
        device = configure.current_system().device(run_config.ordinal)
        return max(1, device.num_ipus // max(1, run_config.num_shards))

    def _call_input_fn(
        self, input_fn: Callable[..., Any], mode: str, strategy: Any = None
    ) -> tf.data.Dataset:
        available = {"mode": mode, "params": self.params, "config": self.config}
        context = distribution.input_context(strategy)
        if context is not None:
            available["input_context"] = context
        kwargs = supported_kwargs(input_fn, available)
        with tf.device(HOST_DEVICE):
            dataset = input_fn(**kwargs)
        if not isinstance(dataset, tf.data.Dataset):
            raise ValueError("input_fn must return Dataset")
        element = dataset.element_spec
        if isinstance(element, (tuple, list)) and len(element) != 2:
            # The stock Estimator's check (tensorflow_estimator util.parse_iterator_result),
            # which the original's IPUEstimator.train meets first (ipu_estimator_test.py).
            raise ValueError("input_fn should return (features, labels) as a len 2 tuple.")
        return dataset

    def _build(
        self, input_fn: Callable[..., Any], mode: str, strategy: Any = None
    ) -> _BuiltProgram:
        dataset = self._call_input_fn(input_fn, mode, strategy)
        run_config = self._config.ipu_run_config
        infeed = IPUInfeedQueue(dataset, prefetch_depth=run_config.prefetch_depth)
        outfeed = None
        if self._wrapper_class.need_outfeed(mode):
            outfeed = IPUOutfeedQueue(outfeed_mode=IPUOutfeedMode.ALL)
        params = {k: v for k, v in self._params.items() if k != _INPUT_FN_KEY}
        wrapper = self._wrapper_class(self._user_model_fn, self._config, params, infeed, outfeed)
        if mode == ModeKeys.TRAIN:
            loop = wrapper.create_training_loop()
        elif mode == ModeKeys.EVAL:
            loop = wrapper.create_evaluation_loop()
        else:
            loop = wrapper.create_prediction_loop()

        def build() -> HostSide:
            with scopes.ipu_scope(self._ipu_device):
                compiled = ipu_compiler.compile(loop)
            if mode == ModeKeys.TRAIN:
                return wrapper.training_host_side(compiled)
            if mode == ModeKeys.EVAL:
                return wrapper.evaluation_host_side(compiled)
            return wrapper.prediction_host_side(compiled)

        host = distribution.in_replica_context(strategy, build)
        return _BuiltProgram(host, tuple(wrapper.captured_hooks), infeed)

    def _new_graph(self) -> tuple[tf.Graph, tf.Variable]:
        graph = tf.Graph()
        with graph.as_default():
            if self._config.tf_random_seed is not None:
                tf.compat.v1.set_random_seed(self._config.tf_random_seed)
            global_step = self._create_global_step(graph)
        return graph, global_step

    def _create_global_step(self, graph: tf.Graph) -> tf.Variable:
        # A resource variable on the host, as the original's (read, not incremented, by the
        # model on the IPU).
        with graph.as_default(), graph.name_scope(None), tf.device(HOST_DEVICE):
            return tf.compat.v1.get_variable(
                tf.compat.v1.GraphKeys.GLOBAL_STEP,
                shape=[],
                dtype=tf.int64,
                initializer=tf.compat.v1.zeros_initializer(),
                trainable=False,
                use_resource=True,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
                collections=[
                    tf.compat.v1.GraphKeys.GLOBAL_VARIABLES,
                    tf.compat.v1.GraphKeys.GLOBAL_STEP,
                ],
            )

    def _saver(self) -> tf.compat.v1.train.Saver:
        return tf.compat.v1.train.Saver(
            sharded=True,
            max_to_keep=self._config.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours,
            save_relative_paths=True,
        )

    # Training ------------------------------------------------------------------------------------

    def train(
        self,
        input_fn: Callable[..., Any],
        hooks: list[Any] | None = None,
        steps: int | None = None,
        max_steps: int | None = None,
        saving_listeners: list[Any] | None = None,
    ) -> IPUEstimatorBase:
        """Trains the model on `input_fn`'s data for `steps` more, or up to `max_steps`."""
        self._validate_steps(steps)
        self._setup_params(input_fn, self._batch_size_for_train)
        # The stock Estimator's checks and messages.
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        if max_steps is not None and max_steps <= checkpoints.global_step_of(self._model_dir):
            logger.info("Skipping training since max_steps has already saved.")
            return self
        user_hooks = check_hooks_type(hooks)
        user_hooks.append(
            GlobalStepCounterAndStopHook(
                self._config.ipu_run_config.iterations_per_loop, steps, max_steps
            )
        )
        listeners = list(saving_listeners or [])
        self._configure_system()
        graph, global_step = self._new_graph()
        strategy = self._config.train_distribute
        with graph.as_default(), distribution.strategy_scope(strategy):
            summaries_before = len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES))
            program = self._build(input_fn, ModeKeys.TRAIN, strategy)
            loss = distribution.reported_loss(strategy, program.host.loss)
            with tf.device(HOST_DEVICE):
                tf.compat.v1.summary.scalar("loss", loss)
            # Summaries made inside the device loop cannot leave it: only the host's are saved.
            summaries = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
            summary_op = tf.compat.v1.summary.merge(
                [s for s in summaries[summaries_before:] if not _in_device_loop(s)]
            )
            saver = self._saver()
            all_hooks = [
                *user_hooks,
                tf.compat.v1.train.NanTensorHook(loss),
                *program.hooks,
                *self._logging_hooks(loss, global_step),
                *self._chief_hooks(saver, summary_op, listeners),
            ]
            initialize = checkpoints.initializer(saver, self.latest_checkpoint(), self._warm_start)
            final_loss = None
            with session_loop.hooked_session(
                all_hooks,
                initialize,
                distribution.session_config(strategy, self._config.session_config),
                [program.infeed.initializer],
                target=self._config.master if strategy is not None else "",
            ) as session:
                while not session.stop_requested:
                    _, final_loss = session.run([program.host.train_op, loss])
        logger.info("Loss for final step: %s.", final_loss)
        return self

    def _logging_hooks(self, loss: tf.Tensor, global_step: tf.Variable) -> list[Any]:
        every = self._config.log_step_count_steps
        if not every:
            return []
        return [
            tf.compat.v1.train.LoggingTensorHook(
                {"loss": loss, "step": global_step}, every_n_iter=every
            )
        ]

    def _chief_hooks(self, saver: Any, summary_op: Any, listeners: list[Any]) -> list[Any]:
        config = self._config
        hooks: list[Any] = []
        if config.log_step_count_steps:
            hooks.append(
                tf.compat.v1.train.StepCounterHook(
                    every_n_steps=config.log_step_count_steps, output_dir=self._model_dir
                )
            )
        if config.save_summary_steps:
            hooks.append(
                tf.compat.v1.train.SummarySaverHook(
                    save_steps=config.save_summary_steps,
                    output_dir=self._model_dir,
                    summary_op=summary_op,
                )
            )
        if config.save_checkpoints_steps or config.save_checkpoints_secs:
            hooks.append(
                tf.compat.v1.train.CheckpointSaverHook(
                    self._model_dir,
                    save_secs=config.save_checkpoints_secs,
                    save_steps=config.save_checkpoints_steps,
                    saver=saver,
                    listeners=listeners,
                    save_graph_def=config.checkpoint_save_graph_def,
                )
            )
        return hooks

    # Evaluation ----------------------------------------------------------------------------------

    def evaluate(
        self,
        input_fn: Callable[..., Any],
        steps: int | None = None,
        hooks: list[Any] | None = None,
        checkpoint_path: str | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """Evaluates the model on `input_fn`'s data; returns the metrics and `global_step`."""
        self._validate_steps(steps)
        self._setup_params(input_fn, self._batch_size_for_eval)
        all_hooks = check_hooks_type(hooks)
        all_hooks.append(
            GlobalStepCounterAndStopHook(
                self._config.ipu_run_config.iterations_per_loop, steps, None
            )
        )
        checkpoint = checkpoint_path or self.latest_checkpoint()
        self._configure_system()
        graph, global_step = self._new_graph()
        with graph.as_default():
            program = self._build(input_fn, ModeKeys.EVAL)
            host = program.host
            saver = self._saver()
            initialize = checkpoints.initializer(saver, checkpoint, None)
            updates = {name: update for name, (_, update) in host.host_metrics.items()}
            values = {name: value for name, (value, _) in host.host_metrics.items()}
            losses: list[float] = []
            last_ipu_metrics: dict[str, float] = {}
            with tf.device(HOST_DEVICE):
                step_value = global_step.read_value()
            with session_loop.hooked_session(
                [*all_hooks, *program.hooks],
                initialize,
                self._config.session_config,
                [program.infeed.initializer],
            ) as session:
                start_step = int(session.session.run(step_value))
                while not session.stop_requested:
                    loss, _, ipu_metrics = session.run([host.loss, updates, host.ipu_metrics])
                    losses.append(float(loss))
                    last_ipu_metrics = ipu_metrics
                results: dict[str, Any] = dict(last_ipu_metrics)
                results.update(session.session.run(values))
        results[LOSS_METRIC_KEY] = np.float32(np.mean(losses)) if losses else np.float32(np.nan)
        results[tf.compat.v1.GraphKeys.GLOBAL_STEP] = start_step
        self._write_eval_summaries(results, start_step, name)
        return results

    def _write_eval_summaries(self, results: dict[str, Any], step: int, name: str | None) -> None:
        summary = tf.compat.v1.Summary()
        for key, value in results.items():
            if key == tf.compat.v1.GraphKeys.GLOBAL_STEP or np.ndim(value) != 0:
                continue
            summary.value.add(tag=key, simple_value=float(value))
        with tf.Graph().as_default():  # TF1 writers need a graph
            writer = tf.compat.v1.summary.FileWriterCache.get(self.eval_dir(name))
            writer.add_summary(summary, step)
            writer.flush()

    # Prediction -------------------------------------------------------------------------------

    def predict(
        self,
        input_fn: Callable[..., Any],
        predict_keys: list[str] | None = None,
        hooks: list[Any] | None = None,
        checkpoint_path: str | None = None,
        yield_single_examples: bool = True,
        num_predictions: int | None = None,
    ) -> Iterator[Any]:
        """Yields the predictions for `input_fn`'s features (examples, or whole batches)."""
        self._setup_params(input_fn, self._batch_size_for_predict)
        predictions = self._predict_batches(input_fn, predict_keys, hooks, checkpoint_path)
        flat = _flatten(predictions, yield_single_examples)
        return itertools.islice(flat, num_predictions)

    def _predict_batches(
        self,
        input_fn: Callable[..., Any],
        predict_keys: list[str] | None,
        hooks: list[Any] | None,
        checkpoint_path: str | None,
    ) -> Iterator[Any]:
        """Each step's predictions (the batch the model returned), run after run."""
        user_hooks = check_hooks_type(hooks)
        checkpoint = checkpoint_path or self.latest_checkpoint()
        self._configure_system()
        graph, _ = self._new_graph()
        with graph.as_default():
            program = self._build(input_fn, ModeKeys.PREDICT)
            predictions = _select_keys(program.host.predictions, predict_keys)
            initialize = checkpoints.initializer(self._saver(), checkpoint, None)
            with session_loop.hooked_session(
                [*user_hooks, *program.hooks],
                initialize,
                self._config.session_config,
                [program.infeed.initializer],
            ) as session:
                replicas = self._replicas()
                while not session.stop_requested:
                    yield from _steps_of(session.run(predictions), replicas)


def _workers(strategy: Any) -> int:
    return int(strategy.num_replicas_in_sync) if strategy else 1


def _in_device_loop(summary: tf.Tensor) -> bool:
    """Whether a summary op was built inside a compiled loop (its control flow context)."""
    return summary.op._control_flow_context is not None  # noqa: SLF001


def _select_keys(predictions: Any, keys: list[str] | None) -> Any:
    """The stock Estimator's _extract_keys: the predictions named in `keys` (unknown names
    are ignored), refused only when none is left or the predictions are not a dict."""
    if not keys:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    selected = {key: value for key, value in predictions.items() if key in keys}
    if not selected:
        raise ValueError(
            f"Expected to run at least one output from {predictions.keys()}, provided {keys}."
        )
    return selected


def _steps_of(values: Any, replicas: int) -> Iterator[Any]:
    """One run's outfed predictions [iterations, (replicas,) ...] as per-step batches
    (iteration i of replica r is step i * replicas + r, as the infeed hands them out)."""
    if replicas > 1:
        values = tf.nest.map_structure(lambda v: v.reshape(-1, *v.shape[2:]), values)
    if all(np.ndim(v) == 1 for v in tf.nest.flatten(values)):
        # Each step predicted scalars: the run's are one batch, as the original's outfeed
        # flattened over the iterations and replicas (ipu_estimator_replicated_test.py).
        yield values
        return
    leading = tf.nest.flatten(values)[0].shape[0]
    for index in range(leading):
        yield tf.nest.map_structure(lambda v, i=index: v[i], values)


def _flatten(batches: Iterator[Any], single_examples: bool) -> Iterator[Any]:
    for batch in batches:
        if not single_examples:
            yield batch
            continue
        if isinstance(batch, dict):
            length = min(np.shape(v)[0] for v in batch.values())
            for i in range(length):
                yield {key: value[i] for key, value in batch.items()}
        else:
            yield from batch
