"""Anchors on the host: their buffer shapes, and what a run's stacked values become.

The device returns an anchor's value for every micro-batch of a run and every replica (bps
batches of af accumulation steps each). On the host it takes the shape of its return type:

| return type | host shape                    | values                                    |
|-------------|-------------------------------|-------------------------------------------|
| All         | [bps, af, rf, *shape]         | every batch                               |
| EveryN (N)  | [bps / N, af, rf, *shape]     | micro-batches N-1, 2N-1, ... (every N-th) |
| Final       | [rf, *shape]                  | the last batch                            |
| Sum         | [rf, *shape]                  | the sum over the bps and af batches       |

with each of the bps / af / rf dimensions dropped when it is 1 (never the tensor's own).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openipu._src.popart.dataflow import AnchorReturnType, AnchorReturnTypeId
from openipu._src.popart.session.tensor_types import TensorSignature


def host_shape(
    tensor_shape: list[int],
    batches_per_step: int,
    accumulation_factor: int,
    replication_factor: int,
) -> list[int]:
    """[bps, af, rf, *shape] without the bps / af / rf dimensions of size 1."""
    outer = [batches_per_step, accumulation_factor, replication_factor]
    return [dim for dim in outer if dim != 1] + list(tensor_shape)


@dataclass(frozen=True)
class AnchorPlan:
    """One anchor of a session: what it is, how it returns, and its host buffer."""

    tensor_id: str
    art: AnchorReturnType
    signature: TensorSignature
    batches_per_step: int
    accumulation_factor: int
    replication_factor: int

    @property
    def returned_batches(self) -> int:
        """How many batches (per replica and accumulation step) reach the host per run."""
        kind = self.art.id()
        if kind is AnchorReturnTypeId.All:
            return self.batches_per_step
        if kind is AnchorReturnTypeId.EveryN:
            return self.batches_per_step // self.art.rp()
        return 1

    @property
    def accumulation_on_host(self) -> int:
        # Final and Sum fold the accumulation steps away; All and EveryN keep them.
        if self.art.id() in (AnchorReturnTypeId.Final, AnchorReturnTypeId.Sum):
            return 1
        return self.accumulation_factor

    @property
    def shape(self) -> list[int]:
        return host_shape(
            list(self.signature.shape),
            self.returned_batches,
            self.accumulation_on_host,
            self.replication_factor,
        )

    @property
    def dtype(self) -> np.dtype:
        return self.signature.numpy_dtype

    def check_return_period(self) -> None:
        if self.art.id() is AnchorReturnTypeId.EveryN and self.batches_per_step % self.art.rp():
            raise RuntimeError(
                f"Anchor '{self.tensor_id}': return period {self.art.rp()} is not a factor of "
                f"the {self.batches_per_step} batches per step"
            )

    def empty_array(self) -> np.ndarray:
        self.check_return_period()
        return np.empty(self.shape, self.dtype)

    def from_steps(self, steps: np.ndarray) -> np.ndarray:
        """The host value of a run from its micro-batches' values, shaped [bps, af, rf, *shape]
        (or [1, 1, rf, *shape] when only the last micro-batch's came back)."""
        kind = self.art.id()
        if kind is AnchorReturnTypeId.Final:
            selected = steps[-1, -1]
        elif kind is AnchorReturnTypeId.Sum:
            selected = steps.sum(axis=(0, 1), dtype=steps.dtype)
        elif kind is AnchorReturnTypeId.EveryN:
            # The original counts the period in micro-batches (accumulation steps in
            # order): with bps 2, af 2 and N 2 it returns the second micro-batch of each
            # batch (its anchorreturntype_test, test_simple_training_session); the host
            # buffer keeps the documented [bps / N, af, ...] shape, the same count.
            period = self.art.rp()
            micro_batches = steps.reshape(-1, *steps.shape[2:])
            selected = micro_batches[period - 1 :: period]
        else:
            selected = steps
        return np.asarray(selected).reshape(self.shape)

    def per_batch(self, host_value: np.ndarray) -> list[np.ndarray]:
        """The host value split into the values of the returned batches (callback stepio)."""
        count = self.returned_batches * self.accumulation_on_host * self.replication_factor
        return list(np.asarray(host_value).reshape([count, *self.signature.shape]))
