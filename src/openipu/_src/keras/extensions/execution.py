"""Keras' train/test/predict functions as engine programs.

Each function takes the iterator of an `IPUDataHandler` (one stack of
`steps_per_execution` batches per `next`) and runs the whole stack as one
`LoopProgram`: one compiled region, one host call per execution. Called
outside `fit`/`evaluate`/`predict` (for example by `train_on_batch`), they
take a single batch and run a one-step program.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine.program import LoopProgram


class ExecutionFunction:
    """A Keras `train_function`/`test_function`/`predict_function` backed by the engine."""

    def __init__(self, model, kind: str) -> None:
        self._model = model
        self._kind = kind
        self._programs: dict[int, LoopProgram] = {}

    def __call__(self, iterator):
        element = next(iterator)
        if not self._model._ipu.executing:  # noqa: SLF001 - a single batch from *_on_batch
            element = nest.map_structure(lambda t: tf.expand_dims(t, 0), element)
        steps = int(nest.flatten(element)[0].shape[0])
        outputs = self._program(steps)(element)
        if self._kind == "predict":
            # Keras expects the predictions of an execution concatenated along the batch.
            return nest.map_structure(_merge_leading_dims, outputs)
        return outputs

    def _program(self, steps: int) -> LoopProgram:
        program = self._programs.get(steps)
        if program is None:
            step = {
                "train": self._train_step,
                "test": self._test_step,
                "predict": self._predict_step,
            }[self._kind]
            program = LoopProgram(
                step,
                steps,
                device_ordinal=self._model._ipu.device_ordinal,  # noqa: SLF001
                outputs="all" if self._kind == "predict" else "last",
                name=f"{self._model.name}_{self._kind}",
            )
            self._programs[steps] = program
        return program

    def _train_step(self, data):
        model = self._model
        with model._ipu_gradient_accumulation():  # noqa: SLF001
            outputs = model.train_step(data)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            model._train_counter.assign_add(1)  # noqa: SLF001
        return outputs

    def _test_step(self, data):
        outputs = self._model.test_step(data)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            self._model._test_counter.assign_add(1)  # noqa: SLF001
        return outputs

    def _predict_step(self, data):
        outputs = self._model.predict_step(data)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            self._model._predict_counter.assign_add(1)  # noqa: SLF001
        return outputs


def _merge_leading_dims(stacked: tf.Tensor) -> tf.Tensor:
    shape = tf.shape(stacked)
    return tf.reshape(stacked, tf.concat([[shape[0] * shape[1]], shape[2:]], axis=0))


def _minimum_control_deps(outputs) -> list:
    """The outputs a step's counter update must wait for (as Keras does)."""
    flat = [o for o in nest.flatten(outputs) if isinstance(o, (tf.Tensor, tf.Operation))]
    return flat[:1]
