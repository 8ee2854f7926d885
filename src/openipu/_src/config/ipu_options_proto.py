"""The original's `IpuOptions` protobuf classes, built at import time from `ipu_options_schema`.

The original ships them as protoc-generated modules (`config_pb2`, `option_flag_pb2`,
`threestate_pb2` under tensorflow.compiler.plugin.poplar.driver). Here the schema table
becomes `FileDescriptorProto`s, which are added to protobuf's default descriptor pool (as a
generated module's are) and turned into message classes and enum wrappers by the builder
generated modules call. The result is wire-compatible with the original:
`SerializeToString`/`FromString`/`==`/`HasField`/`WhichOneof` work as there.
"""

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.internal import builder

from openipu._src.config import ipu_options_schema as schema

_SCALAR_TYPES = {
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
}

#: The public module that holds each file's classes (their `__module__`, so pickle finds them).
PUBLIC_MODULES = {
    schema.OPTION_FLAG_FILE.path: "openipu.compiler_plugin.poplar.driver.option_flag_pb2",
    schema.THREESTATE_FILE.path: "openipu.compiler_plugin.poplar.driver.threestate_pb2",
    schema.CONFIG_FILE.path: "openipu.compiler_plugin.poplar.driver.config_pb2",
}

_ENUM_NAMES = frozenset(enum.name for file in schema.FILES for enum in file.enums)


def _add_field(
    message: descriptor_pb2.DescriptorProto, field: schema.Field, oneofs: list[str]
) -> None:
    proto = message.field.add(name=field.name, number=field.number)
    proto.label = (
        descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        if field.repeated
        else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    )
    if field.type in _SCALAR_TYPES:
        proto.type = _SCALAR_TYPES[field.type]
    else:
        proto.type_name = f".{schema.PACKAGE}.{field.type}"
        proto.type = (
            descriptor_pb2.FieldDescriptorProto.TYPE_ENUM
            if field.type in _ENUM_NAMES
            else descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        )
    if field.oneof is not None:
        if field.oneof not in oneofs:
            oneofs.append(field.oneof)
            message.oneof_decl.add(name=field.oneof)
        proto.oneof_index = oneofs.index(field.oneof)


def _fill_message(proto: descriptor_pb2.DescriptorProto, message: schema.Message) -> None:
    proto.name = message.name
    for nested in message.nested:
        _fill_message(proto.nested_type.add(), nested)
    oneofs: list[str] = []
    for field in message.fields:
        _add_field(proto, field, oneofs)


def file_descriptor_proto(file: schema.ProtoFile) -> descriptor_pb2.FileDescriptorProto:
    """The `FileDescriptorProto` that protoc would make of the file the table describes."""
    proto = descriptor_pb2.FileDescriptorProto(
        name=file.path,
        package=schema.PACKAGE,
        syntax="proto3",
        dependency=list(file.dependencies),
    )
    for enum in file.enums:
        enum_proto = proto.enum_type.add(name=enum.name)
        for name, number in enum.values:
            enum_proto.value.add(name=name, number=number)
    for message in file.messages:
        _fill_message(proto.message_type.add(), message)
    return proto


def _build_namespaces() -> dict[str, dict[str, Any]]:
    pool = descriptor_pool.Default()
    namespaces: dict[str, dict[str, Any]] = {}
    for file in schema.FILES:
        serialized = file_descriptor_proto(file).SerializeToString()
        namespace: dict[str, Any] = {"DESCRIPTOR": pool.AddSerializedFile(serialized)}
        builder.BuildMessageAndEnumDescriptors(namespace["DESCRIPTOR"], namespace)
        builder.BuildTopDescriptorsAndMessages(
            namespace["DESCRIPTOR"], PUBLIC_MODULES[file.path], namespace
        )
        namespaces[file.path] = namespace
    return namespaces


#: Per proto file, what its generated `_pb2` module would hold: `DESCRIPTOR`, the message
#: classes, the enum wrappers and the top-level enum values.
NAMESPACES = _build_namespaces()

_CONFIG = NAMESPACES[schema.CONFIG_FILE.path]
IpuOptions = _CONFIG["IpuOptions"]
IpuOptionsCreator = _CONFIG["IpuOptionsCreator"]
SyntheticDataCategory = _CONFIG["SyntheticDataCategory"]
PoplarOptionFlag = NAMESPACES[schema.OPTION_FLAG_FILE.path]["PoplarOptionFlag"]
ThreeState = NAMESPACES[schema.THREESTATE_FILE.path]["ThreeState"]


def public_names(file: schema.ProtoFile) -> dict[str, Any]:
    """The names a public `_pb2` module re-exports for `file` (all but the private ones)."""
    return {name: value for name, value in NAMESPACES[file.path].items() if name[0] != "_"}
