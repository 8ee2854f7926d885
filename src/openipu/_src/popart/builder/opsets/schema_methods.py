"""Operator methods made from the ONNX operator schemas (`onnx.defs`).

Each method has PopART's public signature, which PopART itself generated from
the same schemas:

    op(args, [num_outputs,] <required attributes>, <optional attributes>=default, debugContext="")

- `args` (the input ids) is left out for operators without inputs;
- `num_outputs` appears when the operator has optional or variadic outputs,
  and then the method returns a list of ids; otherwise it returns the single
  id, or a list for fixed multi-output operators;
- attributes come in alphabetical order, required ones first, with the
  schema's default (optional attributes without one default to None, or []
  for lists); `auto_pad` is left out, as PopART does;
- an attribute equal to its default is not written to the node (ONNX then
  applies the same default).

Each operator set class gets the methods of the schema versions current at
its opset version; a method disappears from the version where its operator
was removed or deprecated.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx.defs
from onnx import AttributeProto, GraphProto

from openipu._src.popart import pybind_arguments as pybind
from openipu._src.popart.builder.attribute_values import attribute_value, make_typed_attribute
from openipu._src.popart.builder.opsets.builder_op_checks import BUILDER_CHECKS
from openipu._src.popart.errors import popart_exception

AI_ONNX = "ai.onnx"

# ONNX's schema says "no maximum" with the largest int32.
_UNBOUNDED = 2**31 - 1

# Attributes PopART's builder does not expose.
SKIPPED_ATTRIBUTES = frozenset({"auto_pad"})

# ONNX operator names that are Python keywords get PopART's logical_ prefix.
_METHOD_NAME_OVERRIDES = {
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
    "Not": "logical_not",
    "If": "logical_if",
}

Coercion = Callable[[Any], Any]


def method_name(op_type: str) -> str:
    return _METHOD_NAME_OVERRIDES.get(op_type, op_type.lower())


@dataclass(frozen=True)
class AttributeParameter:
    name: str
    attribute_type: int
    required: bool
    default: Any  # the signature's default; None (or []) means "not written"
    has_schema_default: bool


@dataclass(frozen=True)
class OperatorSignature:
    op_type: str
    domain: str
    since_version: int
    min_inputs: int
    max_inputs: int
    min_outputs: int
    max_outputs: int
    attributes: tuple[AttributeParameter, ...]

    @property
    def variable_outputs(self) -> bool:
        return self.min_outputs != self.max_outputs

    @property
    def takes_inputs(self) -> bool:
        return self.max_inputs > 0

    @property
    def returns_list(self) -> bool:
        return self.variable_outputs or self.max_outputs > 1


def operator_signature(schema: onnx.defs.OpSchema) -> OperatorSignature:
    parameters = []
    for name, attribute in schema.attributes.items():
        if name in SKIPPED_ATTRIBUTES:
            continue
        has_default = attribute.default_value.type != AttributeProto.UNDEFINED
        if has_default:
            default = attribute_value(attribute.default_value)
        elif schema.name.startswith("Reduce") and name == "axes":
            # PopART's reductions tell "no axes given" (reduce all) from an explicit empty
            # list (reduce nothing): willow/src/op/reduce.cpp, has_default_axes.
            default = None
        elif attribute.type in (AttributeProto.INTS, AttributeProto.FLOATS, AttributeProto.STRINGS):
            default = []
        else:
            default = None
        # OpSchema.AttrType is an int enum with AttributeProto's numbers; onnx's stub
        # does not say it is an int.
        attribute_type: int = attribute.type  # type: ignore[assignment]
        parameters.append(
            AttributeParameter(name, attribute_type, attribute.required, default, has_default)
        )
    parameters.sort(key=lambda parameter: (not parameter.required, parameter.name))
    return OperatorSignature(
        op_type=schema.name,
        domain=schema.domain,
        since_version=schema.since_version,
        min_inputs=schema.min_input,
        max_inputs=schema.max_input,
        min_outputs=schema.min_output,
        max_outputs=schema.max_output,
        attributes=tuple(parameters),
    )


@functools.cache
def current_schemas(domain: str, version: int) -> dict[str, onnx.defs.OpSchema]:
    """The schema of every operator usable at `version` of `domain`.

    Deprecated and experimental operators are left out, as the ONNX checker
    rejects or warns about them.
    """
    experimental = onnx.defs.OpSchema.SupportType.EXPERIMENTAL
    latest: dict[str, onnx.defs.OpSchema] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain != domain or schema.since_version > version:
            continue
        if schema.support_level == experimental:
            continue
        known = latest.get(schema.name)
        if known is None or schema.since_version > known.since_version:
            latest[schema.name] = schema
    return {name: schema for name, schema in latest.items() if not schema.deprecated}


def _equals_default(value: Any, parameter: AttributeParameter) -> bool:
    if not parameter.has_schema_default:
        return False
    try:
        return _same_value(value, parameter)
    except (TypeError, ValueError):
        return False  # a value of the wrong type: make_typed_attribute reports it


def _same_value(value: Any, parameter: AttributeParameter) -> bool:
    default = parameter.default
    if parameter.attribute_type == AttributeProto.FLOAT:
        return np.float32(value) == np.float32(default)
    if parameter.attribute_type == AttributeProto.FLOATS:
        return np.array_equal(np.asarray(value, np.float32), np.asarray(default, np.float32))
    if parameter.attribute_type in (AttributeProto.INT, AttributeProto.STRING):
        return value == default
    if parameter.attribute_type in (AttributeProto.INTS, AttributeProto.STRINGS):
        return list(value) == list(default)
    return False


def _is_unset(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (list, tuple)) and len(value) == 0:
        return True
    return False


def _python_signature(binding: pybind.Signature) -> inspect.Signature:
    """The method's signature as `inspect` and `help()` show it."""
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter("self", positional)]
    for arg in binding.args:
        default = inspect.Parameter.empty if arg.default is pybind.REQUIRED else arg.default
        parameters.append(inspect.Parameter(arg.name, positional, default=default))
    return inspect.Signature(parameters)


