"""`DataFlow` and `AnchorReturnType`: how many batches a run takes and what comes back.

One `session.run` processes `batchesPerStep` batches. Each anchor (a tensor the host wants)
comes back for every batch (`All`), for the last one (`Final`), for every N-th one
(`EveryN`) or summed over them (`Sum`); the host shapes are in `session/anchors.py`.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Mapping
from typing import Any

from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.options.enums import TileSet
from openipu._src.popart.options.typed_fields import check_enum, check_int


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


def _return_type_id(value: Any) -> AnchorReturnTypeId:
    if isinstance(value, AnchorReturnTypeId):
        return value
    if isinstance(value, str) and value.upper() in _RETURN_TYPE_IDS:
        return _RETURN_TYPE_IDS[value.upper()]
    # The original's words exactly (willow/src/dataflow.cpp; anchorreturntype_test compares
    # them); the ids are FINAL, EVERYN, ALL and SUM, in any case.
    raise popart_exception(f"Invalid anchor return type ID supplied: {value}")


class AnchorReturnType:
    """`AnchorReturnType("ALL" | "FINAL" | "SUM")` or `AnchorReturnType("EVERYN", N)`.

    Optional trailing arguments: `tileSet` and `exchangeStrategy` (no effect when emulated).
    """

    def __init__(self, anchorReturnTypeString: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N803
        self._id = _return_type_id(anchorReturnTypeString)
        return_period = None
        if args and not isinstance(args[0], TileSet):
            return_period, args = args[0], args[1:]
        return_period = kwargs.pop("returnPeriod", return_period)
        tile_set = kwargs.pop("tileSet", args[0] if args else TileSet.Compute)
        exchange = kwargs.pop(
            "exchangeStrategy", args[1] if len(args) > 1 else ExchangeStrategy.JustInTime
        )
        if kwargs or len(args) > 2:
            raise TypeError(
                f"AnchorReturnType got unexpected arguments {list(kwargs) or list(args[2:])}"
            )
        self._tile_set = check_enum(tile_set, TileSet, "AnchorReturnType tileSet")
        self._exchange = check_enum(exchange, ExchangeStrategy, "AnchorReturnType exchangeStrategy")
        if self._id is AnchorReturnTypeId.EveryN:
            if return_period is None:
                raise popart_exception("Must specify return period with option 'EVERYN'")
            return_period = check_int(return_period, "AnchorReturnType returnPeriod")
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


class DataFlow:
    """`DataFlow(batchesPerStep, {id: AnchorReturnType})` or
    `DataFlow(batchesPerStep, [ids], anchorReturnType=AnchorReturnType("All"))`."""

    def __init__(
        self,
        batchesPerStep: int,  # noqa: N803 - the original's names
        anchorTensors: Any = None,  # noqa: N803
        anchorReturnType: AnchorReturnType | None = None,  # noqa: N803
        **kwargs: Any,
    ) -> None:
        anchors = kwargs.pop("anchorIds", anchorTensors)
        if kwargs:
            raise TypeError(f"DataFlow got unexpected arguments {sorted(kwargs)}")
        self.setBatchesPerStep(batchesPerStep)
        self._anchors = self._anchor_map(anchors, anchorReturnType)
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

    @staticmethod
    def _anchor_map(anchors: Any, default: AnchorReturnType | None) -> dict[str, AnchorReturnType]:
        if anchors is None:
            anchors = {}
        if isinstance(anchors, Mapping):
            if default is not None:
                raise TypeError("DataFlow: give a return type per anchor or one for a list of ids")
            items = list(anchors.items())
        elif isinstance(anchors, (list, tuple)):
            art = AnchorReturnType("All") if default is None else default
            items = [(tensor_id, art) for tensor_id in anchors]
        else:
            raise OptionTypeError(
                "DataFlow anchors must be a dict {tensor id: AnchorReturnType} or a list of "
                f"tensor ids, got {anchors!r} ({type(anchors).__name__})"
            )
        result: dict[str, AnchorReturnType] = {}
        for tensor_id, art in items:
            if not isinstance(tensor_id, str):
                raise OptionTypeError(
                    f"DataFlow anchor ids must be str, got {tensor_id!r} ({type(tensor_id).__name__})"
                )
            if not isinstance(art, AnchorReturnType):
                raise OptionTypeError(
                    f"DataFlow anchor '{tensor_id}': the return type must be an "
                    f"AnchorReturnType, got {art!r} ({type(art).__name__})"
                )
            result[tensor_id] = art
        return result

    def anchors(self) -> list[str]:
        return list(self._anchors)

    def art(self, tensorId: str) -> AnchorReturnType:  # noqa: N803
        if tensorId not in self._anchors:
            raise popart_exception(f"Tensor {tensorId} is not an anchor")
        return self._anchors[tensorId]

    def batchesPerStep(self) -> int:  # noqa: N802 - the original's names
        return self._batches_per_step

    def setBatchesPerStep(self, batchesPerStep: int) -> None:  # noqa: N802, N803
        batches = check_int(batchesPerStep, "DataFlow batchesPerStep")
        if batches <= 0:
            raise popart_exception(f"'Batches per step' must be greater than zero, got {batches}")
        self._batches_per_step = batches

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
