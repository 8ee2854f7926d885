"""The ai.graphcore operator set, version 1: PopART's own operators.

Nodes are in domain `ai.graphcore` with the op types and attribute names of
the original, so the lowering (and PopART itself) can read them. Unlike the
ONNX operators, every attribute is written, defaults included: there is no
schema a reader could take defaults from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onnx import AttributeProto

from openipu._src.popart.builder import annotation_names
from openipu._src.popart.builder.attribute_values import make_typed_attribute
from openipu._src.popart.builder.enums import (
    CollectiveOperator,
    InitType,
    ReductionType,
    ScatterReduction,
    TensorRemapType,
    coerce_enum,
    reduction_attribute_value,
)
from openipu._src.popart.builder.model_context import AI_GRAPHCORE
from openipu._src.popart.builder.opsets.base import Opset
from openipu._src.popart.builder.settings_encoding import encode_comm_group
from openipu._src.popart.builder.tensor_info import DataType, data_type_from
from openipu._src.popart.errors import UnsupportedOpsetError, popart_exception

_UNBOUNDED = 2**31 - 1


@dataclass(frozen=True)
class _Typed:
    """An attribute value with the ONNX type it must be written as."""

    attribute_type: int
    value: Any


# Tag a value with the attribute type it is written as: `_float(scale)`.
_int = functools.partial(_Typed, AttributeProto.INT)
_float = functools.partial(_Typed, AttributeProto.FLOAT)
_string = functools.partial(_Typed, AttributeProto.STRING)
_ints = functools.partial(_Typed, AttributeProto.INTS)
_floats = functools.partial(_Typed, AttributeProto.FLOATS)
_strings = functools.partial(_Typed, AttributeProto.STRINGS)
_graph = functools.partial(_Typed, AttributeProto.GRAPH)


def _operator_without_attributes(
    op_type: str, num_inputs: int, doc: str, args_have_default: bool = False
) -> Callable[..., str]:
    """A method `(args, debugContext="") -> str` for an operator with no attributes."""

    def add(self: AiGraphcore, args: Sequence[str], debug_context: Any) -> str:
        return self._op(op_type, args, debug_context, (num_inputs, num_inputs))[0]

    if args_have_default:  # the original gives some of them `args=[]`

        def operator(self: AiGraphcore, args: list[str] = [], debugContext: Any = "") -> str:  # noqa: B006, N803
            return add(self, args, debugContext)
    else:

        def operator(self: AiGraphcore, args: list[str], debugContext: Any = "") -> str:  # noqa: N803
            return add(self, args, debugContext)

    operator.__name__ = operator.__qualname__ = op_type.lower()
    operator.__doc__ = doc
    return operator


class AiGraphcore(Opset):
    """The ai.graphcore operators; `AiGraphcore(builder, version)` with version 1."""

    domain = AI_GRAPHCORE

    def __init__(self, builder: Any, version: int = 1) -> None:
        if version != 1:
            raise UnsupportedOpsetError(
                f"Unsupported or unrecognized ai.graphcore version: {version}"
            )
        super().__init__(builder, version)

    def _op(
        self,
        op_type: str,
        args: Sequence[str],
        debug_context: Any,
        arity: tuple[int, int],
        num_outputs: int = 1,
        **attributes: _Typed | None,
    ) -> list[str]:
        what = f"{op_type} (ai.graphcore)"
        if isinstance(args, str) or not isinstance(args, Sequence):
            raise popart_exception(f"{what}: args must be a list of tensor ids, got {args!r}")
        low, high = arity
        if not low <= len(args) <= high:
            if low == high:
                expected = str(low)
            elif high == _UNBOUNDED:
                expected = f"at least {low}"
            else:
                expected = f"{low} to {high}"
            raise popart_exception(f"{what}: expected {expected} input(s) in args, got {len(args)}")
        onnx_attributes = [
            make_typed_attribute(name, typed.value, typed.attribute_type, what)
            for name, typed in attributes.items()
            if typed is not None
        ]
        return self._add_node(op_type, list(args), onnx_attributes, num_outputs, debug_context)

    def _unary(self, op_type: str, args: Sequence[str], debug_context: Any, **attributes) -> str:
        return self._op(op_type, args, debug_context, (1, 1), **attributes)[0]

    # -- operators without attributes --------------------------------------------------------

    atan2 = _operator_without_attributes(
        "Atan2", 2, "Element-wise angle of (x, y) for args [y, x], in (-pi, pi]."
    )
    fmod = _operator_without_attributes("Fmod", 2, "C fmod: the remainder has the dividend's sign.")
    remainder = _operator_without_attributes(
        "Remainder", 2, "Python's %: the remainder has the divisor's sign."
    )
    bitwiseand = _operator_without_attributes(
        "BitwiseAnd", 2, "Bitwise AND of two broadcast integer tensors.", args_have_default=True
    )
    bitwiseor = _operator_without_attributes(
        "BitwiseOr", 2, "Bitwise OR of two broadcast integer tensors.", args_have_default=True
    )
    bitwisexor = _operator_without_attributes(
        "BitwiseXor", 2, "Bitwise XOR of two broadcast integer tensors.", args_have_default=True
    )
    bitwisexnor = _operator_without_attributes(
        "BitwiseXnor", 2, "Bitwise XNOR of two broadcast integer tensors.", args_have_default=True
    )
    bitwisenot = _operator_without_attributes(
        "BitwiseNot", 1, "Bitwise NOT of an integer tensor.", args_have_default=True
    )
    detach = _operator_without_attributes(
        "Detach", 1, "Identity in the forward pass; no gradient flows through it."
    )
    expm1 = _operator_without_attributes("Expm1", 1, "exp(x) - 1.")
    log1p = _operator_without_attributes("Log1p", 1, "log(1 + x).")
    gelu = _operator_without_attributes("Gelu", 1, "GELU with the tanh approximation.")
    geluerf = _operator_without_attributes("GeluErf", 1, "Exact GELU, with erf.")
    swish = _operator_without_attributes("Swish", 1, "x * sigmoid(x).", args_have_default=True)
    nearbyint = _operator_without_attributes(
        "NearbyInt", 1, "Round to the nearest integer, halves to even, keeping the float type."
    )
    round = _operator_without_attributes(
        "Round", 1, "Round-11 (halves to even), for models on older ai.onnx opsets."
    )
    nop = _operator_without_attributes("Nop", 1, "Identity that is never optimised away.")
    copyvarupdate = _operator_without_attributes(
        "CopyVarUpdate",
        2,
        "Set variable args[0] to args[1]; returns an alias that later ops must use.",
    )
    splineweighting = _operator_without_attributes(
        "SplineWeighting",
        4,
        "Spline-weighted features for args [input, weight, basis, weightIndex].",
        args_have_default=True,
    )

    # -- element-wise ------------------------------------------------------------------------

    def scale(self, args: list[str], scale: float, debugContext: Any = "") -> str:  # noqa: N803
        """x * scale."""
        return self._unary("Scale", args, debugContext, scale=_float(scale))

    def scaledadd(
        self,
        args: list[str],
        scale0: float = 1.0,
        scale1: float = 1.0,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """scale0 * T0 + scale1 * T1 for args [T0, T1, scale0?, scale1?]; scale tensors win."""
        return self._op(
            "ScaledAdd", args, debugContext, (2, 4), scale0=_float(scale0), scale1=_float(scale1)
        )[0]

    def incrementmod(
        self,
        args: list[str],
        increment: float,
        modulus: float,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """(x + increment) % modulus."""
        return self._unary(
            "IncrementMod", args, debugContext, increment=_float(increment), modulus=_float(modulus)
        )

    def bucketize(self, args: list[str] = [], right: int = 0, debugContext: Any = "") -> str:  # noqa: B006, N803
        """Bucket index of each input value for args [input, boundaries]."""
        return self._op("Bucketize", args, debugContext, (2, 2), right=_int(right))[0]

    # -- shape -------------------------------------------------------------------------------

    def reshape(self, args: Any, shape: list[int], debugContext: Any = "") -> str:  # noqa: N803
        """Reshape to an attribute shape; args is one id (or a list holding it)."""
        inputs = [args] if isinstance(args, str) else args
        return self._unary("Reshape", inputs, debugContext, shape=_ints(shape))

    def reverse(self, args: list[str], dimensions: list[int], debugContext: Any = "") -> str:  # noqa: N803
        return self._unary("Reverse", args, debugContext, dimensions=_ints(dimensions))

    def slice(
        self,
        args: list[str],
        ends: list[int],
        starts: list[int],
        axes: list[int],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Slice with attributes (note the order: ends, starts, axes)."""
        return self._unary(
            "Slice", args, debugContext, starts=_ints(starts), ends=_ints(ends), axes=_ints(axes)
        )

    def subsample(self, args: list[str], strides: list[int], debugContext: Any = "") -> str:  # noqa: N803
        """x[::s0, ::s1, ...]."""
        return self._op("Subsample", args, debugContext, (1, _UNBOUNDED), strides=_ints(strides))[0]

    def depthtospace(
        self,
        args: list[str],
        blocksize: int,
        mode: str = "DCR",
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """DepthToSpace-11 ("DCR" or "CRD") for models on older ai.onnx opsets."""
        if mode not in ("DCR", "CRD"):
            raise popart_exception(
                f"DepthToSpace (ai.graphcore): mode must be DCR or CRD, got {mode!r}"
            )
        return self._unary(
            "DepthToSpace", args, debugContext, blocksize=_int(blocksize), mode=_string(mode)
        )

    def sort(
        self,
        args: list[str] = [],  # noqa: B006
        axis: int = -1,
        descending: int = 0,
        stable: int = 0,
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """[values, indices] sorted along `axis`."""
        return self._op(
            "Sort",
            args,
            debugContext,
            (1, 1),
            num_outputs=2,
            axis=_int(axis),
            descending=_int(descending),
            stable=_int(stable),
        )

    def reducemedian(
        self,
        args: list[str],
        axes: list[int] | None = None,
        keepdims: int = 1,
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """[values, indices] of the lower median over `axes` (all axes when None)."""
        return self._op(
            "ReduceMedian",
            args,
            debugContext,
            (1, 1),
            num_outputs=2,
            axes=None if axes is None else _ints(axes),
            keepdims=_int(keepdims),
        )

    # -- dynamic slicing ---------------------------------------------------------------------

    def dynamicslice(
        self,
        args: list[str],
        axes: list[int],
        sizes: list[int],
        noOverlap: int = 0,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """tensor[offset : offset + sizes] on `axes`, for args [tensor, offset]."""
        return self._op(
            "DynamicSlice",
            args,
            debugContext,
            (2, 2),
            axes=_ints(axes),
            sizes=_ints(sizes),
            noOverlap=_int(noOverlap),
        )[0]

    def dynamicupdate(
        self,
        args: list[str],
        axes: list[int],
        sizes: list[int],
        noOverlap: int = 0,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """A copy of tensor with tensor[offset] = slice, for args [tensor, offset, slice]."""
        return self._op(
            "DynamicUpdate",
            args,
            debugContext,
            (3, 3),
            axes=_ints(axes),
            sizes=_ints(sizes),
            noOverlap=_int(noOverlap),
        )[0]

    def dynamicadd(
        self, args: list[str], axes: list[int], sizes: list[int], debugContext: Any = ""
    ) -> str:  # noqa: N803
        """A copy of tensor with tensor[offset] += slice, for args [tensor, offset, slice]."""
        return self._op(
            "DynamicAdd", args, debugContext, (3, 3), axes=_ints(axes), sizes=_ints(sizes)
        )[0]

    def dynamiczero(
        self, args: list[str], axes: list[int], sizes: list[int], debugContext: Any = ""
    ) -> str:  # noqa: N803
        """A copy of tensor with tensor[offset] = 0, for args [tensor, offset]."""
        return self._op(
            "DynamicZero", args, debugContext, (2, 2), axes=_ints(axes), sizes=_ints(sizes)
        )[0]

    def sequenceslice(self, args: list[str], zeroUnused: int = 0, debugContext: Any = "") -> str:  # noqa: N803
        """args [source, destination, N, sourceOffset, destinationOffset]."""
        return self._op("SequenceSlice", args, debugContext, (5, 5), zeroUnused=_int(zeroUnused))[0]

    # -- gather and scatter ------------------------------------------------------------------

    def scatterreduce(
        self,
        args: list[str],
        axis_size: int,
        axis: int = -1,
        reduction: Any = ScatterReduction.Sum,
        enable_index_broadcast: int = 1,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """out[i] = reduce(src[index == i]) for args [src, index, initial_values?]."""
        return self._op(
            "ScatterReduce",
            args,
            debugContext,
            (2, 3),
            axis_size=_int(axis_size),
            axis=_int(axis),
            reduction=_int(
                int(coerce_enum(reduction, ScatterReduction, "ScatterReduce reduction"))
            ),
            enable_index_broadcast=_int(enable_index_broadcast),
        )[0]

    def groupedscatterreduce(
        self,
        args: list[str],
        axis_size: int,
        axis: int = -1,
        reduction: Any = ScatterReduction.Sum,
        group_size: int = 1,
        enable_index_broadcast: int = 1,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """scatterreduce done separately for each group (leading dimension)."""
        what = "GroupedScatterReduce reduction"
        return self._op(
            "GroupedScatterReduce",
            args,
            debugContext,
            (2, 3),
            axis_size=_int(axis_size),
            axis=_int(axis),
            reduction=_int(int(coerce_enum(reduction, ScatterReduction, what))),
            group_size=_int(group_size),
            enable_index_broadcast=_int(enable_index_broadcast),
        )[0]

    def groupedgather(
        self,
        args: list[str] = [],  # noqa: B006
        axis: int = 0,
        group_size: int = 1,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Gather done separately for each group (leading dimension), args [data, indices]."""
        return self._op(
            "GroupedGather",
            args,
            debugContext,
            (2, 2),
            axis=_int(axis),
            group_size=_int(group_size),
        )[0]

    # -- normalisation and nn ----------------------------------------------------------------

    def groupnormalization(
        self,
        args: list[str],
        num_groups: int,
        epsilon: float = 9.999999747378752e-06,
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """[y, mean, var] for args [x, scale, bias]."""
        return self._op(
            "GroupNormalization",
            args,
            debugContext,
            (3, 3),
            num_outputs=3,
            num_groups=_int(num_groups),
            epsilon=_float(epsilon),
        )

    def batchnormalization(
        self,
        args: list[str],
        num_outputs: int,
        epsilon: float = 9.999999747378752e-06,
        momentum: float = 0.8999999761581421,
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """BatchNormalization whose running variance uses N-1 (like PyTorch)."""
        if not 1 <= num_outputs <= 5:
            raise popart_exception(
                f"BatchNormalization (ai.graphcore): num_outputs must be 1 to 5, got {num_outputs}"
            )
        return self._op(
            "BatchNormalization",
            args,
            debugContext,
            (5, 5),
            num_outputs=num_outputs,
            epsilon=_float(epsilon),
            momentum=_float(momentum),
        )

    def lstm(
        self, args: list[str], outputFullSequence: int = 1, debugContext: Any = ""
    ) -> list[str]:  # noqa: N803
        """PopART's LSTM: args [X, weights, biases?, initialState?, seqLens?] -> [Y, cell state]."""
        return self._op(
            "LSTM",
            args,
            debugContext,
            (2, 5),
            num_outputs=2,
            output_full_sequence=_int(outputFullSequence),
        )

    def shapeddropout(
        self,
        args: list[str],
        shape: list[int],
        ratio: float = 0.5,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Dropout with a mask of `shape`, broadcast to the input."""
        return self._unary(
            "ShapedDropout", args, debugContext, shape=_ints(shape), ratio=_float(ratio)
        )

    def normalize_image(self, args: list[str], scale: float = 1.0, debugContext: Any = "") -> str:  # noqa: N803
        """Pad a (B, H, W, 3) image to 4 channels and normalise it."""
        return self._op("NormalizeImage", args, debugContext, (1, 3), scale=_float(scale))[0]

    def multiconv(
        self,
        args: list[list[str]],
        dilations: list[list[int]] = [],  # noqa: B006
        inDilations: list[list[int]] = [],  # noqa: B006, N803
        pads: list[list[int]] = [],  # noqa: B006
        outPads: list[list[int]] = [],  # noqa: B006, N803
        strides: list[list[int]] = [],  # noqa: B006
        availableMemoryProportions: list[float] = [],  # noqa: B006, N803
        partialsTypes: list[str] = [],  # noqa: B006, N803
        planType: str | None = None,  # noqa: N803
        perConvReservedTiles: int | None = None,  # noqa: N803
        cycleBackOff: float | None = None,  # noqa: N803
        enableConvDithering: list[int] = [],  # noqa: B006, N803
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """One output per convolution; args is [[data, weight, bias?], ...].

        Inputs are flattened to three per convolution ("" for no bias) and the
        per-convolution lists of lists are concatenated.
        """
        what = "MultiConv (ai.graphcore)"
        if (
            isinstance(args, str)
            or not args
            or any(isinstance(c, str) or not 2 <= len(c) <= 3 for c in args)
        ):
            raise popart_exception(
                f"{what}: args must be a list of [data, weight, bias?], got {args!r}"
            )
        count = len(args)
        per_conv = {
            "dilations": dilations,
            "inDilations": inDilations,
            "pads": pads,
            "outPads": outPads,
            "strides": strides,
            "availableMemoryProportions": availableMemoryProportions,
            "partialsTypes": partialsTypes,
            "enableConvDithering": enableConvDithering,
        }
        for name, values in per_conv.items():
            if len(values) not in (0, count):
                raise popart_exception(
                    f"{what}: {name} must be empty or have one entry per convolution ({count}), "
                    f"got {len(values)}"
                )
        inputs = [tensor for conv in args for tensor in (list(conv) + [""])[:3]]

        def flat(lists: list[list[int]]) -> list[int]:
            return [value for values in lists for value in values]

        return self._op(
            "MultiConv",
            inputs,
            debugContext,
            (0, _UNBOUNDED),
            num_outputs=count,
            dilations=_ints(flat(dilations)),
            inDilations=_ints(flat(inDilations)),
            pads=_ints(flat(pads)),
            outPads=_ints(flat(outPads)),
            strides=_ints(flat(strides)),
            availableMemoryProportions=_floats(availableMemoryProportions),
            partialsTypes=_strings(partialsTypes),
            planType=None if planType is None else _string(planType),
            perConvReservedTiles=None
            if perConvReservedTiles is None
            else _int(perConvReservedTiles),
            cycleBackOff=None if cycleBackOff is None else _float(cycleBackOff),
            enableConvDithering=_ints(enableConvDithering),
        )

    # -- losses ------------------------------------------------------------------------------

    def nllloss(
        self,
        args: list[str],
        reduction: Any = ReductionType.Mean,
        ignoreIndex: int | None = None,  # noqa: N803
        inputIsLogProbability: bool = False,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Negative log likelihood for args [probabilities, labels]."""
        return self._op(
            "Nll",
            args,
            debugContext,
            (2, 2),
            reduction=_string(reduction_attribute_value(reduction, "Nll reduction")),
            ignoreIndex=None if ignoreIndex is None else _int(ignoreIndex),
            inputIsLogProbability=_int(int(bool(inputIsLogProbability))),
        )[0]

    def l1loss(
        self,
        args: list[str],
        lambda_: float,
        reduction: Any = ReductionType.Mean,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """lambda * reduce(|x|). The original's parameter is `lambda`, a Python keyword, so
        it is `lambda_` here; pass it by position."""
        return self._unary(
            "L1",
            args,
            debugContext,
            reduction=_string(reduction_attribute_value(reduction, "L1 reduction")),
            **{"lambda": _float(lambda_)},
        )

    def identityloss(
        self,
        args: list[str],
        reduction: Any = ReductionType.Mean,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """reduce(x) as a loss."""
        return self._unary(
            "IdentityLoss",
            args,
            debugContext,
            reduction=_string(reduction_attribute_value(reduction, "IdentityLoss reduction")),
        )

    def ctcloss(
        self,
        args: list[str],
        reduction: Any = ReductionType.Mean,
        blank: int = 0,
        outDataType: str = "UNDEFINED",  # noqa: N803
        zeroInfinity: bool = False,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """CTC loss for args [log_probs[T,N,C], targets[N,S], input_lengths[N], target_lengths[N]]."""
        out_type = data_type_from(outDataType)
        return self._op(
            "Ctc",
            args,
            debugContext,
            (4, 4),
            reduction=_string(reduction_attribute_value(reduction, "Ctc reduction")),
            blank=_int(blank),
            outDataType=_string(out_type.name),
            zeroInfinity=_int(int(bool(zeroInfinity))),
        )[0]

    def ctcbeamsearchdecoder(
        self,
        args: list[str],
        blank: int = 0,
        beam_width: int = 100,
        top_paths: int = 1,
        debug_context: Any = "",
    ) -> list[str]:
        """[labelProbs, labelLengths, decodedLabels] for args [logProbs, dataLengths]."""
        if top_paths > beam_width:
            raise popart_exception(
                f"CtcBeamSearchDecoder (ai.graphcore): top_paths ({top_paths}) must not exceed "
                f"beam_width ({beam_width})"
            )
        return self._op(
            "CtcBeamSearchDecoder",
            args,
            debug_context,
            (2, 2),
            num_outputs=3,
            blank=_int(blank),
            beam_width=_int(beam_width),
            top_paths=_int(top_paths),
        )

    # -- variables, tensors, control ---------------------------------------------------------

    def init(
        self,
        shape: list[int],
        data_type: Any,
        init_type: Any,
        batch_axis: Any = -1,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """A new tensor of `shape`: uninitialised (InitType.NoInit) or zero (InitType.Zero).

        `data_type` is a DataType (stored as its PopART number, like the original).
        """
        if isinstance(batch_axis, str) or hasattr(batch_axis, "getPathName"):
            # The (shape, data_type, init_type, debugContext) overload.
            batch_axis, debugContext = -1, batch_axis
        if isinstance(data_type, int) and not isinstance(data_type, DataType):
            data_type = DataType(data_type)
        return self._op(
            "Init",
            [],
            debugContext,
            (0, 0),
            shape=_ints(shape),
            data_type=_int(int(data_type_from(data_type))),
            init_type=_int(int(coerce_enum(init_type, InitType, "Init init_type"))),
            batch_axis=_int(batch_axis),
        )[0]

    def printtensor(
        self,
        args: list[str],
        print_gradient: int = 1,
        debugContext: Any = "",  # noqa: N803
        title: str = "",
        summariseThreshold: int = 1000,  # noqa: N803
        edgeItems: int = 3,  # noqa: N803
        maxLineWidth: int = 75,  # noqa: N803
        digits: int = 8,
        floatFormat: int = 0,  # noqa: N803
        separator: str = " ",
        openBracket: str = "[",  # noqa: N803
        closeBracket: str = "]",  # noqa: N803
    ) -> str:
        """Print the tensor (and its gradient) when the model runs; returns the tensor."""
        return self._unary(
            "PrintTensor",
            args,
            debugContext,
            print_gradient=_int(print_gradient),
            title=_string(title),
            summariseThreshold=_int(summariseThreshold),
            edgeItems=_int(edgeItems),
            maxLineWidth=_int(maxLineWidth),
            digits=_int(digits),
            floatFormat=_int(floatFormat),
            separator=_string(separator),
            openBracket=_string(openBracket),
            closeBracket=_string(closeBracket),
        )

    def tensorremap(self, args: list[str], remap_type: Any = 0, debugPrefix: Any = "") -> str:  # noqa: N803
        """A layout copy; the identity on the values."""
        remap = coerce_enum(remap_type, TensorRemapType, "TensorRemap remap_type")
        return self._unary("TensorRemap", args, debugPrefix, remap_type=_int(int(remap)))

    def abort(self, args: list[str] = [], debugContext: Any = "") -> None:  # noqa: B006, N803
        """Abort the run, always (no args) or when args[0] is non-zero."""
        self._op("Abort", args, debugContext, (0, 1), num_outputs=0)

    def call(
        self,
        args: list[str],
        num_outputs: int,
        callee: Any,
        debugName: Any = "",  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """Call the subgraph `callee` (from createSubgraphBuilder) with `args`; returns its outputs."""
        graph = self._subgraph(callee, "Call")
        if len(args) != len(graph.input):
            raise popart_exception(
                f"Call (ai.graphcore): {len(args)} args for subgraph '{graph.name}' "
                f"with {len(graph.input)} input(s)"
            )
        self._check_num_outputs("Call", num_outputs, graph, len(graph.output))
        return self._op(
            "Call",
            args,
            debugContext or debugName,
            (0, _UNBOUNDED),
            num_outputs=num_outputs,
            callee=_graph(graph),
        )

    def packedDataBlock(  # noqa: N802 - the original's name
        self,
        args: list[str],
        maxSequenceLengths: list[int],  # noqa: N803
        resultSize: int,  # noqa: N803
        callbackBatchSize: int,  # noqa: N803
        callback: Any,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Run the `callback` subgraph over packed sequences."""
        graph = self._subgraph(callback, "PackedDataBlock")
        return self._op(
            "PackedDataBlock",
            args,
            debugContext,
            (1, _UNBOUNDED),
            maxSequenceLengths=_ints(maxSequenceLengths),
            resultSize=_int(resultSize),
            callbackBatchSize=_int(callbackBatchSize),
            callback=_graph(graph),
        )[0]

    # -- collectives ---------------------------------------------------------------------------

    def _collective(
        self, op_type: str, args: list[str], collective_operator: Any, comm_group: Any, debug: Any
    ) -> str:
        operator = None
        if collective_operator is not None:
            what = f"{op_type} collectiveOperator"
            operator = _int(int(coerce_enum(collective_operator, CollectiveOperator, what)))
        group = None if comm_group is None else _ints(encode_comm_group(comm_group))
        return self._op(
            op_type,
            args,
            debug,
            (1, 1),
            **{
                annotation_names.COLLECTIVE_OPERATOR: operator,
                annotation_names.COLLECTIVE_COMM_GROUP: group,
            },
        )[0]

    def replicatedallreduce(
        self,
        args: list[str],
        collectiveOperator: Any = None,  # noqa: N803
        commGroup: Any = None,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """All-reduce across replicas (Add when no operator is given). Deprecated in PopART."""
        return self._collective(
            "ReplicatedAllReduce", args, collectiveOperator, commGroup, debugContext
        )

    def replicatedreducescatter(
        self,
        args: list[str],
        collectiveOperator: Any = None,  # noqa: N803
        commGroup: Any = None,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Reduce-scatter across replicas (Add when no operator is given)."""
        return self._collective(
            "ReplicatedReduceScatter", args, collectiveOperator, commGroup, debugContext
        )

    # -- splines -------------------------------------------------------------------------------

    def splinebasis(self, args: list[str], degree: int, debugContext: Any = "") -> list[str]:  # noqa: N803
        """[basis, weightIndex] for args [pseudo, kernel_size, is_open_spline]."""
        return self._op(
            "SplineBasis", args, debugContext, (3, 3), num_outputs=2, degree=_int(degree)
        )


class AiGraphcoreOpset1(AiGraphcore):
    """The name the original keeps for backward compatibility; the same operators."""
