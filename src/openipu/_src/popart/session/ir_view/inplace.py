"""The InPlace transform on the IR description (willow/src/transforms/inplace.cpp): ops
with in-place variants are replaced by them, highest priority first across the graph, unless
the variant is refused.

The variants and which of them modify an input come from willow/include/popart/op/*.hpp;
every variant's default priority is 10 (the ops' `inplacePriorityDefault`) unless the
builder set a preference (`Builder.setInplacePreferences`). A variant is refused, as in the
original, when it would modify (or make a modifying op modify) a tensor aliasing a weight
or a constant, or a tensor that another op still reads after it. The original's finer
checks on the Poplar-level alias model (partial overlaps, the backward pass's need for
forward activations, collectives, subgraphs' modified inputs) are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp

_DEFAULT_PRIORITY = 10.0


@dataclass(frozen=True)
class Variant:
    name: str
    modifies: int | None  # the input index it writes to, None for a view (aliasing) variant
    aliases: int  # the input index its output aliases


def _same(name: str, modifies: bool = True) -> tuple[Variant, ...]:
    return (Variant(f"{name}Inplace", 0 if modifies else None, 0),)


_VIEW_TYPES = "Identity Reshape Transpose Squeeze Flatten Slice Expand Pad Reverse Subsample Concat"
_UNARY_TYPES = (
    "Asin Atan Ceil Clip Elu Exp Expm1 Floor HardSigmoid LeakyRelu Log1p LogSoftmax NearbyInt "
    "Relu Round Scale Selu Shrink Sigmoid Sign Sinh Softmax Softsign Swish ThresholdedRelu Gelu"
)

VARIANTS: dict[str, tuple[Variant, ...]] = {
    **{t: _same(t, modifies=False) for t in _VIEW_TYPES.split()},
    **{t: _same(t) for t in _UNARY_TYPES.split()},
    "Softplus": (Variant("SoftPlusInplace", 0, 0),),
    "SoftSign": (Variant("SoftSignInplace", 0, 0),),
    "Add": (Variant("AddLhsInplace", 0, 0), Variant("AddRhsInplace", 1, 1)),
    "Mul": (Variant("MulLhsInplace", 0, 0), Variant("MulRhsInplace", 1, 1)),
    "Pow": (Variant("PowLhsInplace", 0, 0),),
    "Atan2": (Variant("Atan2Inplace", 0, 0),),
    "Where": (Variant("WhereLhsInplace", 1, 1), Variant("WhereRhsInplace", 2, 2)),
    # A restore writes the stashed value back into the activation; a host load writes the
    # stream into its Init's tensor (willow/include/popart/op/restore.hpp, hostloadop.hpp).
    "Restore": (Variant("RestoreInplace", 0, 0),),
    "HostLoad": (Variant("HostLoadInplace", 0, 0),),
}


def _candidates(
    graph: IrGraph, shapes: dict[str, tuple[int, ...] | None]
) -> list[tuple[float, int, IrOp, Variant]]:
    candidates = []
    for position, op in enumerate(graph.ops):
        if "InPlace" in op.excluded_patterns:
            continue
        for variant in VARIANTS.get(op.type, ()):
            source = op.inputs.get(variant.aliases)
            out = op.outputs.get(0)
            if source is None or out is None:
                continue
            # A binary op is in place on an input only if that input is as big as the output
            # (willow/src/op/elementwise.cpp, inplacePriorityDefault).
            if variant.modifies is not None and shapes.get(source) != shapes.get(out):
                continue
            priority = (op.inplace_priorities or {}).get(variant.name, _DEFAULT_PRIORITY)
            if priority > 0:
                candidates.append((priority, position, op, variant))
    # Highest priority first; the graph's order, then the variants' order, break ties.
    return sorted(candidates, key=lambda c: (-c[0], c[1]))


class _Aliases:
    """Which tensors share memory once the chosen variants are in place."""

    def __init__(self, graph: IrGraph, chosen: dict[int, Variant]) -> None:
        self._root: dict[str, str] = {}
        for op in graph.ops:
            variant = chosen.get(id(op))
            if variant is not None:
                self._root[op.outputs[0]] = self.root(op.inputs[variant.aliases])

    def root(self, tensor: str) -> str:
        return self._root.get(tensor, tensor)


@dataclass
class _GraphFacts:
    """What the checks read of the graph, which choosing variants does not change."""

    ops: dict[int, IrOp]
    producers: dict[str, IrOp]
    tensors: set[str]
    downstream: dict[int, set[int]]  # op -> the ops that (transitively) read its results

    @classmethod
    def of(cls, graph: IrGraph, protected: set[str]) -> _GraphFacts:
        readers: dict[str, list[int]] = {}
        position = {id(op): n for n, op in enumerate(graph.ops)}
        for op in graph.ops:
            for tensor in op.inputs.values():
                readers.setdefault(tensor, []).append(id(op))
        downstream: dict[int, set[int]] = {}
        for op in reversed(graph.ops):
            reached: set[int] = set()
            for tensor in op.outputs.values():
                for reader in readers.get(tensor, ()):
                    if position[reader] > position[id(op)]:
                        reached.add(reader)
                        reached |= downstream[reader]
            downstream[id(op)] = reached
        tensors = {t for op in graph.ops for t in (*op.inputs.values(), *op.outputs.values())}
        return cls(
            {id(op): op for op in graph.ops}, graph.producers(), tensors | protected, downstream
        )


def _acceptable(
    graph: IrGraph, chosen: dict[int, Variant], protected: set[str], facts: _GraphFacts
) -> bool:
    aliases = _Aliases(graph, chosen)
    groups: dict[str, set[str]] = {}
    for tensor in facts.tensors:
        groups.setdefault(aliases.root(tensor), set()).add(tensor)
    for op in graph.ops:
        variant = chosen.get(id(op))
        if variant is None or variant.modifies is None:
            continue
        group = groups[aliases.root(op.inputs[variant.modifies])]
        if group & protected:
            return False
        after = facts.downstream[id(op)] | {id(op)}
        # Every other reader of the memory must run before the op modifies it, so it may not
        # depend on the op, unless what it reads is the op's result (or a view of it).
        for reader_id in after:
            reader = facts.ops[reader_id]
            if reader is op:
                continue
            for tensor in reader.inputs.values():
                producer = facts.producers.get(tensor)
                if tensor in group and (producer is None or id(producer) not in after):
                    return False
    return True


def apply(graph: IrGraph, shapes: dict[str, tuple[int, ...] | None], protected: set[str]) -> None:
    """Replaces ops by in-place variants; `protected` are the tensors no op may modify (the
    weights and constants)."""
    chosen: dict[int, Variant] = {}
    facts = _GraphFacts.of(graph, protected)
    for _, _, op, variant in _candidates(graph, shapes):
        if id(op) in chosen:
            continue
        chosen[id(op)] = variant
        if not _acceptable(graph, chosen, protected, facts):
            del chosen[id(op)]
    for op in graph.ops:
        if id(op) in chosen:
            op.type = chosen[id(op)].name
