"""The weight update of a training session's IR: gradient clipping by norm, automatic loss
scaling's statistics and the optimizer's update ops, per trained weight.

- Clipping (willow/src/transforms/clipweightgradientsbynorm.cpp): per clip group, a
  ReduceSumSquare of each weight's gradient, their Sum, its Sqrt (`GlobalNorm___<group>`), a
  Max with the clip norm and a Div giving the clip factor, and a Mul of each gradient by it,
  which the update reads instead.
- Automatic loss scaling (willow/src/transforms/automaticlossscaling.cpp): a Histogram of
  each tracked gradient (`<gradient>_statistics`; scheduled first, with the largest
  priority, when var updates are delayed and `scheduleNonWeightUpdateGradientConsumersEarly`
  is set), their Sum (`summedHistograms`) and a LossScaleUpdate.
- The update, after the optimizer's decompose patterns (willow/src/patterns/sgd0decompose.cpp,
  sgd1decompose.cpp, sgd2decompose.cpp, adamdecompose.cpp, adaptivedecompose.cpp):
  Accumulate ops into the optimizer state and gradient accumulator (`Accl___<w>`,
  `Accum___<w>`...), the optimizer's updater and its VarUpdate (`UpdatedVar___<w>`). The
  scalar ops computing the optimizer's coefficients are not described.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openipu._src.popart import reserved_names
from openipu._src.popart.session.ir_view.autodiff import gradient
from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor
from openipu._src.popart.session.loss_scaling import UPDATE_FACTOR_ID

_LARGEST_PRIORITY = float("inf")  # the largest double, as the original prints it as float


@dataclass
class IrTraining:
    """What a training session tells the IR description about its backward pass."""

    loss: str
    trained: list[str] = field(default_factory=list)
    # Per weight, the optimizer's kind: "SGD0", "SGD1", "SGD2", "Adam", "Lamb", "Adaptive".
    updates: dict[str, str] = field(default_factory=dict)
    state: dict[str, tuple[str, ...]] = field(default_factory=dict)  # weight -> state ids
    accumulators: dict[str, str] = field(default_factory=dict)  # weight -> Accum___ id
    clip_groups: list[list[str]] = field(default_factory=list)  # weights clipped together
    tracked: tuple[str, ...] = ()  # tensors whose gradients automatic loss scaling tracks
    histograms_first: bool = False
    debug_context: str = ""  # the name of the optimizer's debug context

    def combo(self, weight: str) -> str:
        """The type of the op the optimizer first makes for `weight`, which its decompose
        pattern replaces (SGD0Combo...: willow/include/popart/graphcoreoperators.hpp)."""
        kind = self.updates.get(weight, "SGD0")
        return {"Lamb": "AdamCombo", "Adam": "AdamCombo", "Adaptive": "AdaptiveCombo"}.get(
            kind, f"{kind}Combo"
        )


class _Builder:
    """Appends ops placed with a weight's gradient (its virtual graph and stage)."""

    def __init__(self, graph: IrGraph, tensors: dict[str, IrTensor]) -> None:
        self.graph = graph
        self.tensors = tensors
        self.producers = graph.producers()
        self._counter = 0
        self.updating: str | None = None  # the weight whose update is being added

    def intermediate(self, base: str, like: str | None) -> str:
        """`<base>__t<n>`, as Ir::createIntermediateTensorId names tensors."""
        self._counter += 1
        name = f"{base}__t{self._counter}"
        self.declare(name, like)
        return name

    def declare(self, name: str, like: str | None, shape: tuple[int, ...] | None = None) -> None:
        """Records tensor `name`, of `like`'s type and (unless `shape` is given) shape."""
        info = self.tensors.get(like) if like else None
        if name in self.tensors:
            return
        if shape is None and info is not None:
            shape = info.shape
        self.tensors[name] = IrTensor(name, shape, info.data_type if info else "FLOAT")

    def add(
        self,
        op_type: str,
        inputs: list[str],
        outputs: list[str],
        near: str,
        name: str = "",
        priority: float = 0.0,
        updates: str | None = None,
    ) -> IrOp:
        source = self.producers.get(near)
        attributes = {}
        if source is not None:
            attributes = {k: v for k, v in source.attributes.items() if k.startswith("__")}
        set_recompute(attributes, None)
        op = IrOp(
            type=op_type,
            name=name,
            inputs=dict(enumerate(inputs)),
            outputs=dict(enumerate(outputs)),
            attributes=attributes,
            is_grad=True,
            schedule_priority=priority,
            forward=source.forward if source is not None else None,
            updates=updates or self.updating,
        )
        self.graph.ops.append(op)
        for out in outputs:
            self.producers[out] = op
        return op


def _clip(builder: _Builder, group: list[str], index: int, grads: dict[str, str]) -> None:
    norms = []
    for weight in group:
        norm = builder.intermediate(grads[weight], None)
        builder.declare(norm, grads[weight], shape=())
        builder.add("ReduceSumSquare", [grads[weight]], [norm], grads[weight])
        norms.append(norm)
    summed = builder.intermediate("normsSum", norms[0])
    builder.add("Sum", norms, [summed], norms[-1])
    global_norm = f"GlobalNorm___{index}"
    builder.declare(global_norm, summed)
    builder.add("Sqrt", [summed], [global_norm], summed)
    clip_norm = f"ClipNorm___{index}"
    builder.declare(clip_norm, summed)
    largest = builder.intermediate("clipByNorm", summed)
    builder.add("Max", [global_norm, clip_norm], [largest], global_norm)
    factor = builder.intermediate("clipByNorm", summed)
    builder.add("Div", [clip_norm, largest], [factor], largest)
    for weight in group:
        clipped = builder.intermediate(f"{grads[weight]}_clipped", grads[weight])
        builder.add("Mul", [grads[weight], factor], [clipped], grads[weight])
        grads[weight] = clipped


