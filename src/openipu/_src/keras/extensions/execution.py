"""Keras' train/test/predict functions as engine programs.

Each function takes the iterator of an `IPUDataHandler` (one stack of
`steps_per_execution` batches per `next`) and runs the whole stack as one
engine program (a `ProgramSpec` of the execution's steps): one compiled region, one host
call per execution. Called
outside `fit`/`evaluate`/`predict` (for example by `train_on_batch`), they
take a single batch and run a one-step program.
"""

from __future__ import annotations

import collections
import threading

import tensorflow as tf
from tensorflow.python.util import nest
from tf_keras.src.optimizers import optimizer_v1

from openipu._src.config import poplar_flags
from openipu._src.engine import stream_dtypes
from openipu._src.engine.program import LoopProgram, compile_program
from openipu._src.engine.program_spec import ProgramSpec
from openipu._src.integration import keras_internals
from openipu._src.keras.extensions import (
    data_handler,
    pipeline_depth_check,
    replicated_metrics,
    train_step_optimizer,
)


class ExecutionFunction:
    """A Keras `train_function`/`test_function`/`predict_function` backed by the engine."""

    def __init__(self, model, kind: str) -> None:
        self._model = model
        self._kind = kind
        self._programs: dict[tuple, LoopProgram] = {}
        self._local_metric_names: frozenset = frozenset()
        # Asynchronous callbacks: the results of the current execution's steps not handed
        # to Keras yet, and the next execution, running while the callbacks run.
        self._pending: collections.deque = collections.deque()
        self._ahead: _Ahead | None = None
        self._checked_stages = False

    def __call__(self, iterator):
        if self._model._ipu.executing and self._model._ipu.step_callbacks:  # noqa: SLF001
            return self._next_step_results(iterator)
        return self._execute(iterator)

    def _execute(self, iterator, every_step: bool = False):
        element = next(iterator)
        replicas = self._model._ipu_replica_count()  # noqa: SLF001
        if not self._model._ipu.executing:  # noqa: SLF001 - a single batch from *_on_batch
            element = nest.map_structure(lambda t: tf.expand_dims(t, 0), element)
            element = nest.map_structure(lambda t: tf.repeat(t, replicas, axis=0), element)
        batches = int(nest.flatten(element)[0].shape[0])
        steps = batches // replicas
        synthetic = poplar_flags.is_synthetic("outfeed")
        program = self._program(steps, replicas, _inner_shapes(element), every_step, synthetic)
        outputs = program(element)
        if self._kind == "train":
            # Keras' TensorBoard writes the graph of `train_tf_function` (the original's
            # Keras, of its IPU train function: keras/callbacks.py
            # `_write_keras_model_train_graph`): the program that trains is that function.
            self._model.train_tf_function = program.tf_function
        if not self._checked_stages:
            # A subclassed model is built (and its call's PipelineStage scopes seen) by its
            # first step: its stages are read and checked now (the original builds it before).
            self._checked_stages = True
            self._model._pipeline_records()  # noqa: SLF001
        if synthetic:
            outputs = _synthetic_outputs(outputs, steps, replicas, self._kind, every_step)
        if every_step:
            return steps, replicas, outputs
        if self._kind == "predict":
            # Keras expects the predictions of an execution concatenated along the batch,
            # in data order: step i of replica r had batch i * R + r.
            stacked_dims = 2 if replicas > 1 else 1
            return nest.map_structure(
                lambda t: tf.reshape(t, [-1, *t.shape[stacked_dims + 1 :]]), outputs
            )
        if replicas > 1:
            return replicated_metrics.reduce_over_replicas(
                outputs,
                self._local_metric_names,
                self._model._ipu.replicated_metric_reduction,  # noqa: SLF001
            )
        return outputs

    # -- asynchronous callbacks ------------------------------------------------------------

    def _next_step_results(self, iterator):
        """What one step of one replica gave (Keras' loop calls once per step and replica).

        As the original's polling thread (keras/ipu/extensions/polling_thread.py), the
        callbacks see each step's own results, and the device does not wait for them: once
        an execution's results are in, the next execution of the epoch starts in a host
        thread while Keras runs the callbacks of this one.
        """
        if not self._pending:
            handler = data_handler.current_async_handler()
            if self._ahead is not None:
                steps, replicas, outputs = self._ahead.result()
                self._ahead = None
            else:
                steps, replicas, outputs = self._execute(iterator, every_step=True)
            self._pending.extend(self._per_step_results(outputs, steps, replicas))
            if handler is not None and handler.executions_follow(steps):
                strategy = tf.distribute.get_strategy()  # the thread runs in the same scope

                def run_next():
                    with strategy.scope():
                        return self._execute(iterator, every_step=True)

                self._ahead = _Ahead(run_next)
        return self._pending.popleft()

    def _per_step_results(self, outputs, steps: int, replicas: int) -> list:
        """Step-major, replica-minor results: `outputs` hold `[steps, (replicas,) ...]`."""
        results = []
        for step in range(steps):
            for replica in range(replicas):

                def pick(t, step=step, replica=replica):
                    return t[step, replica] if replicas > 1 else t[step]

                results.append(nest.map_structure(pick, outputs))
        return results

    def finish(self) -> None:
        """Ends the asynchronous work of a fit/evaluate/predict (its loop ended or broke off)."""
        ahead, self._ahead = self._ahead, None
        self._pending.clear()
        if ahead is not None:
            ahead.wait()

    # -- programs ---------------------------------------------------------------------------

    def _program(
        self,
        steps: int,
        replicas: int,
        inner_shapes: tuple,
        every_step: bool = False,
        synthetic: bool = False,
    ) -> LoopProgram:
        # One program per shape of the data's batches: a model input of `[batch, None, 1]`
        # gets other static shapes from another call's data (or, in the first API, a
        # generator's batches), as IPU programs need (the original compiles one per shape).
        key = (steps, replicas, inner_shapes, every_step, synthetic)
        program = self._programs.get(key)
        if program is None:
            stand_in = None
            if self._kind == "train":
                # An execution cut to an epoch's fewer steps is checked as the original
                # checks fit's `steps_per_execution` (extensions_base.py).
                self._model._ipu_check_accumulation_divides(steps)  # noqa: SLF001
                stand_in = self._model._ipu_accumulating_optimizer()  # noqa: SLF001
            pipeline_depth_check.check(self._model, self._kind, steps)
            group_size = stand_in.count if stand_in is not None else 1
            step = {
                "train": lambda data: self._train_step(data, stand_in),
                "test": self._test_step,
                "predict": self._predict_step,
            }[self._kind]
            program = compile_program(
                ProgramSpec(
                    step,
                    steps,
                    device_ordinal=self._model._ipu.device_ordinal,  # noqa: SLF001
                    # With synthetic outfeeds only the all-steps mode gives the host
                    # anything (empty results; `_synthetic_outputs`).
                    outputs="all" if self._kind == "predict" or every_step or synthetic else "last",
                    group_size=group_size,
                    after_group=stand_in.apply_accumulated if stand_in is not None else None,
                    replicas=replicas,
                    ipus_per_replica=self._model._ipu_ipus_per_replica(),  # noqa: SLF001
                    name=f"{self._model.name}_{self._kind}",
                )
            )
            self._programs[key] = program
        return program

    def _train_step(self, data, stand_in):
        model = self._model
        # A TF1 optimizer given to compile: its pairs reach it as they are (the
        # original's `_KerasOptimizerWrapper` takes them from TFOptimizer.get_grads).
        refuse_none_gradients = not isinstance(model.optimizer, optimizer_v1.TFOptimizer)
        with (
            model._ipu_optimizer_replaced(stand_in),  # noqa: SLF001
            train_step_optimizer.train_step(model, refuse_none_gradients),
        ):
            outputs = self._replica_metrics(model.train_step(data))
        _check_outfeed_dtypes(outputs)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            keras_internals.step_counter(model, "train").assign_add(1)
        return outputs

    def _test_step(self, data):
        outputs = self._replica_metrics(self._model.test_step(data))
        _check_outfeed_dtypes(outputs)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            keras_internals.step_counter(self._model, "test").assign_add(1)
        return outputs

    def _replica_metrics(self, logs):
        """Each replica reports its own metrics (reduced across replicas in `__call__`)."""
        if self._model._ipu_replica_count() == 1:  # noqa: SLF001
            return logs
        logs, self._local_metric_names = replicated_metrics.with_local_results(self._model, logs)
        return logs

    def _predict_step(self, data):
        outputs = self._model.predict_step(data)
        _check_outfeed_dtypes(outputs)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            keras_internals.step_counter(self._model, "predict").assign_add(1)
        return outputs


