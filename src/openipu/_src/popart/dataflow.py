"""`DataFlow` and `AnchorReturnType`: how many batches a run takes and what comes back.

One `session.run` processes `batchesPerStep` batches. Each anchor (a tensor the host wants)
comes back for every batch (`All`), for the last one (`Final`), for every N-th one
(`EveryN`) or summed over them (`Sum`); the host shapes are in `session/anchors.py`.
"""

from __future__ import annotations

import builtins
import enum
from typing import Any

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.options.enums import TileSet
from openipu._src.popart.options.typed_fields import check_enum, check_int
from openipu._src.popart.pybind_arguments import (
    INT,
    STR,
    Arg,
    DictOf,
    EnumOf,
    InstanceOf,
    ListOf,
    Signature,
    bind,
)


class AnchorReturnTypeId(enum.IntEnum):
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3


class ExchangeStrategy(enum.IntEnum):
    JustInTime = 0
    OverlapInnerLoop = 1
    OverlapLoops = 2
    OverlapStep = 3


class ReplicatedStreamMode(enum.IntEnum):
    Replicate = 0  # each replica reads its own slice of the host data
    Broadcast = 1  # every replica reads the same data


_RETURN_TYPE_IDS = {member.name.upper(): member for member in AnchorReturnTypeId}
_NO_RETURN_PERIOD = "A return period should not be supplied for this anchor return type"


def _return_type_id(value: str) -> AnchorReturnTypeId:
    if value.upper() in _RETURN_TYPE_IDS:
        return _RETURN_TYPE_IDS[value.upper()]
    # The original's words exactly (willow/src/dataflow.cpp; anchorreturntype_test compares
    # them); the ids are FINAL, EVERYN, ALL and SUM, in any case.
    raise popart_exception(f"Invalid anchor return type ID supplied: {value}")


# The overloads popart.cpp binds; a value of another type is pybind11's TypeError.
_RETURN_TYPE_STRING = Arg("anchorReturnTypeString", STR)
_PLACEMENT = (
    Arg("tileSet", EnumOf(TileSet, "popart_core.TileSet"), TileSet.Compute),
    Arg(
        "exchangeStrategy",
        EnumOf(ExchangeStrategy, "popart_core.ExchangeStrategy"),
        ExchangeStrategy.JustInTime,
    ),
)
_ART_SIGNATURES = (
    Signature((_RETURN_TYPE_STRING, *_PLACEMENT)),
    Signature((_RETURN_TYPE_STRING, Arg("returnPeriod", INT), *_PLACEMENT)),
)


