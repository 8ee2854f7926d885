"""The `TF_POPLAR_FLAGS` environment variable, which programs use to switch IPU behaviours."""

from __future__ import annotations

import os


def poplar_flags() -> list[str]:
    return os.environ.get("TF_POPLAR_FLAGS", "").split()


def use_synthetic_data() -> bool:
    """`--use_synthetic_data`: no data moves between host and device."""
    return "--use_synthetic_data" in poplar_flags()


def use_ipu_model() -> bool:
    """`--use_ipu_model`: the program targets the IPU model (a simulator) rather than hardware."""
    return "--use_ipu_model" in poplar_flags()