class _Coerced(pybind.Caster):
    """An attribute the opset converts itself (element types given by name or number): any
    value reaches the conversion, which names a bad one."""

    text = "object"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        return value


_LISTS: dict[int, pybind.Caster] = {
    AttributeProto.INTS: pybind.INT64,
    AttributeProto.FLOATS: pybind.FLOAT,
    AttributeProto.STRINGS: pybind.STR,
}
_SCALARS: dict[int, pybind.Caster] = {
    AttributeProto.INT: pybind.INT64,
    AttributeProto.FLOAT: pybind.FLOAT,
    AttributeProto.STRING: pybind.STR,
    AttributeProto.TENSOR: pybind.ARRAY,
    AttributeProto.GRAPH: pybind.InstanceOf(GraphProto, "onnx.GraphProto"),
}


def _attribute_caster(parameter: AttributeParameter) -> pybind.Caster:
    """The C++ type of PopART's generated binding for the attribute (popart.cpp's opsets):
    int64_t, float, std::string, their std::vectors; nonstd::optional when it has no default."""
    item = _LISTS.get(parameter.attribute_type)
    caster: pybind.Caster | None = (
        pybind.ListOf(item) if item is not None else _SCALARS.get(parameter.attribute_type)
    )
    if caster is None:
        return _Coerced()  # a type the builder does not support: make_typed_attribute says so
    if parameter.default is None and not parameter.required:
        return pybind.OptionalOf(caster)
    return caster


def _binding_signature(
    signature: OperatorSignature, coerced: frozenset[str] | Mapping[str, Coercion]
) -> pybind.Signature:
    args = []
    if signature.takes_inputs:
        args.append(pybind.Arg("args", pybind.ListOf(pybind.STR)))
    if signature.variable_outputs:
        args.append(pybind.Arg("num_outputs", pybind.INT))
    for parameter in signature.attributes:
        caster = _Coerced() if parameter.name in coerced else _attribute_caster(parameter)
        if parameter.required:
            args.append(pybind.Arg(parameter.name, caster))
        else:
            args.append(pybind.Arg(parameter.name, caster, parameter.default))
    args.append(pybind.Arg("debugContext", pybind.DEBUG_CONTEXT, ""))
    returns = "List[str]" if signature.returns_list else "str"
    return pybind.Signature(tuple(args), returns)


def _owner(domain: str, version: int) -> str:
    """The opset class as pybind11 names it, e.g. popart_core.AiOnnxOpset11."""
    words = (domain or AI_ONNX).split(".")
    return "popart_core." + "".join(word.capitalize() for word in words) + f"Opset{version}"


