"""The original's graph-rewriting patterns that change which ops the IR holds, applied to the
IR description (willow/src/patterns/*.cpp): each rewrites one op at a time, skips ops that
exclude it (`Builder.excludePatterns`), and, like the original's `PreAliasPattern`s, never
removes a tensor the data flow anchors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

# ReductionType.NoReduction, as the builder stores a loss's `reduction` attribute.
_NO_REDUCTION = "2"


@dataclass
class PatternContext:
    tensors: dict[str, IrTensor]
    anchors: set[str]
    training: bool
    # Ir::intermediate_tensor_counter (willow/include/popart/ir.hpp), shared by the patterns.
    counter: list[int] = field(default_factory=lambda: [0])

    def intermediate(self, base: str) -> str:
        """`<base>__t<n>`, as Ir::createIntermediateTensorId names a pattern's new tensors."""
        name = f"{base}__t{self.counter[0]}"
        self.counter[0] += 1
        return name

    def shape(self, tensor: str) -> tuple[int, ...] | None:
        info = self.tensors.get(tensor)
        return None if info is None else info.shape


Pattern = Callable[[IrGraph, IrOp, PatternContext], bool]


def _input(op: IrOp, index: int = 0) -> str | None:
    return op.inputs.get(index)


def _rewire(graph: IrGraph, old: str, new: str) -> None:
    """Consumers of `old` consume `new` instead."""
    for op in graph.ops:
        op.inputs = {i: (new if t == old else t) for i, t in op.inputs.items()}


def _replaceable_by_identity(op: IrOp, context: PatternContext) -> bool:
    """The original ops' `canBeReplacedByIdentity` (willow/src/op/*.cpp) for the ops the IR
    description models."""
    in_shape = context.shape(op.inputs.get(0, ""))
    out_shape = context.shape(op.outputs.get(0, ""))
    same_shape = in_shape is not None and in_shape == out_shape
    if op.type == "Concat":
        return len(op.inputs) == 1
    if op.type == "Dropout":
        ratio = op.attributes.get("ratio", "0.5")
        return (not context.training or float(ratio) == 0.0) and len(op.outputs) == 1
    if op.type == "Reshape" or op.type.startswith("Reduce") and op.type != "ReduceMedian":
        return same_shape
    if op.type == "IdentityLoss":
        return op.attributes.get("reduction") == _NO_REDUCTION or in_shape == ()
    if op.type == "Reverse":
        return op.attributes.get("dimensions", "[]") == "[]"
    return False


def op_to_identity(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    if not _replaceable_by_identity(op, context):
        return False
    op.type = "Identity"
    op.inputs = {0: op.inputs[0]}
    return True


def post_n_repl(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """An op that only copies its input (Identity, a Sum of one input) is removed, its
    consumers reading the input (willow/src/patterns/postnrepl.cpp)."""
    if not (op.type == "Identity" or op.type == "Sum" and len(op.inputs) == 1):
        return False
    out = op.outputs[0]
    if out in graph.outputs or out in context.anchors:
        return False
    graph.ops.remove(op)
    _rewire(graph, out, op.inputs[0])
    return True


def pre_uni_repl(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """A Sum of one input, that input produced by an op and read by it alone, is removed, its
    producer producing the Sum's output (willow/src/patterns/preunirepl.cpp)."""
    source = _input(op)
    if op.type != "Sum" or len(op.inputs) != 1 or source is None or source in context.anchors:
        return False
    producer = graph.producers().get(source)
    if producer is None or len(graph.consumers(source)) != 1:
        return False
    producer.outputs = {
        i: (op.outputs[0] if t == source else t) for i, t in producer.outputs.items()
    }
    graph.ops.remove(op)
    return True


def _permutation(op: IrOp, rank: int) -> list[int]:
    text = op.attributes.get("perm")
    if text is None:
        return list(reversed(range(rank)))
    return [int(v) for v in text.strip("[]").split()]


def transpose_to_identity(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """Two Transposes that undo each other become an Identity of the first one's input
    (willow/src/patterns/transposetoidentityorreshapepattern.cpp; the case with a Reshape
    of unit dimensions between them is not modelled)."""
    if op.type != "Transpose":
        return False
    producer = graph.producers().get(op.inputs[0])
    shape = context.shape(op.inputs[0])
    if producer is None or producer.type != "Transpose" or shape is None:
        return False
    first = _permutation(producer, len(shape))
    second = _permutation(op, len(shape))
    if [first[p] for p in second] != list(range(len(shape))):
        return False
    op.type = "Identity"
    op.inputs = {0: producer.inputs[0]}
    op.attributes.pop("perm", None)
    return True


_VIEWS = ("Reshape", "Identity")


def view_simplify(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """A Reshape or Identity of a Reshape or Identity reads the first one's input directly,
    as a Reshape unless both are Identities (willow/src/patterns/viewsimplifypattern.cpp);
    the first one stays, as the original prunes nothing after this pattern."""
    if op.type not in _VIEWS or op.inputs[0] in context.anchors:
        return False
    producer = graph.producers().get(op.inputs[0])
    if producer is None or producer.type not in _VIEWS:
        return False
    op.inputs = {0: producer.inputs[0]}
    if "Reshape" in (op.type, producer.type):
        op.type = "Reshape"
    return True


def like_to_plain(graph: IrGraph, op: IrOp, context: PatternContext) -> bool:
    """A RandomNormalLike, RandomUniformLike or ZerosLike becomes the op of its name without
    "Like", drawing the shape and type it had from its input (likeopspattern.cpp)."""
    if op.type not in ("RandomNormalLike", "RandomUniformLike", "ZerosLike"):
        return False
    op.type = op.type.removesuffix("Like")
    op.inputs = {}
    return True


def apply(
    graphs: list[IrGraph],
    patterns: list[tuple[str, Pattern]],
    context: PatternContext,
    pruning: bool = True,
) -> None:
    """Applies the patterns until none matches (as `Ir::applyPreAliasPatterns` does),
    pruning ops whose results nothing uses between rounds (unless `pruning` is off)."""
    for graph in graphs:
        changed = True
        while changed:
            changed = False
            for name, pattern in patterns:
                for op in list(graph.ops):
                    if op in graph.ops and name not in op.excluded_patterns:
                        changed = pattern(graph, op, context) or changed
            if pruning:
                prune(graph, context)


def prune(graph: IrGraph, context: PatternContext) -> None:
    """Removes ops that nothing needs (willow/src/transforms/prune.cpp): needed are the
    anchors, the graph's outputs, and what the ops producing them read."""
    needed = set(context.anchors) | set(graph.outputs)
    kept: list[IrOp] = []
    for op in reversed(graph.ops):
        if op.is_grad or any(t in needed for t in op.outputs.values()) or not op.outputs:
            kept.append(op)
            needed.update(op.inputs.values())
    graph.ops = list(reversed(kept))