class AnchorReturnType:
    """`AnchorReturnType("ALL" | "FINAL" | "SUM")` or `AnchorReturnType("EVERYN", N)`.

    Optional trailing arguments: `tileSet` and `exchangeStrategy` (no effect when emulated).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _, values = bind(
            "__init__", _ART_SIGNATURES, args, kwargs,
            owner="popart_core.AnchorReturnType", constructor=True,
        )  # fmt: skip
        self._id = _return_type_id(values["anchorReturnTypeString"])
        self._tile_set = values["tileSet"]
        self._exchange = values["exchangeStrategy"]
        return_period = values.get("returnPeriod")
        # willow/src/dataflow.cpp: EVERYN needs a positive period, the others none.
        if self._id is AnchorReturnTypeId.EveryN:
            if return_period is None:
                raise popart_exception("Must specify return period with option 'EVERYN'")
            if return_period <= 0:
                raise popart_exception("Anchor return period must be greater than zero")
        elif return_period is not None:
            raise popart_exception(_NO_RETURN_PERIOD)
        self._return_period = return_period

    def id(self) -> AnchorReturnTypeId:
        return self._id

    def rp(self) -> int:
        if self._return_period is None:
            raise popart_exception(_NO_RETURN_PERIOD)
        return self._return_period

    def tileSet(self) -> TileSet:  # noqa: N802 - the original's names
        return self._tile_set

    def exchangeStrategy(self) -> ExchangeStrategy:  # noqa: N802
        return self._exchange

    def str(self) -> str:
        return self._id.name.upper()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AnchorReturnType):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (self._id, self._return_period, self._tile_set, self._exchange)

    def __repr__(self) -> builtins.str:  # `str` here is the method below
        period = f", {self._return_period}" if self._return_period is not None else ""
        return f"AnchorReturnType({self.str()!r}{period})"


_ART = InstanceOf(AnchorReturnType, "popart_core.AnchorReturnType")
_BATCHES = Arg("batchesPerStep", INT)
_BY_TENSOR = Signature((_BATCHES, Arg("anchorTensors", DictOf(STR, _ART))))
_DATAFLOW_SIGNATURES = (
    _BY_TENSOR,
    _BY_TENSOR,  # popart.cpp binds this constructor twice, so pybind11 lists it twice
    Signature(
        (
            _BATCHES,
            Arg("anchorIds", ListOf(STR)),
            Arg("anchorReturnType", _ART, None, "AnchorReturnType('All')"),
        )
    ),
)


class DataFlow:
    """`DataFlow(batchesPerStep, {id: AnchorReturnType})` or
    `DataFlow(batchesPerStep, [ids], anchorReturnType=AnchorReturnType("All"))`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _, values = bind(
            "__init__", _DATAFLOW_SIGNATURES, args, kwargs,
            owner="popart_core.DataFlow", constructor=True,
        )  # fmt: skip
        self.setBatchesPerStep(values["batchesPerStep"])
        if self._batches_per_step <= 0:
            raise popart_exception(
                f"'Batches per step' must be greater than zero, got {self._batches_per_step}"
            )
        if "anchorTensors" in values:
            self._anchors: dict[str, AnchorReturnType] = values["anchorTensors"]
        else:
            art = values["anchorReturnType"] or AnchorReturnType("All")
            self._anchors = {tensor_id: art for tensor_id in values["anchorIds"]}
        for tensor_id, art in self._anchors.items():
            if art.id() is AnchorReturnTypeId.EveryN:
                if art.rp() > self._batches_per_step:
                    raise popart_exception(
                        f"Return period must be <= to the number of batches per step (anchor "
                        f"'{tensor_id}' has return period {art.rp()}, batches per step is "
                        f"{self._batches_per_step})"
                    )
                if self._batches_per_step % art.rp():
                    raise popart_exception(
                        f"Return period must be a factor of the number of batches per step "
                        f"(anchor '{tensor_id}' has return period {art.rp()}, batches per step "
                        f"is {self._batches_per_step})"
                    )

    def anchors(self) -> list[str]:
        return list(self._anchors)

    def art(self, tensorId: str) -> AnchorReturnType:  # noqa: N803
        if tensorId not in self._anchors:
            raise popart_exception(f"Tensor {tensorId} is not an anchor")
        return self._anchors[tensorId]

    def batchesPerStep(self) -> int:  # noqa: N802 - the original's names
        return self._batches_per_step

    def setBatchesPerStep(self, batchesPerStep: int) -> None:  # noqa: N802, N803
        # Only the constructor checks the value (willow/include/popart/dataflow.hpp).
        self._batches_per_step = check_int(batchesPerStep, "DataFlow batchesPerStep")

    def isAnchored(self, tensorId: str) -> bool:  # noqa: N802, N803
        return tensorId in self._anchors

    def nAnchors(self) -> int:  # noqa: N802
        return len(self._anchors)

    def __repr__(self) -> str:
        return f"DataFlow({self._batches_per_step}, {self._anchors!r})"


class InputSettings:
    """`InputSettings(tileSet=TileSet.Compute, exchangeStrategy=JustInTime)` or
    `InputSettings(replicatedStreamMode)`: how an input reaches the device."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        mode = kwargs.pop("replicatedStreamMode", None)
        if args and isinstance(args[0], ReplicatedStreamMode):
            mode, args = args[0], args[1:]
        tile_set = kwargs.pop("tileSet", args[0] if args else TileSet.Compute)
        exchange = kwargs.pop(
            "exchangeStrategy", args[1] if len(args) > 1 else ExchangeStrategy.JustInTime
        )
        if kwargs or len(args) > 2:
            raise TypeError(f"InputSettings got unexpected arguments {list(kwargs)}")
        self._tile_set = check_enum(tile_set, TileSet, "InputSettings tileSet")
        self._exchange = check_enum(exchange, ExchangeStrategy, "InputSettings exchangeStrategy")
        self._mode = check_enum(
            ReplicatedStreamMode.Replicate if mode is None else mode,
            ReplicatedStreamMode,
            "InputSettings replicatedStreamMode",
        )

    def tileSet(self) -> TileSet:  # noqa: N802 - the original's names
        return self._tile_set

    def exchangeStrategy(self) -> ExchangeStrategy:  # noqa: N802
        return self._exchange

    def replicatedStreamMode(self) -> ReplicatedStreamMode:  # noqa: N802
        return self._mode

    def __repr__(self) -> str:
        return (
            f"InputSettings(tileSet={self._tile_set.name}, exchangeStrategy="
            f"{self._exchange.name}, replicatedStreamMode={self._mode.name})"
        )
