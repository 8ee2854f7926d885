"""What an executable takes and gives: named tensors of fixed shape and dtype."""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf


class Shape(tuple[int, ...]):
    """A shape of known dimensions; `dimensions` as the original's signature protos name
    them (`signature().inputs[i].shape.dimensions`, ops/embedded_runtime.py)."""

    @property
    def dimensions(self) -> list[int]:
        return list(self)


@dataclasses.dataclass(frozen=True)
class TensorSignature:
    """One input or output of an executable (the original's signature entries: a name, a
    shape of known dimensions, an element type)."""

    name: str
    dtype: str  # a TensorFlow dtype name ("float32"), so the record is plain JSON
    shape: tuple[int, ...]

    @classmethod
    def of(cls, name: str, spec: tf.TensorSpec | tf.Tensor) -> TensorSignature:
        shape = tf.TensorShape(spec.shape)
        if not shape.is_fully_defined():
            raise ValueError(
                f"An executable's tensors need fully defined shapes: {name!r} has shape {shape}"
            )
        return cls(name, tf.as_dtype(spec.dtype).name, Shape(shape.as_list()))

    @property
    def tf_dtype(self) -> tf.DType:
        return tf.as_dtype(self.dtype)

    def spec(self, leading: tuple[int, ...] = ()) -> tf.TensorSpec:
        """Its TensorSpec, with `leading` dimensions before its own (a stack of them)."""
        return tf.TensorSpec([*leading, *self.shape], self.tf_dtype, name=self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TensorSignature:
        return cls(
            str(values["name"]), str(values["dtype"]), Shape(int(d) for d in values["shape"])
        )


@dataclasses.dataclass(frozen=True)
class StreamSignature:
    """An executable's interface.

    - `inputs`: given once when a runtime starts (the compiled function's arguments, and
      its variables when they were not frozen into it);
    - `streamed_inputs`: one infeed element per call;
    - `streamed_outputs`: one outfeed element per call;
    - `outputs`: what the compiled function returns at the end of a run (the original's
      signature lists them; a call gives back only the streamed outputs).
    """

    inputs: tuple[TensorSignature, ...]
    streamed_inputs: tuple[TensorSignature, ...]
    streamed_outputs: tuple[TensorSignature, ...]
    outputs: tuple[TensorSignature, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [s.to_dict() for s in self.inputs],
            "streamed_inputs": [s.to_dict() for s in self.streamed_inputs],
            "streamed_outputs": [s.to_dict() for s in self.streamed_outputs],
            "outputs": [s.to_dict() for s in self.outputs],
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> StreamSignature:
        def entries(key: str) -> tuple[TensorSignature, ...]:
            return tuple(TensorSignature.from_dict(v) for v in values.get(key, ()))

        return cls(
            entries("inputs"),
            entries("streamed_inputs"),
            entries("streamed_outputs"),
            entries("outputs"),
        )
