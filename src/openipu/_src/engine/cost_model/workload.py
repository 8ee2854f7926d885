"""What a compiled program does, as the cost model needs it: pure data, no TensorFlow.

A `Workload` lists the program's operations in schedule order (the order they were
built, a topological order), the tensors they produce and consume, the variables it
holds and the bytes it streams. It is extracted once when a program is compiled
(`tf_workload`, `onnx_workload`) and kept with the compiled program's record, so the
estimate can be made (again, for other options) without the graph.
"""

from __future__ import annotations

import dataclasses
import enum


class VariableKind(enum.Enum):
    WEIGHT = "variable"
    OPTIMIZER_STATE = "optimizer_state"
    ACCUMULATOR = "accumulator"


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation, run `repeats` times per step (inside loops of known trip count)."""

    name: str
    type: str
    ipu: int  # the IPU of one replica it runs on (its pipeline stage's or shard's)
    flops: int  # floating-point operations of one run (a multiply-add counts 2)
    matmul: bool  # runs on the accumulating matrix product units (matmul, convolution)
    half: bool  # computes in 16 bits
    input_bytes: int
    output_bytes: int
    inputs: tuple[str, ...]  # ids of the tensors it reads
    outputs: tuple[tuple[str, int], ...]  # (id, bytes) of the tensors it produces
    repeats: int = 1
    collective_bytes: int = 0  # bytes it all-reduces / gathers across replicas


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    bytes: int
    kind: VariableKind
    ipu: int
    remote: bool = False  # offloaded to streaming memory (remote buffers)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One step of a program (one batch, or one gradient-accumulation micro-batch)."""

    operations: tuple[Operation, ...]
    variables: tuple[Variable, ...]
    ipus_per_replica: int = 1
    stream_bytes_per_step: int = 0  # host <-> device bytes of one step (infeed + outfeed)
    stages: int = 1  # pipeline stages (1: not pipelined)
    # A pipeline's schedule ("Grouped", "Interleaved", "Sequential") and gradient
    # accumulation count, as the program's pipeline declares them ("" / 0: none).
    pipeline_schedule: str = ""
    gradient_accumulation_count: int = 0
    offload_optimizer_state: bool = False  # the program keeps it in streaming memory

    def largest_variables(self, count: int = 10) -> list[Variable]:
        return sorted(self.variables, key=lambda v: v.bytes, reverse=True)[:count]
