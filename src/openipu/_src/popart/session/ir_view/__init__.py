"""A description of the IR a session would have in the original PopART, for
`Session._serializeIr(IrSerializationFormat.JSON)`.

openipu lowers ONNX straight to TensorFlow and has no PopART IR of its own; this package
builds, from the session's model and options, the ops the original's IR would hold once
prepared (willow/src/ir.cpp, prepareImpl), in the original's JSON form, and writes its .dot
files (`dot`). One module per step of the original:

- `from_onnx`: the forward ops, constants folded (not anchored ones);
- `patterns`: the pre-alias patterns the session enables;
- `auto_virtual_graph`: `VirtualGraphMode.Auto`'s split (without virtual graphs the
  builder's `__ipu_number` annotations are dropped);
- `matmul`: the MatMul patterns (forward ones among the pre-alias patterns, grad ones
  after autodiff);
- `autodiff`: the grad ops of a training session;
- `optimizer`: gradient clipping, automatic loss scaling's Histograms, the weight update;
- `pipeline`: pipeline stages, recomputation, Stash and Restore ops;
- `inter_ipu_copy`: IpuCopy ops between virtual graphs;
- `streaming_memory`: RemoteLoad/RemoteStore of off-chip variables;
- `host_io`: Init/HostLoad/HostStore ops with `useHostCopyOps`;
- `outline`, `inplace`: outlining and in-place variants.

Limits (where the description depends on what openipu does not model):
- ops appear in the order the steps add them, not the original's scheduler's order;
- of the patterns that rewrite grad ops or lower ops for Poplar only the MatMul ones
  (`matmul`) are applied (not the other *GradOp patterns, nor optimizer-coefficient ops);
- outlining is a simplified form of the original's (see `outline`);
- execution phases, batch serialisation and explicit pipelining (main loops) add nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import onnx

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering.dtypes import TF_TO_ONNX
from openipu._src.popart.options.patterns import PATTERNS
from openipu._src.popart.session.ir_view import (
    auto_virtual_graph,
    autodiff,
    debug_infos,
    dot,
    from_onnx,
    host_io,
    inplace,
    inter_ipu_copy,
    matmul,
    optimizer,
    outline,
    patterns,
    pipeline,
    streaming_memory,
)
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor, to_json
from openipu._src.popart.session.ir_view.optimizer import IrTraining
from openipu._src.popart.session.tensor_types import TensorSignature
from openipu._src.popart.utility import debug_info_stream

__all__ = [
    "IrRequest",
    "IrTraining",
    "Placement",
    "check_excluded_patterns",
    "dot",
    "record_debug_infos",
    "serialise",
    "tensor_records",
    "write_dot_files",
]

# Pattern names the original knows besides those `Patterns` can switch (its AddPatternName
# registrations: willow/src/patterns/*.cpp, willow/src/transforms/*.cpp).
_OTHER_PATTERN_NAMES = frozenset(
    "AdamDecompose AdaptiveDecompose ContiguateIpuCopyIndicesPattern InPlace SGD0Decompose "
    "SGD1Decompose SGD2Decompose UpdateInplacePrioritiesForIpu ViewSimplifyPattern".split()
)


def check_excluded_patterns(model: onnx.ModelProto) -> None:
    """The original refuses an unknown pattern name given to `Builder.excludePatterns` when
    it builds the op (willow/src/op.cpp, Op settings; PatternNames::contains)."""
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.HasField("g") else attribute.graphs)
                if attribute.name != names.EXCLUDE_PATTERNS:
                    continue
                for name in (s.decode() for s in attribute.strings):
                    if name not in PATTERNS and name not in _OTHER_PATTERN_NAMES:
                        raise popart_exception(
                            f"Invalid pattern name '{name}' in Op::excludePatterns"
                        )


@dataclass
class IrRequest:
    """What a session tells the description about itself."""

    model: onnx.ModelProto
    tensors: dict[str, IrTensor]
    anchors: set[str]
    enabled_patterns: set[str]
    constant_weights: bool
    outlining: bool
    outline_threshold: float = 1.0
    explicit_recomputation: bool = False
    pipeline_recomputation: bool = False  # pipelining with RecomputationType.Pipeline
    loss: str | None = None  # the loss tensor of a training session
    training: IrTraining | None = None  # what a training session adds
    placement: Placement = field(default_factory=lambda: Placement())
    host_copy_ops: bool = False  # SessionOptions.useHostCopyOps
    host_copy_priority: float = 0.0
    off_chip: set[str] = field(default_factory=set)  # variables in streaming memory


@dataclass
class Placement:
    """How the session spreads its ops over IPUs (SessionOptions)."""

    virtual_graphs: bool = False  # VirtualGraphMode other than Off
    auto_virtual_graphs: bool = False  # VirtualGraphMode.Auto
    num_ipus: int = 1  # per replica
    split_ratios: tuple[float, ...] = ()
    accumulating: bool = False
    pipelining: bool = False


def tensor_records(signatures: Mapping[str, TensorSignature]) -> dict[str, IrTensor]:
    records = {}
    for name, signature in signatures.items():
        onnx_type = TF_TO_ONNX.get(signature.dtype)
        data_type = "UNDEFINED" if onnx_type is None else onnx.TensorProto.DataType.Name(onnx_type)
        records[name] = IrTensor(name, tuple(signature.shape), data_type)
    return records


def _main_graph_name(model: onnx.ModelProto) -> str:
    # An unnamed builder graph is "maingraph" (willow/src/ir.cpp, Ir::serialise).
    name = model.graph.name
    return "maingraph" if not name or name.startswith("BuilderGraph") else name


def _pre_alias_patterns(request: IrRequest) -> list[tuple[str, patterns.Pattern]]:
    table: list[tuple[str, patterns.Pattern]] = [
        ("RandomNormalLikeOpPattern", patterns.like_to_plain),
        ("RandomUniformLikeOpPattern", patterns.like_to_plain),
        ("ZerosLikeOpPattern", patterns.like_to_plain),
        ("OpToIdentity", patterns.op_to_identity),
        ("PreUniRepl", patterns.pre_uni_repl),
        ("PostNRepl", patterns.post_n_repl),
        ("TransposeToIdentityOrReshapePattern", patterns.transpose_to_identity),
        ("MatMulOp", matmul.decompose_matmul),
    ]
    return [(name, pattern) for name, pattern in table if name in request.enabled_patterns]


def _grad_patterns(request: IrRequest) -> list[tuple[str, patterns.Pattern]]:
    """The pre-alias patterns the original applies again after autodiff that the description
    models on grad ops (willow/src/ir.cpp, prepareImpl)."""
    table: list[tuple[str, patterns.Pattern]] = [
        ("MatMulLhsGradOp", matmul.decompose_grad),
        ("MatMulRhsGradOp", matmul.decompose_grad),
    ]
    return [(name, pattern) for name, pattern in table if name in request.enabled_patterns]


def _anchored_gradients(request: IrRequest) -> set[str]:
    """Tensors whose gradient the data flow anchors: the original grows grad ops for every
    tensor on a path to the loss and prunes those nothing needs, so an anchored gradient
    (of a stream input, say) keeps its grad ops."""
    prefix = autodiff.gradient("")
    return {a.removeprefix(prefix) for a in request.anchors if a.startswith(prefix)}


Checkpoint = Callable[[str, list[IrGraph], dict[str, IrTensor]], None]


def _ordered(built: from_onnx.OnnxIr) -> list[IrGraph]:
    # The original lists its graphs by id: the main graph's (empty) id first.
    return [built.graphs[-1], *sorted(built.graphs[:-1], key=lambda g: g.name)]


def _recomputed(graph: IrGraph) -> list[IrOp]:
    """With explicit recomputation, each forward op marked Recompute is cloned for the
    backward pass, its outputs renamed `<id>__re` (willow/src/transforms/explicitrecompute.cpp,
    willow/src/tensornames.cpp); clones read the clones of recomputed producers."""
    renamed: dict[str, str] = {}
    clones = []
    for op in graph.ops:
        if op.is_grad or op.attributes.get("recompute") != "YES":
            continue
        outputs = {i: f"{t}__re" for i, t in op.outputs.items()}
        renamed.update({t: outputs[i] for i, t in op.outputs.items()})
        clones.append(
            IrOp(
                type=op.type,
                name=op.name,
                inputs={i: renamed.get(t, t) for i, t in op.inputs.items()},
                outputs=outputs,
                attributes={**op.attributes, "recompute": "NO"},
                is_grad=True,
            )
        )
    return clones


@dataclass
class _Forward:
    built: from_onnx.OnnxIr
    context: patterns.PatternContext
    keep: set[str]
    fixed: set[str]
    # With VirtualGraphMode.Auto: each forward op's virtual graph by its first output, as
    # the split gave them (before the MatMul decomposition renames MatMul outputs).
    virtual_graphs: dict[str, int] = field(default_factory=dict)

    @property
    def main(self) -> IrGraph:
        return self.built.graphs[-1]


def _forward(request: IrRequest, reached: Callable[[str, from_onnx.OnnxIr], None]) -> _Forward:
    """The forward ops after the pre-alias patterns, on their virtual graphs."""
    training = request.loss is not None
    built = from_onnx.build(
        request.model,
        request.tensors,
        _main_graph_name(request.model),
        weights_are_constant=request.constant_weights and not training,
        anchors=frozenset(request.anchors),
    )
    if not request.placement.virtual_graphs:
        # Without virtual graphs the builder's annotations are dropped (Ir::prepareImpl,
        # unsetAllVirtualGraphIds).
        for graph in built.graphs:
            for op in graph.ops:
                op.attributes.pop(names.VIRTUAL_GRAPH, None)
    keep = set(request.anchors) | ({request.loss} if request.loss else set())
    forward = _Forward(
        built,
        patterns.PatternContext(built.tensors, keep, training),
        keep,
        built.constants | built.variables,
    )
    reached("Fwd0", built)
    table = _pre_alias_patterns(request)
    layout = request.placement
    if layout.auto_virtual_graphs:
        # The split is computed on the ops before the MatMul decomposition (whose Reshapes
        # the description cannot order as the original's scheduler does); the decomposed
        # ops then take their MatMul's virtual graph.
        patterns.apply(built.graphs, [p for p in table if p[0] != "MatMulOp"], forward.context)
        auto_virtual_graph.assign(
            forward.main, built.tensors, forward.main.inputs, forward.fixed, layout.num_ipus,
            layout.split_ratios, layout.accumulating, training,
        )  # fmt: skip
        forward.virtual_graphs = {
            op.outputs[min(op.outputs)]: int(op.attributes[names.VIRTUAL_GRAPH])
            for op in forward.main.ops
            if op.outputs and names.VIRTUAL_GRAPH in op.attributes
        }
    patterns.apply(built.graphs, table, forward.context)
    reached("Fwd1", built)
    return forward


def auto_virtual_graphs(request: IrRequest) -> dict[str, int]:
    """With `VirtualGraphMode.Auto`, the virtual graph of each forward op of the main graph
    the original's split gives, by the op's first output."""
    return _forward(request, lambda _name, _built: None).virtual_graphs


def describe(
    request: IrRequest, checkpoint: Checkpoint | None = None
) -> tuple[list[IrGraph], dict[str, IrTensor]]:
    """The IR's graphs once prepared; `checkpoint` sees them at the original's dot checkpoints
    ("Fwd0", "Fwd1", "Bwd0" when training, "PreAlias", "Final"; willow/src/ir.cpp)."""

    def reached_in(name: str, built: from_onnx.OnnxIr) -> None:
        if checkpoint is not None:
            checkpoint(name, _ordered(built), built.tensors)

    forward = _forward(request, reached_in)
    built, context, keep, fixed, main = (
        forward.built, forward.context, forward.keep, forward.fixed, forward.main,
    )  # fmt: skip
    layout = request.placement

    def reached(name: str) -> None:
        reached_in(name, built)

    if request.loss is not None:
        details = request.training or IrTraining(request.loss, trained=sorted(built.variables))
        trained = set(details.trained) | _anchored_gradients(request)
        main.ops.extend(autodiff.grow(main, request.loss, trained, built.tensors))
        reached("Bwd0")
        patterns.apply([main], _grad_patterns(request), context, pruning=False)
        if layout.pipelining and request.pipeline_recomputation:
            pipeline.annotate_recomputation(main)
        if request.explicit_recomputation:
            main.ops.extend(_recomputed(main))
        if request.training is not None:
            optimizer.append(main, request.training, built.tensors)
        if layout.pipelining:
            pipeline.assign_stages(main)
    inter_ipu_copy.insert(main, built.tensors)
    if request.loss is not None and layout.pipelining:
        pipeline.stash_and_restore(main, built.tensors, fixed, request.pipeline_recomputation)
    if request.off_chip:
        streaming_memory.insert(main, built.tensors, request.off_chip)
    if request.host_copy_ops:
        host_io.insert(
            main, built.tensors, list(main.inputs), sorted(request.anchors),
            request.host_copy_priority,
        )  # fmt: skip
    reached("PreAlias")
    if request.outlining:
        # Before outlining, the original simplifies chains of views in the main graph
        # whatever the patterns (willow/src/ir.cpp, prepareImpl).
        view_simplify: list[tuple[str, patterns.Pattern]] = [
            ("ViewSimplifyPattern", patterns.view_simplify)
        ]
        patterns.apply([main], view_simplify, context, pruning=False)
        built.graphs = [
            *outline.outline(
                [main, *built.graphs[:-1]], built.tensors, request.outline_threshold, keep
            )[1:],
            main,
        ]
    if "InPlace" in request.enabled_patterns:
        shapes = {name: tensor.shape for name, tensor in built.tensors.items()}
        for graph in built.graphs:
            inplace.apply(graph, shapes, built.constants | built.variables)
    reached("Final")
    return _ordered(built), built.tensors


def write_dot_files(request: IrRequest, settings: dot.DotSettings) -> None:
    """The .dot files of the checkpoints `settings` asks for (see `dot`)."""

    def at_checkpoint(name: str, graphs: list[IrGraph], tensors: dict[str, IrTensor]) -> None:
        dot.write_checkpoint(settings, name, graphs, tensors, graphs[0])

    describe(request, at_checkpoint)


def record_debug_infos(request: IrRequest) -> None:
    """The IR's ops as debug infos (see `debug_infos`), when a debug-info stream is open."""
    if debug_info_stream.is_open():
        debug_infos.record(describe(request)[0], request.training)


def serialise(request: IrRequest) -> str:
    graphs, tensors = describe(request)
    return to_json(graphs, tensors)
