"""How a host embedding is trained: `HostEmbeddingOptimizerSpec` and its SGD+GA variant.

The gradients of the looked-up rows are computed on the device; the host adds
`-learning_rate * gradient` into the rows (SGD). The spec's methods build the
instructions `HostEmbedding` uses, as the original's did
(tensorflow/python/ipu/ops/embedding_ops.py), so that a subclass may change them.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops.host_embedding import host_table


class HostEmbeddingOptimizerSpec:
    """Description of the Host Embedding optimizer (SGD).

    The gradients are computed on the device, the update happens on the host;
    a learning rate of 0 makes the embedding constant (lookups have no gradient).
    """

    def __init__(self, learning_rate, optimizer_name: str | None = None) -> None:
        self._learning_rate = learning_rate
        self._optimizer_name = host_table.SGD if optimizer_name is None else optimizer_name

    def get_learning_rate(self):
        """The SGD learning rate."""
        return self._learning_rate

    def _accumulation_factor(self) -> int:
        return 1

    def _state(self, embedding_tensor, name: str) -> host_table.HostTableState:
        return host_table.state_for(name, embedding_tensor, self._accumulation_factor())

    def create_lookup_instruction(
        self, embedding_tensor, indices, slot_vars, partition_strategy, name
    ) -> tf.Tensor:
        """The rows `indices` (flat) of the host table, as a tensor of the device program.

        `partition_strategy` only splits a remote-buffer table between replicas; on one
        host both strategies give the same rows.
        """
        del slot_vars, partition_strategy
        state = self._state(embedding_tensor, name)
        if self.get_learning_rate() == 0:
            return state.lookup(indices)
        # As the original: a trainable scalar stands for the table in the program, so that
        # the optimizer applying its (zero) gradient also runs the host update.
        # Made outside the compiled region, as variables the program initialises are.
        with (
            host_table.outside_region(),
            tf.compat.v1.variable_scope(name, reuse=tf.compat.v1.AUTO_REUSE),
        ):
            dummy = tf.compat.v1.get_variable(
                "__dummy", shape=[], dtype=embedding_tensor.dtype, trainable=True
            )
        learning_rate, optimizer_name = self.get_learning_rate(), self._optimizer_name

        rows = state.lookup(indices)

        # The rows' gradient goes to the host (the update), not back into the program.
        @tf.custom_gradient
        def trainable_lookup(dummy_value, rows):
            def update(rows_gradient):
                scaled = -tf.cast(learning_rate, rows_gradient.dtype) * rows_gradient
                update_op = state.update(indices, scaled, optimizer_name)
                with tf.control_dependencies([update_op]):
                    return tf.zeros_like(dummy_value), None

            return tf.identity(rows), update

        return trainable_lookup(tf.convert_to_tensor(dummy), rows)

    def create_register_instruction(self, embedding_tensor, slot_vars, name):
        """The instruction that connects the host table (entering `HostEmbedding.register`)."""
        del slot_vars
        return self._state(embedding_tensor, name).register(self._optimizer_name)

    def create_deregister_instruction(self, embedding_tensor, slot_vars, name):
        """The instruction that disconnects the host table (leaving `HostEmbedding.register`)."""
        del slot_vars
        return self._state(embedding_tensor, name).deregister()

    def create_slot_variables(self, embedding_tensor, name) -> list:
        """SGD needs no slot variables."""
        del embedding_tensor, name
        return []


class HostEmbeddingSGDGAOptimizerSpec(HostEmbeddingOptimizerSpec):
    """SGD whose host updates accumulate over `accumulation_factor` mini-batches.

    The updates of `accumulation_factor` mini-batches (each `-learning_rate *
    gradient`, summed) are added into the table together; until then lookups see
    the table as it was. A factor of 1 (or less) is plain SGD, as in the original.
    """

    def __init__(self, learning_rate, accumulation_factor) -> None:
        if accumulation_factor > 1:
            super().__init__(learning_rate, host_table.SGD_WITH_ACCUMULATION)
        else:
            super().__init__(learning_rate)
        self._accumulation_factor_value = accumulation_factor

    def get_accumulation_factor(self):
        """The number of mini-batches whose updates are added into the table together."""
        return self._accumulation_factor_value

    def _accumulation_factor(self) -> int:
        return int(self._accumulation_factor_value)
