"""The program's own state in an executable: the engine variables it reads and updates.

A training pipeline compiled into an executable accumulates gradients over its
mini-batches in engine variables (`engine_variables`), which the original keeps in the
chip's memory: they are not start-up inputs or outputs of its signature. The executable
file holds their values when it was built (one section, a NumPy `.npz` archive without
pickles), and the runner makes its own variables of them, which the program updates run
after run.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

SECTION = "program_state.npz"


def to_bytes(values: Sequence[np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, *[np.asarray(v) for v in values])
    return buffer.getvalue()


def from_bytes(data: bytes) -> list[np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return [archive[f"arr_{i}"] for i in range(len(archive.files))]