def _check_counts(signature: OperatorSignature, what: str, inputs: Any, num_outputs: int) -> None:
    if not signature.min_inputs <= len(inputs) <= signature.max_inputs:
        # The original's words (willow/src/builder_impl.cpp; builder_test matches the start).
        most = "inf" if signature.max_inputs >= _UNBOUNDED else signature.max_inputs
        raise popart_exception(
            f"{signature.op_type} has invalid number of inputs {len(inputs)}. Must be between "
            f"{signature.min_inputs}..{most} ({what})"
        )
    if not signature.min_outputs <= num_outputs <= signature.max_outputs:
        # The original's words (willow/src/builder_impl.hpp).
        raise popart_exception(
            f"{signature.op_type} has an invalid number of outputs {num_outputs}. Must be "
            f"between {signature.min_outputs}..{signature.max_outputs} ({what})"
        )


def make_operator_method(
    signature: OperatorSignature, coercions: Mapping[str, Coercion] | None = None
) -> Callable[..., Any]:
    """A method `op(self, args, ...)` that adds a node of `signature`'s operator.

    Its arguments are converted as PopART's pybind11 binding converts them
    (`pybind_arguments`): a call the binding does not take is pybind11's TypeError.
    """
    coercions = coercions or {}
    binding = _binding_signature(signature, coercions)
    name = method_name(signature.op_type)

    def operator_method(self: Any, *call_args: Any, **call_kwargs: Any) -> Any:
        _, values = pybind.bind(
            name, [binding], call_args, call_kwargs, owner=_owner(signature.domain, self.version)
        )
        what = f"{signature.op_type} ({signature.domain or 'ai.onnx'} opset {self.version})"
        inputs = values.get("args", [])
        num_outputs = values.get("num_outputs", signature.max_outputs)
        _check_counts(signature, what, inputs, num_outputs)
        check = BUILDER_CHECKS.get(signature.op_type) if signature.domain in ("", AI_ONNX) else None
        if check is not None:
            check(self._known_shape, list(inputs), values)
        attributes = []
        for parameter in signature.attributes:
            value = values[parameter.name]
            if parameter.name in coercions and value is not None:
                value = coercions[parameter.name](value)
            if value is None and parameter.required:
                raise popart_exception(f"{what}: attribute '{parameter.name}' is required")
            explicit_empty = parameter.default is None and value is not None
            if (
                _is_unset(value) and not parameter.has_schema_default and not explicit_empty
            ) or value is None:
                continue
            if _equals_default(value, parameter):
                continue
            attributes.append(
                make_typed_attribute(parameter.name, value, parameter.attribute_type, what)
            )
        outputs = self._add_node(
            signature.op_type, list(inputs), attributes, num_outputs, values["debugContext"]
        )
        return outputs if signature.returns_list else outputs[0]

    operator_method.__name__ = operator_method.__qualname__ = name
    operator_method.__signature__ = _python_signature(binding)  # type: ignore[attr-defined]
    returns = "a list of output ids" if signature.returns_list else "the output id"
    operator_method.__doc__ = (
        f"Add an ONNX {signature.op_type} node (operator version {signature.since_version}, "
        f"domain '{signature.domain or 'ai.onnx'}'); returns {returns}."
    )
    return operator_method


class _Unavailable:
    """Hides an inherited operator method on an opset version that no longer has the operator."""

    def __init__(self, op_type: str, version: int) -> None:
        self._message = (
            f"{op_type} is not in this operator set (removed or deprecated in {version})"
        )

    def __get__(self, instance: Any, owner: type) -> Any:
        raise AttributeError(self._message)


def install_operator_methods(
    opset_class: type,
    domain: str,
    version: int,
    previous_version: int | None,
    handwritten: frozenset[str] = frozenset(),
    coercions: Mapping[str, Coercion] | None = None,
) -> None:
    """Give `opset_class` the methods new or changed at `version` of `domain`.

    Operators unchanged since `previous_version` are inherited from the parent
    class; operators in `handwritten` are left to the class itself.
    """
    current = current_schemas(domain, version)
    previous = current_schemas(domain, previous_version) if previous_version else {}
    for op_type, schema in current.items():
        if op_type in handwritten:
            continue
        before = previous.get(op_type)
        if before is None or before.since_version != schema.since_version:
            setattr(
                opset_class,
                method_name(op_type),
                make_operator_method(operator_signature(schema), coercions),
            )
    for op_type in previous.keys() - current.keys():
        setattr(opset_class, method_name(op_type), _Unavailable(op_type, version))
