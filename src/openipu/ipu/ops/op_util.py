"""`tensorflow.python.ipu.ops.op_util`: the original's internal helpers that its tests call."""

from openipu._src.ops.op_util import accumulate_gradients, get_accumulator_dtype

__all__ = ["accumulate_gradients", "get_accumulator_dtype"]