class _Ahead:
    """An execution running in a host thread; `result()` waits for it (and re-raises)."""

    def __init__(self, run) -> None:
        self._result = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self._thread.start()

    def _run(self, run) -> None:
        try:
            self._result = run()
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            self._error = error

    def wait(self) -> None:
        self._thread.join()

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def _check_outfeed_dtypes(outputs) -> None:
    """A step's results leave the IPU through an outfeed in the original's Keras, whose
    enqueue kernel refuses other types than the streams carry when the program is compiled
    (FailedPreconditionError, kernels/datastream/feeds.cc): e.g. an int64 argmax output."""
    dtypes = [tf.as_dtype(t.dtype) for t in nest.flatten(outputs) if hasattr(t, "dtype")]
    stream_dtypes.check(dtypes, "PopDatastreamOutfeedEnqueue with feed id 'outfeed'")


def _synthetic_outputs(outputs, steps: int, replicas: int, kind: str, every_step: bool):
    """Zeros in place of the results no outfeed brings back with synthetic data.

    As the original's keras/ipu/extensions/extensions_base.py (`_get_last_batch_results`,
    `_get_all_batch_results` with synthetic outfeeds): every step's results are zeros of
    their shapes, so fit/evaluate report zeros and predict returns zeros for every sample.
    """
    lead = [steps] + ([replicas] if replicas > 1 else [])

    def zeros(t):
        return tf.zeros(lead + list(t.shape[len(lead) :]), t.dtype)

    outputs = nest.map_structure(zeros, outputs)
    if kind == "predict" or every_step:
        return outputs
    return nest.map_structure(lambda t: t[-1], outputs)


def _inner_shapes(element) -> tuple:
    """The shapes of an execution's batches, past the dimension that stacks them."""
    return tuple(tuple(t.shape[1:]) for t in nest.flatten(element))


def _minimum_control_deps(outputs) -> list:
    """The outputs a step's counter update must wait for (as Keras does)."""
    flat = [o for o in nest.flatten(outputs) if isinstance(o, (tf.Tensor, tf.Operation))]
    return flat[:1]
