"""The ai.graphcore operator set, version 1: PopART's own operators.

Nodes are in domain `ai.graphcore` with the op types and attribute names of
the original, so the lowering (and PopART itself) can read them. Unlike the
ONNX operators, every attribute is written, defaults included: there is no
ONNX schema a reader could take defaults from. Input counts, attribute types
and defaults come from the ai.graphcore table (graphcore_ops/table.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from onnx import AttributeProto

from openipu._src.popart.builder import annotation_names
from openipu._src.popart.builder.attribute_values import make_typed_attribute
from openipu._src.popart.builder.core import debug_name
from openipu._src.popart.builder.enums import (
    CollectiveOperator,
    InitType,
    ReductionType,
    ScatterReduction,
    TensorRemapType,
    coerce_enum,
    reduction_attribute_value,
    reduction_type_of_attribute,
)
from openipu._src.popart.builder.model_context import AI_GRAPHCORE
from openipu._src.popart.builder.opsets.base import Opset, core_of
from openipu._src.popart.builder.opsets.builder_op_checks import check_conv
from openipu._src.popart.builder.settings_encoding import encode_comm_group
from openipu._src.popart.builder.tensor_info import DataType, data_type_from
from openipu._src.popart.errors import UnsupportedOpsetError, check_tensor_ids, popart_exception
from openipu._src.popart.graphcore_ops import ABSENT, GRAPHCORE_OPS, REQUIRED, op_spec
from openipu._src.popart.graphcore_ops.checks import refuse_zero_stride
from openipu._src.popart.graphcore_ops.spec import UNBOUNDED

# The methods' parameter defaults are the table's attribute defaults, ...
_DEFAULTS = {op_type: spec.defaults for op_type, spec in GRAPHCORE_OPS.items()}
# ... in the Python spelling where the original's method takes an enum or a bool.
_LOSS_REDUCTION: ReductionType = reduction_type_of_attribute(_DEFAULTS["Nll"]["reduction"])
_SCATTER_REDUCTION = ScatterReduction(_DEFAULTS["ScatterReduce"]["reduction"])
_INPUT_IS_LOG_PROBABILITY = bool(_DEFAULTS["Nll"]["inputIsLogProbability"])
_ZERO_INFINITY = bool(_DEFAULTS["Ctc"]["zeroInfinity"])
_MULTI_CONV = _DEFAULTS["MultiConv"]
_PRINT_TENSOR = _DEFAULTS["PrintTensor"]


def _operator_without_attributes(
    op_type: str, doc: str, args_have_default: bool = False
) -> Callable[..., str]:
    """A method `(args, debugContext="") -> str` for an operator with no attributes."""

    def add(self: AiGraphcore, args: Sequence[str], debug_context: Any) -> str:
        return self._op(op_type, args, debug_context)[0]

    def with_default(self: AiGraphcore, args: list[str] = [], debugContext: Any = "") -> str:  # noqa: B006, N803
        return add(self, args, debugContext)

    def without_default(self: AiGraphcore, args: list[str], debugContext: Any = "") -> str:  # noqa: N803
        return add(self, args, debugContext)

    # the original gives some of them `args=[]`
    operator: Callable[..., str] = with_default if args_have_default else without_default
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
        num_outputs: int | None = None,
        annotations: Sequence[AttributeProto] = (),
        **values: Any,
    ) -> list[str]:
        """Add a node of `op_type` as the table declares it: its input count checked, every
        attribute written (the table's default when not given, none when ABSENT and None)."""
        spec = op_spec(op_type)
        what = f"{op_type} ({spec.domain})"
        check_tensor_ids(what, args)
        low, high = spec.inputs
        if not low <= len(args) <= high:
            if low == high:
                expected = str(low)
            elif high == UNBOUNDED:
                expected = f"at least {low}"
            else:
                expected = f"{low} to {high}"
            raise popart_exception(f"{what}: expected {expected} input(s) in args, got {len(args)}")
        unknown = set(values) - {attribute.name for attribute in spec.attributes}
        if unknown:
            raise TypeError(f"{what}: no attribute(s) {sorted(unknown)} in the table")
        onnx_attributes = []
        for attribute in spec.attributes:
            value = values.get(attribute.name, attribute.default)
            if value is REQUIRED:
                raise TypeError(f"{what}: required attribute {attribute.name!r} not given")
            if value is ABSENT or (value is None and attribute.default is ABSENT):
                continue
            if isinstance(value, tuple):  # a table default
                value = list(value)
            onnx_attributes.append(
                make_typed_attribute(attribute.name, value, attribute.type, what)
            )
        if num_outputs is None:
            num_outputs = spec.outputs[0]
        return self._add_node(
            op_type, list(args), onnx_attributes + list(annotations), num_outputs, debug_context
        )

    def _unary(self, op_type: str, args: Sequence[str], debug_context: Any, **attributes) -> str:
        return self._op(op_type, args, debug_context, **attributes)[0]

    # -- operators without attributes --------------------------------------------------------

    atan2 = _operator_without_attributes(
        "Atan2", "Element-wise angle of (x, y) for args [y, x], in (-pi, pi]."
    )
    fmod = _operator_without_attributes("Fmod", "C fmod: the remainder has the dividend's sign.")
    remainder = _operator_without_attributes(
        "Remainder", "Python's %: the remainder has the divisor's sign."
    )
    bitwiseand = _operator_without_attributes(
        "BitwiseAnd", "Bitwise AND of two broadcast integer tensors.", args_have_default=True
    )
    bitwiseor = _operator_without_attributes(
        "BitwiseOr", "Bitwise OR of two broadcast integer tensors.", args_have_default=True
    )
    bitwisexor = _operator_without_attributes(
        "BitwiseXor", "Bitwise XOR of two broadcast integer tensors.", args_have_default=True
    )
    bitwisexnor = _operator_without_attributes(
        "BitwiseXnor", "Bitwise XNOR of two broadcast integer tensors.", args_have_default=True
    )
    bitwisenot = _operator_without_attributes(
        "BitwiseNot", "Bitwise NOT of an integer tensor.", args_have_default=True
    )
    detach = _operator_without_attributes(
        "Detach", "Identity in the forward pass; no gradient flows through it."
    )
    expm1 = _operator_without_attributes("Expm1", "exp(x) - 1.")
    log1p = _operator_without_attributes("Log1p", "log(1 + x).")
    gelu = _operator_without_attributes("Gelu", "GELU with the tanh approximation.")
    geluerf = _operator_without_attributes("GeluErf", "Exact GELU, with erf.")
    swish = _operator_without_attributes("Swish", "x * sigmoid(x).", args_have_default=True)
    nearbyint = _operator_without_attributes(
        "NearbyInt", "Round to the nearest integer, halves to even, keeping the float type."
    )
    round = _operator_without_attributes(
        "Round", "Round-11 (halves to even), for models on older ai.onnx opsets."
    )
    nop = _operator_without_attributes("Nop", "Identity that is never optimised away.")
    copyvarupdate = _operator_without_attributes(
        "CopyVarUpdate",
        "Set variable args[0] to args[1]; returns an alias that later ops must use.",
    )
    splineweighting = _operator_without_attributes(
        "SplineWeighting",
        "Spline-weighted features for args [input, weight, basis, weightIndex].",
        args_have_default=True,
    )

    # -- element-wise ------------------------------------------------------------------------

    def scale(self, args: list[str], scale: float, debugContext: Any = "") -> str:  # noqa: N803
        """x * scale."""
        return self._unary("Scale", args, debugContext, scale=scale)

    def scaledadd(
        self,
        args: list[str],
        scale0: float = _DEFAULTS["ScaledAdd"]["scale0"],
        scale1: float = _DEFAULTS["ScaledAdd"]["scale1"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """scale0 * T0 + scale1 * T1 for args [T0, T1, scale0?, scale1?]; scale tensors win."""
        return self._op("ScaledAdd", args, debugContext, scale0=scale0, scale1=scale1)[0]

    def incrementmod(
        self,
        args: list[str],
        increment: float,
        modulus: float,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """(x + increment) % modulus."""
        return self._unary("IncrementMod", args, debugContext, increment=increment, modulus=modulus)

    def bucketize(
        self,
        args: list[str] = [],  # noqa: B006
        right: int = _DEFAULTS["Bucketize"]["right"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Bucket index of each input value for args [input, boundaries]."""
        return self._op("Bucketize", args, debugContext, right=right)[0]

    # -- shape -------------------------------------------------------------------------------

    def reshape(self, args: Any, shape: list[int], debugContext: Any = "") -> str:  # noqa: N803
        """Reshape to an attribute shape; args is one id (or a list holding it)."""
        inputs = [args] if isinstance(args, str) else args
        return self._unary("Reshape", inputs, debugContext, shape=shape)

    def reverse(self, args: list[str], dimensions: list[int], debugContext: Any = "") -> str:  # noqa: N803
        return self._unary("Reverse", args, debugContext, dimensions=dimensions)

    def slice(
        self,
        args: list[str],
        ends: list[int],
        starts: list[int],
        axes: list[int],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Slice with attributes (note the order: ends, starts, axes)."""
        return self._unary("Slice", args, debugContext, starts=starts, ends=ends, axes=axes)

    def subsample(self, args: list[str], strides: list[int], debugContext: Any = "") -> str:  # noqa: N803
        """x[::s0, ::s1, ...]."""
        refuse_zero_stride(strides)
        return self._op("Subsample", args, debugContext, strides=strides)[0]

    def depthtospace(
        self,
        args: list[str],
        blocksize: int,
        mode: str = _DEFAULTS["DepthToSpace"]["mode"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """DepthToSpace-11 ("DCR" or "CRD") for models on older ai.onnx opsets."""
        if mode not in ("DCR", "CRD"):
            raise popart_exception(
                f"DepthToSpace (ai.graphcore): mode must be DCR or CRD, got {mode!r}"
            )
        return self._unary("DepthToSpace", args, debugContext, blocksize=blocksize, mode=mode)

    def sort(
        self,
        args: list[str] = [],  # noqa: B006
        axis: int = _DEFAULTS["Sort"]["axis"],
        descending: int = _DEFAULTS["Sort"]["descending"],
        stable: int = _DEFAULTS["Sort"]["stable"],
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """[values, indices] sorted along `axis`."""
        return self._op(
            "Sort",
            args,
            debugContext,
            axis=axis,
            descending=descending,
            stable=stable,
        )

    def reducemedian(
        self,
        args: list[str],
        axes: list[int] | None = _DEFAULTS["ReduceMedian"]["axes"],
        keepdims: int = _DEFAULTS["ReduceMedian"]["keepdims"],
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """[values, indices] of the lower median over `axes` (all axes when None)."""
        return self._op(
            "ReduceMedian",
            args,
            debugContext,
            axes=axes,
            keepdims=keepdims,
        )

    # -- dynamic slicing ---------------------------------------------------------------------

    def dynamicslice(
        self,
        args: list[str],
        axes: list[int],
        sizes: list[int],
        noOverlap: int = _DEFAULTS["DynamicSlice"]["noOverlap"],  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """tensor[offset : offset + sizes] on `axes`, for args [tensor, offset]."""
        return self._op(
            "DynamicSlice",
            args,
            debugContext,
            axes=axes,
            sizes=sizes,
            noOverlap=noOverlap,
        )[0]

    def dynamicupdate(
        self,
        args: list[str],
        axes: list[int],
        sizes: list[int],
        noOverlap: int = _DEFAULTS["DynamicUpdate"]["noOverlap"],  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """A copy of tensor with tensor[offset] = slice, for args [tensor, offset, slice]."""
        return self._op(
            "DynamicUpdate",
            args,
            debugContext,
            axes=axes,
            sizes=sizes,
            noOverlap=noOverlap,
        )[0]

    def dynamicadd(
        self, args: list[str], axes: list[int], sizes: list[int], debugContext: Any = ""
    ) -> str:  # noqa: N803
        """A copy of tensor with tensor[offset] += slice, for args [tensor, offset, slice]."""
        return self._op("DynamicAdd", args, debugContext, axes=axes, sizes=sizes)[0]

    def dynamiczero(
        self, args: list[str], axes: list[int], sizes: list[int], debugContext: Any = ""
    ) -> str:  # noqa: N803
        """A copy of tensor with tensor[offset] = 0, for args [tensor, offset]."""
        return self._op("DynamicZero", args, debugContext, axes=axes, sizes=sizes)[0]

    def sequenceslice(
        self,
        args: list[str],
        zeroUnused: int = _DEFAULTS["SequenceSlice"]["zeroUnused"],
        debugContext: Any = "",
    ) -> str:  # noqa: N803
        """args [source, destination, N, sourceOffset, destinationOffset]."""
        return self._op("SequenceSlice", args, debugContext, zeroUnused=zeroUnused)[0]

    # -- gather and scatter ------------------------------------------------------------------

    def scatterreduce(
        self,
        args: list[str],
        axis_size: int,
        axis: int = _DEFAULTS["ScatterReduce"]["axis"],
        reduction: Any = _SCATTER_REDUCTION,
        enable_index_broadcast: int = _DEFAULTS["ScatterReduce"]["enable_index_broadcast"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """out[i] = reduce(src[index == i]) for args [src, index, initial_values?]."""
        return self._op(
            "ScatterReduce",
            args,
            debugContext,
            axis_size=axis_size,
            axis=axis,
            reduction=int(coerce_enum(reduction, ScatterReduction, "ScatterReduce reduction")),
            enable_index_broadcast=enable_index_broadcast,
        )[0]

    def groupedscatterreduce(
        self,
        args: list[str],
        axis_size: int,
        axis: int = _DEFAULTS["GroupedScatterReduce"]["axis"],
        reduction: Any = _SCATTER_REDUCTION,
        group_size: int = _DEFAULTS["GroupedScatterReduce"]["group_size"],
        enable_index_broadcast: int = _DEFAULTS["GroupedScatterReduce"]["enable_index_broadcast"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """scatterreduce done separately for each group (leading dimension)."""
        what = "GroupedScatterReduce reduction"
        return self._op(
            "GroupedScatterReduce",
            args,
            debugContext,
            axis_size=axis_size,
            axis=axis,
            reduction=int(coerce_enum(reduction, ScatterReduction, what)),
            group_size=group_size,
            enable_index_broadcast=enable_index_broadcast,
        )[0]

    def groupedgather(
        self,
        args: list[str] = [],  # noqa: B006
        axis: int = _DEFAULTS["GroupedGather"]["axis"],
        group_size: int = _DEFAULTS["GroupedGather"]["group_size"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Gather done separately for each group (leading dimension), args [data, indices]."""
        return self._op(
            "GroupedGather",
            args,
            debugContext,
            axis=axis,
            group_size=group_size,
        )[0]

    # -- normalisation and nn ----------------------------------------------------------------

    def groupnormalization(
        self,
        args: list[str],
        num_groups: int,
        epsilon: float = _DEFAULTS["GroupNormalization"]["epsilon"],
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """[y, mean, var] for args [x, scale, bias]."""
        return self._op(
            "GroupNormalization",
            args,
            debugContext,
            num_groups=num_groups,
            epsilon=epsilon,
        )

    def batchnormalization(
        self,
        args: list[str],
        num_outputs: int,
        epsilon: float = _DEFAULTS["BatchNormalization"]["epsilon"],
        momentum: float = _DEFAULTS["BatchNormalization"]["momentum"],
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
            num_outputs=num_outputs,
            epsilon=epsilon,
            momentum=momentum,
        )

    def lstm(
        self,
        args: list[str],
        outputFullSequence: int = _DEFAULTS["LSTM"]["output_full_sequence"],
        debugContext: Any = "",
    ) -> list[str]:  # noqa: N803
        """PopART's LSTM: args [X, weights, biases?, initialState?, seqLens?] -> [Y, cell state]."""
        return self._op(
            "LSTM",
            args,
            debugContext,
            output_full_sequence=outputFullSequence,
        )

    def shapeddropout(
        self,
        args: list[str],
        shape: list[int],
        ratio: float = _DEFAULTS["ShapedDropout"]["ratio"],
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Dropout with a mask of `shape`, broadcast to the input."""
        return self._unary("ShapedDropout", args, debugContext, shape=shape, ratio=ratio)

    def normalize_image(
        self,
        args: list[str],
        scale: float = _DEFAULTS["NormalizeImage"]["scale"],
        debugContext: Any = "",
    ) -> str:  # noqa: N803
        """Pad a (B, H, W, 3) image to 4 channels and normalise it."""
        return self._op("NormalizeImage", args, debugContext, scale=scale)[0]

    def multiconv(
        self,
        args: list[list[str]],
        dilations: list[list[int]] = _MULTI_CONV["dilations"],
        inDilations: list[list[int]] = _MULTI_CONV["inDilations"],  # noqa: N803
        pads: list[list[int]] = _MULTI_CONV["pads"],
        outPads: list[list[int]] = _MULTI_CONV["outPads"],  # noqa: N803
        strides: list[list[int]] = _MULTI_CONV["strides"],
        availableMemoryProportions: list[float] = _MULTI_CONV["availableMemoryProportions"],  # noqa: N803
        partialsTypes: list[str] = _MULTI_CONV["partialsTypes"],  # noqa: N803
        planType: str | None = _MULTI_CONV["planType"],  # noqa: N803
        perConvReservedTiles: int | None = _MULTI_CONV["perConvReservedTiles"],  # noqa: N803
        cycleBackOff: float | None = _MULTI_CONV["cycleBackOff"],  # noqa: N803
        enableConvDithering: list[int] = _MULTI_CONV["enableConvDithering"],  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """One output per convolution; args is [[data, weight, bias?], ...].

        Inputs are flattened to three per convolution ("" for no bias) and the
        per-convolution lists of lists are concatenated.
        """
        # The original's checks and messages (willow/src/builder.cpp, AiGraphcoreOpset1::
        # multiconv, then verifyConvBase per convolution).
        name = debug_name(debugContext)
        if isinstance(args, str) or not args:
            raise popart_exception(
                f"MultiConvOp '{name}' has no input tensors. Provide at least one set of inputs"
            )
        for conv in args:
            if isinstance(conv, str) or len(conv) < 2:
                raise popart_exception(
                    f"Each convolution of MultiConvOp '{name}' must have at least two inputs - "
                    "data and weights"
                )
            if len(conv) > 3:
                raise popart_exception(
                    f"Each convolution of MultiConvOp '{name}' can have at most three inputs - "
                    "data, weights, and bias"
                )
        count = len(args)
        per_conv: dict[str, Sequence[Any]] = {
            "dilations": dilations,
            "inDilations": inDilations,
            "pads": pads,
            "outPads": outPads,
            "strides": strides,
            "availableMemoryProportions": availableMemoryProportions,
            "partialsTypes": partialsTypes,
            "enableConvDithering": enableConvDithering,
        }
        for parameter, values in per_conv.items():
            if len(values) not in (0, count):
                raise popart_exception(
                    f"For MultiConvOp '{name}', number of {parameter} parameter sets "
                    f"({len(values)}) does not match the number of input sets ({count})"
                )
        for i, conv in enumerate(args):
            window = {
                n: per_conv[n][i] if per_conv[n] else [] for n in ("strides", "pads", "dilations")
            }
            check_conv(self._known_shape, list(conv), window)
        inputs = [tensor for conv in args for tensor in (list(conv) + [""])[:3]]

        def flat(lists: list[list[int]]) -> list[int]:
            return [value for values in lists for value in values]

        return self._op(
            "MultiConv",
            inputs,
            debugContext,
            num_outputs=count,
            dilations=flat(dilations),
            inDilations=flat(inDilations),
            pads=flat(pads),
            outPads=flat(outPads),
            strides=flat(strides),
            availableMemoryProportions=availableMemoryProportions,
            partialsTypes=partialsTypes,
            planType=planType,
            perConvReservedTiles=None if perConvReservedTiles is None else perConvReservedTiles,
            cycleBackOff=cycleBackOff,
            enableConvDithering=enableConvDithering,
        )

    # -- losses ------------------------------------------------------------------------------

    def nllloss(
        self,
        args: list[str],
        reduction: Any = _LOSS_REDUCTION,
        ignoreIndex: int | None = _DEFAULTS["Nll"]["ignoreIndex"],  # noqa: N803
        inputIsLogProbability: bool = _INPUT_IS_LOG_PROBABILITY,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Negative log likelihood for args [probabilities, labels]."""
        return self._op(
            "Nll",
            args,
            debugContext,
            reduction=reduction_attribute_value(reduction, "Nll reduction"),
            ignoreIndex=ignoreIndex,
            inputIsLogProbability=int(bool(inputIsLogProbability)),
        )[0]

    def l1loss(
        self,
        args: list[str],
        lambda_: float,
        reduction: Any = _LOSS_REDUCTION,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """lambda * reduce(|x|). The original's parameter is `lambda`, a Python keyword, so
        it is `lambda_` here; pass it by position."""
        return self._unary(
            "L1",
            args,
            debugContext,
            reduction=reduction_attribute_value(reduction, "L1 reduction"),
            **{"lambda": lambda_},
        )

    def identityloss(
        self,
        args: list[str],
        reduction: Any = _LOSS_REDUCTION,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """reduce(x) as a loss."""
        return self._unary(
            "IdentityLoss",
            args,
            debugContext,
            reduction=reduction_attribute_value(reduction, "IdentityLoss reduction"),
        )

    def ctcloss(
        self,
        args: list[str],
        reduction: Any = _LOSS_REDUCTION,
        blank: int = _DEFAULTS["Ctc"]["blank"],
        outDataType: str = _DEFAULTS["Ctc"]["outDataType"],  # noqa: N803
        zeroInfinity: bool = _ZERO_INFINITY,  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """CTC loss for args [log_probs[T,N,C], targets[N,S], input_lengths[N], target_lengths[N]]."""
        out_type = data_type_from(outDataType)
        return self._op(
            "Ctc",
            args,
            debugContext,
            reduction=reduction_attribute_value(reduction, "Ctc reduction"),
            blank=blank,
            outDataType=out_type.name,
            zeroInfinity=int(bool(zeroInfinity)),
        )[0]

    def ctcbeamsearchdecoder(
        self,
        args: list[str],
        blank: int = _DEFAULTS["CtcBeamSearchDecoder"]["blank"],
        beam_width: int = _DEFAULTS["CtcBeamSearchDecoder"]["beam_width"],
        top_paths: int = _DEFAULTS["CtcBeamSearchDecoder"]["top_paths"],
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
            blank=blank,
            beam_width=beam_width,
            top_paths=top_paths,
        )

    # -- variables, tensors, control ---------------------------------------------------------

    def init(
        self,
        shape: list[int],
        data_type: Any,
        init_type: Any,
        batch_axis: Any = _DEFAULTS["Init"]["batch_axis"],
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
            shape=shape,
            data_type=int(data_type_from(data_type)),
            init_type=int(coerce_enum(init_type, InitType, "Init init_type")),
            batch_axis=batch_axis,
        )[0]

    def printtensor(
        self,
        args: list[str],
        print_gradient: int = _PRINT_TENSOR["print_gradient"],
        debugContext: Any = "",  # noqa: N803
        title: str = _PRINT_TENSOR["title"],
        summariseThreshold: int = _PRINT_TENSOR["summariseThreshold"],  # noqa: N803
        edgeItems: int = _PRINT_TENSOR["edgeItems"],  # noqa: N803
        maxLineWidth: int = _PRINT_TENSOR["maxLineWidth"],  # noqa: N803
        digits: int = _PRINT_TENSOR["digits"],
        floatFormat: int = _PRINT_TENSOR["floatFormat"],  # noqa: N803
        separator: str = _PRINT_TENSOR["separator"],
        openBracket: str = _PRINT_TENSOR["openBracket"],  # noqa: N803
        closeBracket: str = _PRINT_TENSOR["closeBracket"],  # noqa: N803
    ) -> str:
        """Print the tensor (and its gradient) when the model runs; returns the tensor."""
        return self._unary(
            "PrintTensor",
            args,
            debugContext,
            print_gradient=print_gradient,
            title=title,
            summariseThreshold=summariseThreshold,
            edgeItems=edgeItems,
            maxLineWidth=maxLineWidth,
            digits=digits,
            floatFormat=floatFormat,
            separator=separator,
            openBracket=openBracket,
            closeBracket=closeBracket,
        )

    def tensorremap(
        self,
        args: list[str],
        remap_type: Any = _DEFAULTS["TensorRemap"]["remap_type"],
        debugPrefix: Any = "",
    ) -> str:  # noqa: N803
        """A layout copy; the identity on the values."""
        remap = coerce_enum(remap_type, TensorRemapType, "TensorRemap remap_type")
        return self._unary("TensorRemap", args, debugPrefix, remap_type=int(remap))

    def abort(self, args: list[str] = [], debugContext: Any = "") -> None:  # noqa: B006, N803
        """Abort the run, always (no args) or when args[0] is non-zero."""
        self._op("Abort", args, debugContext)

    def call(
        self,
        args: list[str],
        num_outputs: int,
        callee: Any,
        debugName: Any = "",  # noqa: N803
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """Call the subgraph `callee` (from createSubgraphBuilder) with `args`; returns its outputs."""
        self._subgraph(callee, "Call")
        graph = core_of(callee).callee_proto()
        # The IR's words (willow/src/op/call.cpp; operators_test/call_test.py).
        name = debug_name(debugContext or debugName)
        for what, given, expected in (  # inputs first, as willow/src/builder.cpp checks them
            ("inputs", len(args), len(graph.input)),
            ("outputs", num_outputs, len(graph.output)),
        ):
            if given != expected:
                raise popart_exception(
                    f"For CallOp '{name}', number of {what} ({given}) does not match that of the "
                    f"callee subgraph ({expected})"
                )
        return self._op(
            "Call",
            args,
            debugContext or debugName,
            num_outputs=num_outputs,
            callee=graph,
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
            maxSequenceLengths=maxSequenceLengths,
            resultSize=resultSize,
            callbackBatchSize=callbackBatchSize,
            callback=graph,
        )[0]

    # -- collectives ---------------------------------------------------------------------------

    def _collective(
        self, op_type: str, args: list[str], collective_operator: Any, comm_group: Any, debug: Any
    ) -> str:
        # The operator and group are annotations ("__" names), not attributes of the table.
        what = f"{op_type} ({AI_GRAPHCORE})"
        annotations = []
        if collective_operator is not None:
            operator = coerce_enum(
                collective_operator, CollectiveOperator, f"{op_type} collectiveOperator"
            )
            annotations.append(
                make_typed_attribute(
                    annotation_names.COLLECTIVE_OPERATOR, int(operator), AttributeProto.INT, what
                )
            )
        if comm_group is not None:
            annotations.append(
                make_typed_attribute(
                    annotation_names.COLLECTIVE_COMM_GROUP,
                    encode_comm_group(comm_group),
                    AttributeProto.INTS,
                    what,
                )
            )
        return self._op(op_type, args, debug, annotations=annotations)[0]

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
        return self._op("SplineBasis", args, debugContext, degree=degree)


class AiGraphcoreOpset1(AiGraphcore):
    """The name the original keeps for backward compatibility; the same operators."""
