"""A description of the IR a session would have in the original PopART, for
`Session._serializeIr(IrSerializationFormat.JSON)`.

openipu lowers ONNX straight to TensorFlow and has no PopART IR of its own; this package
builds, from the session's model, the ops the original's IR would hold after the patterns
the session enables (see `from_onnx`, `patterns`, `outline`, `inplace`), in the original's
JSON form, and writes its .dot files (`dot`).

Limits (where the description depends on transforms openipu does not model):
- the backward pass of a training session is described by the loss's gradient op (and,
  with explicit recomputation, the recomputed clones; with pipeline recomputation, the
  Stash ops) only, not the gradient ops of the other ops, the Restore ops, the IPU copies
  nor the optimizer's VarUpdate ops;
- outlining (`enableOutlining`) is a simplified form of the original's (see `outline`);
- ops appear in the model's order, not the original's scheduler's order;
- patterns that only rewrite gradient ops or lower ops for Poplar (MatMul grouping, the
  *GradOp patterns, decompositions) are not applied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import onnx

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering.dtypes import TF_TO_ONNX
from openipu._src.popart.options.patterns import PATTERNS
from openipu._src.popart.session.ir_view import (
    debug_infos,
    dot,
    from_onnx,
    inplace,
    outline,
    patterns,
)
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor, to_json
from openipu._src.popart.session.tensor_types import TensorSignature
from openipu._src.popart.utility import debug_info_stream

__all__ = [
    "IrRequest",
    "check_excluded_patterns",
    "dot",
    "record_debug_infos",
    "serialise",
    "tensor_records",
    "write_dot_files",
]

# The loss ops whose gradient op the description holds (willow/src/op/*loss*.cpp).
_LOSS_GRADS = {"IdentityLoss": "IdentityLossGrad", "L1": "L1Grad", "Nll": "NllGrad"}


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
    ]
    return [(name, pattern) for name, pattern in table if name in request.enabled_patterns]


def _loss_grad(graph: IrGraph, loss: str) -> Iterable[IrOp]:
    producer = graph.producers().get(loss)
    if producer is None or producer.type not in _LOSS_GRADS:
        return []
    grad = IrOp(
        type=_LOSS_GRADS[producer.type],
        name=producer.name,
        inputs={0: f"Gradient___{loss}"},
        outputs={0: f"Gradient___{producer.inputs[0]}"},
        attributes={"recompute": "NO"},
        is_grad=True,
    )
    return [grad]


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


def _stashes(graph: IrGraph, fixed: set[str]) -> list[IrOp]:
    """With pipelining and pipeline recomputation, each pipeline stage but the last stashes
    the activations it reads from outside itself (stream inputs, earlier stages' results),
    the rest being recomputed (willow/src/transforms/pipeline.cpp); consecutive stages on
    one IPU count as one (pipeline_consecutive_stages_test.py). `fixed` are the weights and
    constants, which are never stashed."""
    staged = [
        (int(op.attributes[names.PIPELINE_STAGE]), op.attributes.get(names.VIRTUAL_GRAPH), op)
        for op in graph.ops
        if not op.is_grad and names.PIPELINE_STAGE in op.attributes
    ]
    ipu_of = {stage: ipu for stage, ipu, _ in staged}
    merged: dict[int, int] = {}
    previous: int | None = None
    for stage in sorted(ipu_of):
        same_ipu = previous is not None and ipu_of[stage] == ipu_of[previous]
        merged[stage] = (
            merged[previous] if same_ipu and previous is not None else len(set(merged.values()))
        )
        previous = stage
    if not merged:
        return []
    last = max(merged.values())
    made_in = {t: merged[stage] for stage, _, op in staged for t in op.outputs.values()}
    stashes: list[IrOp] = []
    stashed: set[str] = set()
    for stage, _, op in staged:
        for tensor in op.inputs.values():
            if merged[stage] == last or tensor in fixed or tensor in stashed:
                continue
            if made_in.get(tensor) == merged[stage]:
                continue
            stashed.add(tensor)
            stashes.append(
                IrOp(
                    type="Stash",
                    name="",
                    inputs={0: tensor},
                    outputs={0: f"Stash___{tensor}"},
                    attributes={"recompute": "NO", names.PIPELINE_STAGE: str(merged[stage])},
                    is_grad=True,
                )
            )
    return stashes


def describe(
    request: IrRequest, checkpoint: Checkpoint | None = None
) -> tuple[list[IrGraph], dict[str, IrTensor]]:
    """The IR's graphs once prepared; `checkpoint` sees them at the original's dot checkpoints
    ("Fwd0", "Fwd1", "Bwd0" when training, "PreAlias", "Final"; willow/src/ir.cpp)."""
    training = request.loss is not None
    built = from_onnx.build(
        request.model,
        request.tensors,
        _main_graph_name(request.model),
        weights_are_constant=request.constant_weights and not training,
    )

    def reached(name: str) -> None:
        if checkpoint is not None:
            checkpoint(name, _ordered(built), built.tensors)

    keep = set(request.anchors) | ({request.loss} if request.loss else set())
    context = patterns.PatternContext(built.tensors, keep, training)
    main = built.graphs[-1]
    reached("Fwd0")
    patterns.apply(built.graphs, _pre_alias_patterns(request), context)
    reached("Fwd1")
    if request.loss is not None:
        main.ops.extend(_loss_grad(main, request.loss))
        reached("Bwd0")
        if request.explicit_recomputation:
            main.ops.extend(_recomputed(main))
        if request.pipeline_recomputation:
            main.ops.extend(_stashes(main, built.constants | built.variables))
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
        debug_infos.record(describe(request)[0])


def serialise(request: IrRequest) -> str:
    graphs, tensors = describe(request)
    return to_json(graphs, tensors)
