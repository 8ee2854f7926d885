"""The option types of `pipelining_ops.pipeline` (spec 21.15.7) and their validation.

Schedules, recomputation modes and per-stage Poplar options decide how a
pipeline is laid out on real IPUs; they change memory and speed, not the
numbers. They are validated here and kept for the cost model.
"""

from __future__ import annotations

import enum
import inspect


class PipelineSchedule(enum.Enum):
    """How the stages of a pipeline are interleaved on its IPUs."""

    Grouped = 0
    Interleaved = 1
    Sequential = 2


class RecomputationMode(enum.Enum):
    """How activations are recomputed in a training pipeline (when recomputation is on)."""

    Auto = 0
    RecomputeThenBackpropagate = 1
    RecomputeAndBackpropagateInterleaved = 2


class PipelineStageOptions:
    """Poplar options (convolution, matmul, slice) for one stage of a pipeline."""

    def __init__(self, convolution_options=None, matmul_options=None, slice_options=None) -> None:
        # As the original (ops/pipelining_ops.py:372-384): a falsy value means "no options".
        convolution_options = convolution_options if convolution_options else {}
        if not isinstance(convolution_options, dict):
            raise TypeError("PipelineStageOptions.convolution_options must be dictionary.")
        matmul_options = matmul_options if matmul_options else {}
        if not isinstance(matmul_options, dict):
            raise TypeError("PipelineStageOptions.matmul_options must be dictionary.")
        slice_options = slice_options if slice_options else {}
        if not isinstance(slice_options, dict):
            raise TypeError("PipelineStageOptions.slice_options must be dictionary.")
        # The original puts every option and value in a protocol buffer's string fields
        # (:386-401, option_flag.proto): a str, or bytes in UTF-8, else protobuf fails.
        for options in (convolution_options, matmul_options, slice_options):
            for option, value in options.items():
                _proto_string(option)
                _proto_string(value)
        self.convolution_options = dict(convolution_options)
        self.matmul_options = dict(matmul_options)
        self.slice_options = dict(slice_options)

    def get_proto(self) -> dict:
        """The options as one dictionary (the original returned a protocol buffer)."""
        return {
            "convolution_options": dict(self.convolution_options),
            "matmul_options": dict(self.matmul_options),
            "slice_options": dict(self.slice_options),
        }

    def __repr__(self) -> str:
        return f"PipelineStageOptions({self.get_proto()})"


def _proto_string(value: object) -> None:
    """Refuses what a protocol buffer string field refuses, with protobuf 3's messages."""
    if isinstance(value, str):
        return
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(
                f"{value!r} has type bytes, but isn't valid UTF-8 encoding. Non-UTF-8 strings "
                "must be converted to unicode objects before being added."
            ) from None
        return
    raise TypeError(
        f"{value!r} has type {type(value).__name__}, but expected one of: bytes, unicode"
    )


def check_enum(value, enum_type: type[enum.Enum], name: str, default):
    if value is None:
        return default
    if not isinstance(value, enum_type):
        # The original's message first (pipelining_ops.py).
        raise TypeError(
            f"The given {name} is not a member of the {enum_type.__name__} enumeration "
            f"({', '.join(enum_type.__members__)}): got {value!r}."
        )
    return value


def check_stage_options_list(value, name: str, stages: int | None):
    """A list with one PipelineStageOptions per stage (or None)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of PipelineStageOptions, got {value!r}")
    if stages is not None and len(value) != stages:
        # Starts with the original's message (pipelining_ops.py).
        raise ValueError(
            f"{name} must be a list or a tuple of PipelineStageOptions objects of length "
            f"{stages} (same number as the number of computational stages) but is "
            f"{len(value)}: {name} has {len(value)} entries but the pipeline has {stages} "
            "stages: give one PipelineStageOptions per stage"
        )
    for item in value:
        if not isinstance(item, PipelineStageOptions):
            raise TypeError(f"{name} must only hold PipelineStageOptions, got {item!r}")
    return list(value)


# `set_pipelining_options` passes its other keyword arguments to `pipeline`; these are
# the ones a Keras model sets itself. `name` is not one: the original passes it on
# (keras/ipu/extensions/extensions_base.py:956-969).
_SET_BY_KERAS = {
    "computational_stages",
    "gradient_accumulation_count",
    "repeat_count",
    "inputs",
    "infeed_queue",
    "outfeed_queue",
    "optimizer_function",
    "device_mapping",
    "accumulate_outfeed",
    "reduction_method",
}


def check_keras_pipelining_kwargs(kwargs: dict) -> dict:
    """Validates `set_pipelining_options(**pipelining_kwargs)` against `pipeline`'s arguments."""
    # import cycle: pipelining_ops imports this module
    from openipu._src.pipelining import pipelining_ops

    accepted = set(inspect.signature(pipelining_ops.pipeline).parameters) - _SET_BY_KERAS
    unknown = set(kwargs) - accepted
    if unknown:
        # The original passes them on to `pipeline` when it builds the training function,
        # which refuses an unknown one as Python does.
        raise TypeError(f"pipeline() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    checked = dict(kwargs)
    if "pipeline_schedule" in checked:
        check_enum(checked["pipeline_schedule"], PipelineSchedule, "pipeline_schedule", None)
    if "recomputation_mode" in checked:
        check_enum(checked["recomputation_mode"], RecomputationMode, "recomputation_mode", None)
    for name in (
        "forward_propagation_stages_poplar_options",
        "backward_propagation_stages_poplar_options",
    ):
        if name in checked:
            check_stage_options_list(checked[name], name, None)
    if checked.get("weight_update_poplar_options") is not None and not isinstance(
        checked["weight_update_poplar_options"], PipelineStageOptions
    ):
        raise TypeError(
            "weight_update_poplar_options to be of type PipelineStageOptions: "
            "weight_update_poplar_options must be a PipelineStageOptions"
        )
    return checked
