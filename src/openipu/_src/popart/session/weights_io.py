"""`PyWeightsIO`: user arrays that `readWeights` fills and `writeWeights` reads."""

from __future__ import annotations

from typing import Any

import numpy as np

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.pybind_arguments import STR, Arg, DictOf, InstanceOf, Signature, bind

# python/popart/popart_core/popart.cpp binds one constructor, (std::map<TensorId, py::array>
# weights): a dict of str to numpy arrays (py::array takes only NumPy arrays), else TypeError.
_SIGNATURES = (Signature((Arg("weights", DictOf(STR, InstanceOf(np.ndarray, "numpy.ndarray"))),)),)

# The NumPy types the original maps to its DataTypes (python/popart/shared_cpp/np_utils.cpp,
# initNpTypeMap), by str(dtype).
_NP_TYPES = frozenset(
    ("float16", "float32", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32")
    + ("int64", "bool", "[('float8_143', 'u1')]", "[('float8_152', 'u1')]")
)


class PyWeightsIO:
    """`PyWeightsIO({weight id: numpy array})`: the arrays are read and written in place.

    The original binds no method but the constructor (popart.cpp); the session reads the
    arrays through the private ones here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _, values = bind(
            "__init__", _SIGNATURES, args, kwargs,
            owner="popart_core.PyWeightsIO", constructor=True,
        )  # fmt: skip
        weights: dict[str, np.ndarray] = values["weights"]
        for weight_id, array in sorted(weights.items()):  # a std::map, in key order
            if not array.flags.c_contiguous:
                # Weights are read and written in place, so a copy would lose them
                # (python/popart/popart_core/popart.cpp, PyWeightsIO).
                raise popart_exception(
                    f"PyWeightsIO is unable to use the provided numpy output array for tensor "
                    f"'{weight_id}' as it is not c-contiguous. Please use a function like "
                    "`numpy.ascontiguousarray()` to make contiguous before passing to PyWeightsIO"
                )
        self._weights = dict(weights)

    def _contains(self, weight_id: str) -> bool:
        return weight_id in self._weights

    def _weight(self, weight_id: str) -> np.ndarray:
        """The array for a weight, as PyWeightsIO::weight gives it to the session: its dtype
        must be one the original has a DataType for (np_utils.cpp, getTensorInfo)."""
        array = self._weights[weight_id]
        if str(array.dtype) not in _NP_TYPES:
            raise popart_exception(f"No numpy type {array.dtype} registered in map to DataType")
        return array
