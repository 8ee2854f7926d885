"""`popart.getSupportedOperations` and `getSupportedOperationsDefinition`.

The original lists the operators its OpManager can create (willow/src/opmanager.cpp); here
they are the operators the lowering registry can run, each at the opset versions it is
registered for, and of ai.onnx only the versions the original's OpManager registers
(`op_manager_onnx_versions`): the lowering also runs later opsets and operators the
original does not list, which a program asking these lists would not expect. Definitions come from the ONNX schemas (ai.onnx, ai.onnx.ml) and from the
ai.graphcore table. `includeInternal` adds the one operator the original registers as not
public: AddBias, which its patterns make and no ONNX model may hold (willow/src/op/addbias.cpp).
"""

from __future__ import annotations

import onnx.defs

from openipu._src.popart.builder.tensor_info import DataType
from openipu._src.popart.errors import incompatible_arguments, popart_exception
from openipu._src.popart.graphcore_ops import GRAPHCORE_OPS
from openipu._src.popart.lowering import registry
from openipu._src.popart.lowering.model import lower_model  # noqa: F401 - registers the ops
from openipu._src.popart.utility.op_manager_onnx_versions import (
    GRAPHCORE_NOT_REGISTERED,
    ONNX_VERSIONS,
)
from openipu._src.popart.utility.operator_identity import (
    OpDefinition,
    OpDefinitionAttribute,
    OpDefinitionInput,
    OpDefinitionOutput,
    OperatorIdentifier,
)

_TYPE_NAMES = {
    f"tensor({name})": data_type
    for data_type, name in [
        ("FLOAT", "float"), ("FLOAT16", "float16"), ("BFLOAT16", "bfloat16"),
        ("DOUBLE", "double"), ("INT8", "int8"), ("INT16", "int16"), ("INT32", "int32"),
        ("INT64", "int64"), ("UINT8", "uint8"), ("UINT16", "uint16"), ("UINT32", "uint32"),
        ("UINT64", "uint64"), ("BOOL", "bool"), ("STRING", "string"),
    ]
}  # fmt: skip


def _check_bool(method: str, include_internal: object) -> None:
    if not isinstance(include_internal, bool):
        raise incompatible_arguments(
            method, ["(includeInternal: bool) -> list"], [include_internal]
        )


def _identifiers() -> list[OperatorIdentifier]:
    found = []
    for (domain, op_type), versions in sorted(registry.registered_ops().items()):
        domain = domain or "ai.onnx"
        for version in versions:
            if domain == "ai.onnx" and version not in ONNX_VERSIONS.get(op_type, ()):
                continue
            if domain == "ai.graphcore" and op_type in GRAPHCORE_NOT_REGISTERED:
                continue
            found.append(OperatorIdentifier(domain, op_type, version))
    return found


# The original's internal (not public) operators, with their definitions
# (willow/src/op/addbias.cpp: one input and one output, of FLOAT16 or FLOAT).
_INTERNAL = {
    OperatorIdentifier("ai.graphcore", "AddBias", 1): OpDefinition(
        [OpDefinitionInput("input", [DataType.FLOAT16, DataType.FLOAT])],
        [OpDefinitionOutput("output", [DataType.FLOAT16, DataType.FLOAT])],
        {},
    )
}


def getSupportedOperations(includeInternal: bool) -> list[OperatorIdentifier]:  # noqa: N802, N803
    _check_bool("getSupportedOperations", includeInternal)
    return _identifiers() + (list(_INTERNAL) if includeInternal else [])


# The ai.onnx opsets the original knows (its generated opsets.gen.hpp; the builder's
# AiOnnxOpset6 to AiOnnxOpset11).
_KNOWN_OPSETS = range(6, 12)


def getUnsupportedOperations(opsetVersion: int) -> list[OperatorIdentifier]:  # noqa: N802, N803
    """The ai.onnx operators of the opset (each at the version that opset has, deprecated
    ones included as in the original's opsets.gen.hpp) that are not among the supported
    operations (willow/src/opmanager.cpp, getUnsupportedOperations)."""
    if not isinstance(opsetVersion, int) or isinstance(opsetVersion, bool):
        raise incompatible_arguments(
            "getUnsupportedOperations", ["(opsetVersion: int) -> list"], [opsetVersion]
        )
    if opsetVersion not in _KNOWN_OPSETS:
        raise popart_exception(f"Could not find opset {opsetVersion}")
    supported = {(i.type, i.version) for i in _identifiers() if i.domain == "ai.onnx"}
    unsupported = []
    for op_type in sorted(
        {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}
    ):
        try:
            schema = onnx.defs.get_schema(op_type, opsetVersion, "")
        except onnx.defs.SchemaError:
            continue  # not in this opset yet
        if (op_type, schema.since_version) not in supported:
            unsupported.append(OperatorIdentifier("ai.onnx", op_type, schema.since_version))
    return unsupported


def _data_types(type_strings) -> list[DataType]:
    return [DataType[_TYPE_NAMES[t]] for t in type_strings if t in _TYPE_NAMES]


def _schema_definition(identifier: OperatorIdentifier) -> OpDefinition:
    domain = "" if identifier.domain == "ai.onnx" else identifier.domain
    try:
        schema = onnx.defs.get_schema(identifier.type, identifier.version, domain)
    except onnx.defs.SchemaError:
        return OpDefinition()
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}

    def supported(parameter) -> list:
        return _data_types(constraints.get(parameter.type_str, [parameter.type_str]))

    return OpDefinition(
        [OpDefinitionInput(p.name, supported(p)) for p in schema.inputs],
        [OpDefinitionOutput(p.name, supported(p)) for p in schema.outputs],
        {name: OpDefinitionAttribute() for name in schema.attributes},
    )


def _graphcore_definition(identifier: OperatorIdentifier) -> OpDefinition:
    spec = GRAPHCORE_OPS.get(identifier.type)
    if spec is None:
        return OpDefinition()
    return OpDefinition(
        [OpDefinitionInput(f"input{index}", []) for index in range(spec.inputs[0])],
        [OpDefinitionOutput(f"output{index}", []) for index in range(spec.outputs[0])],
        {attribute.name: OpDefinitionAttribute() for attribute in spec.attributes},
    )


def getSupportedOperationsDefinition(  # noqa: N802
    includeInternal: bool,  # noqa: N803
) -> dict[OperatorIdentifier, OpDefinition]:
    _check_bool("getSupportedOperationsDefinition", includeInternal)
    definitions = {}
    for identifier in _identifiers():
        if identifier.domain == "ai.graphcore":
            definitions[identifier] = _graphcore_definition(identifier)
        else:
            definitions[identifier] = _schema_definition(identifier)
    if includeInternal:
        definitions.update(_INTERNAL)
    return definitions


__all__ = [
    "getSupportedOperations",
    "getSupportedOperationsDefinition",
    "getUnsupportedOperations",
]
