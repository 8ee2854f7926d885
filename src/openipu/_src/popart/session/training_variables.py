"""The device variables of a training session besides its weights and optimizer state.

- Non-const hyper-parameters: one float32 vector holding every (hyper-parameter, weight)
  value that is not const, so a step reads them all at once and `updateOptimizerFromHost`
  writes them all at once. Const values are compiled into the program.
- The loss scaling, when it is non-const: `lossScaling_<type>` (the host writes it).
- With automatic loss scaling (`loss_scaling.py`): the factor it multiplies the loss scaling
  by (`lossScaleUpdateFactor`), the histogram counts accumulated over a group of
  micro-batches (the original's `Accum___autoLossScaleStats`), and a counter of weight
  updates done (its update period needs it). The micro-batches accumulated so far in a group
  are counted by the engine's gradient accumulation.

Created in the replicas' scope, so each replica has its copy (they stay equal).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from openipu._src.popart.optimizers.optimizer import Optimizer, Value


class TrainingVariables:
    def __init__(self, optimizer: Optimizer, weight_ids: list[str], automatic_loss_scaling: bool):
        self._slots: dict[tuple[str, str], int] = {}
        for key in optimizer.hyper_parameter_keys:
            for weight_id in weight_ids:
                if not optimizer.value(key, weight_id).isConst():
                    self._slots[(key, weight_id)] = len(self._slots)
        self._optimizer = optimizer
        self._weight_ids = list(weight_ids)
        self._automatic = automatic_loss_scaling
        self._variable_loss_scaling = automatic_loss_scaling or not optimizer.loss_scaling.isConst()
        self.hyper_parameters: tf.Variable | None = None
        self.loss_scaling: tf.Variable | None = None
        self.update_factor: tf.Variable | None = None
        self.statistics: tf.Variable | None = None
        self.updates: tf.Variable | None = None

    def place_on(self, host_device: str) -> None:
        with tf.init_scope(), tf.device(host_device):
            self.hyper_parameters = tf.Variable(
                self._host_hyper_parameters(self._optimizer),
                trainable=False,
                name="optimizer_hyper_parameters",
            )
            if self._variable_loss_scaling:
                self.loss_scaling = tf.Variable(
                    self._optimizer.getLossScalingVal(), dtype=tf.float32, trainable=False,
                    name="lossScaling",
                )  # fmt: skip
            self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="weight_updates")
            if self._automatic:
                self.update_factor = tf.Variable(
                    1.0, dtype=tf.float32, trainable=False, name="lossScaleUpdateFactor"
                )
                self.statistics = tf.Variable(
                    np.zeros([2], np.float32), trainable=False, name="autoLossScaleStats"
                )

    def _host_hyper_parameters(self, optimizer: Optimizer) -> np.ndarray:
        values = np.zeros([len(self._slots)], np.float32)
        for (key, weight_id), index in self._slots.items():
            values[index] = optimizer.value(key, weight_id).val()
        return values

    def update_from(self, optimizer: Optimizer) -> None:
        """The host writes a replacement optimizer's non-const values (already checked)."""
        self._optimizer = optimizer
        if self.hyper_parameters is not None:
            self.hyper_parameters.assign(self._host_hyper_parameters(optimizer))
        if self.loss_scaling is not None and not optimizer.loss_scaling.isConst():
            self.loss_scaling.assign(optimizer.getLossScalingVal())

    def reader(self) -> Callable[[str, str], Value]:
        """Inside a step: `read(key, weight_id)`, the value a weight's update uses."""
        vector = tf.convert_to_tensor(self.hyper_parameters) if self._slots else None
        optimizer = self._optimizer

        def read(key: str, weight_id: str) -> Value:
            index = self._slots.get((key, weight_id))
            if index is None or vector is None:  # no slots, no vector
                return optimizer.value(key, weight_id).val()
            return vector[index]

        return read

    def loss_scaling_value(self) -> Value:
        """Inside a step: the loss scaling (a float when it is const)."""
        if self.loss_scaling is None:
            return self._optimizer.getLossScalingVal()
        return tf.convert_to_tensor(self.loss_scaling)

    def final_loss_scaling_value(self) -> Value:
        """Inside a step: the loss scaling applied, times automatic loss scaling's factor
        (the original's `finalLossScale`)."""
        if self.update_factor is None:
            return self.loss_scaling_value()
        return tf.convert_to_tensor(self.loss_scaling) * tf.convert_to_tensor(self.update_factor)

    def all(self) -> list[tf.Variable]:
        """Every variable (once placed)."""
        candidates = [
            self.hyper_parameters,
            self.loss_scaling,
            self.update_factor,
            self.statistics,
            self.updates,
        ]
        return [variable for variable in candidates if variable is not None]

    def host_loss_scaling(self) -> float:
        if self.loss_scaling is None:
            return self._optimizer.getLossScalingVal()
        return float(self.loss_scaling.numpy())