def _loss_scale_statistics(builder: _Builder, training: IrTraining) -> None:
    statistics = []
    priority = _LARGEST_PRIORITY if training.histograms_first else 0.0
    for tensor in training.tracked:
        grad = gradient(tensor)
        if grad not in builder.tensors:
            continue
        out = f"{grad}_statistics"
        builder.declare(out, None, shape=(2,))
        builder.add("Histogram", [grad], [out], grad, priority=priority)
        statistics.append(out)
    if not statistics:
        return
    builder.declare("summedHistograms", statistics[0])
    builder.add("Sum", statistics, ["summedHistograms"], statistics[-1])
    factor = UPDATE_FACTOR_ID
    builder.declare(factor, None, shape=())
    builder.add(
        "LossScaleUpdate",
        [factor, "summedHistograms"],
        [builder.intermediate(factor, factor)],
        "summedHistograms",
        name="LossScaleUpdate",
    )


def _update(builder: _Builder, training: IrTraining, weight: str, grad: str) -> None:
    state = training.state.get(weight, ())
    accumulator = training.accumulators.get(weight)
    updated = reserved_names.reservedUpdatedVarPrefix() + weight
    builder.declare(updated, weight)
    kind = training.updates.get(weight, "SGD0")
    if accumulator is not None and kind != "SGD1":  # SGD1's Accl___ accumulates as well
        builder.declare(accumulator, weight)
        builder.add(
            "Accumulate", [accumulator, grad], [builder.intermediate(accumulator, weight)], grad
        )
        grad = accumulator
    if kind == "SGD0":
        builder.add("SGD0VarUpdate", [weight, grad], [updated], grad)
    elif kind == "SGD1":
        # willow/src/patterns/sgd1decompose.cpp: the combined accumulator Accl___<w> takes
        # the gradient (AcclIntoUpdate___<w>), the weight is updated from it, and it is
        # updated for the next step (AcclOutOfAcclUpdate___<w>).
        accl = reserved_names.reservedAcclPrefix() + weight
        into_update = reserved_names.OPTIMIZER_PREFIXES["reservedAcclToUpdatePrefix"] + weight
        final = reserved_names.OPTIMIZER_PREFIXES["reservedAcclFinalOutPrefix"] + weight
        for name in (accl, into_update, final):
            builder.declare(name, weight)
        builder.add("Accumulate", [accl, grad], [into_update], grad, name=f"{weight}_accumulate")
        builder.add(
            "SGD1AcclUpdate", [into_update, weight], [final], grad, name=f"{weight}_accl_update"
        )
        builder.add(
            "SGD1VarUpdate", [weight, into_update], [updated], grad, name=f"{weight}_var_update"
        )
    elif kind == "SGD2":
        # willow/src/patterns/sgd2decompose.cpp: the velocity Accl1___<w> kept apart.
        velocity = state[0] if state else reserved_names.reservedAccl1Prefix() + weight
        builder.declare(velocity, weight)
        moved = builder.intermediate(velocity, weight)
        builder.add("SGD2PartialAcclUpdate", [velocity, weight], [moved], grad)
        accumulated = builder.intermediate(velocity, weight)
        builder.add("Accumulate", [moved, grad], [accumulated], grad)
        builder.add("SGD2VarUpdate", [weight, accumulated], [updated], grad)
    elif kind in ("Adam", "Lamb", "Adaptive"):
        for slot in state:
            builder.declare(slot, weight)
            if slot.startswith(reserved_names.reservedStepPrefix()):
                continue
            builder.add("Accumulate", [slot, grad], [builder.intermediate(slot, weight)], grad)
        updater_type = "AdamUpdater" if kind != "Adaptive" else "RMSPropUpdater"
        updater = builder.intermediate(
            reserved_names.OPTIMIZER_PREFIXES["reservedAdamUpdaterPrefix"] + weight, weight
        )
        builder.add(updater_type, [weight, *state], [updater], grad)
        if kind == "Lamb":
            squares = []
            for source in (weight, updater):
                square = builder.intermediate(f"{source}_lambsquare", None)
                builder.declare(square, None, shape=())
                builder.add("LambSquare", [source], [square], grad)
                squares.append(square)
            builder.add("AdamVarUpdate", [weight, updater, *squares], [updated], grad)
        else:
            builder.add(
                "AdamVarUpdate" if kind != "Adaptive" else "ScaledVarUpdate",
                [weight, updater],
                [updated],
                grad,
            )


def append(graph: IrGraph, training: IrTraining, tensors: dict[str, IrTensor]) -> None:
    """Appends the weight update's ops to the main graph (after its backward pass)."""
    builder = _Builder(graph, tensors)
    grads = {w: gradient(w) for w in training.trained if gradient(w) in builder.producers}
    _loss_scale_statistics(builder, training)
    for index, group in enumerate(training.clip_groups):
        weights = [w for w in (group or list(grads)) if w in grads]
        if weights:
            _clip(builder, weights, index, grads)
    for weight, grad in grads.items():
        builder.updating = weight
        _update(builder, training, weight, grad)
