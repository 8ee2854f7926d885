"""`_BuilderCore`: the ONNX graph under construction, its tensors and its nodes.

The graph is kept as an ONNX GraphProto from the start, so what the builder
hands out (`getModelProto`) is the model itself plus inferred types. A
subgraph builder (for Loop, If, Scan and ai.graphcore Call bodies) is a
`_BuilderCore` with a parent: it shares the parent's id allocator and opset
versions, and may use the tensors of the enclosing graphs, as ONNX allows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    helper,
)

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.builder.annotation_contexts import AnnotationMethods
from openipu._src.popart.builder.attribute_values import make_attribute
from openipu._src.popart.builder.binding_signatures import (
    ADD_INPUT_TENSOR,
    BUILDER,
    GET_TENSOR_SHAPE,
)
from openipu._src.popart.builder.builder_debug_info import (
    INPUT_DEBUG_ID_PREFIX,
    insert_debug_info_id,
    op_debug_info_id,
    variable_debug_info_id,
)
from openipu._src.popart.builder.initializer_layout import popart_initializer
from openipu._src.popart.builder.model_checks import with_relative_external_locations
from openipu._src.popart.builder.model_context import (
    AI_GRAPHCORE,
    AI_ONNX,
    AI_ONNX_ML,
    ModelContext,
    onnx_domain,
)
from openipu._src.popart.builder.model_io import (
    load_model,
    move_initializers_to_file,
    names_in_graph,
)
from openipu._src.popart.builder.node_attributes import NodeAttributeMethods, output_name_set
from openipu._src.popart.builder.settings_encoding import (
    encode_input_settings,
    encode_variable_settings,
)
from openipu._src.popart.builder.shape_inference import infer_types, tensor_type_of
from openipu._src.popart.builder.tensor_info import (
    DataType,
    TensorInfo,
    data_type_of_onnx_type,
    lower_case_name,
)
from openipu._src.popart.errors import (
    IncompatibleArgumentsError,
    check_tensor_ids,
    popart_exception,
)
from openipu._src.popart.logging import TRACE, python_logger
from openipu._src.popart.pybind_arguments import bind

_logger = python_logger("builder")

ROOT_GRAPH_NAME = "BuilderGraph"
_FLOAT8_TYPES = {
    TensorProto.FLOAT8E4M3FN,
    TensorProto.FLOAT8E4M3FNUZ,
    TensorProto.FLOAT8E5M2,
    TensorProto.FLOAT8E5M2FNUZ,
}
_NO_VALUE = object()


def debug_name(debug_context: Any) -> str:
    """The name carried by a debugContext argument: a str or a DebugContext-like object."""
    if debug_context is None:
        return ""
    if isinstance(debug_context, str):
        return debug_context
    if hasattr(debug_context, "getPathName"):
        return str(debug_context.getPathName())
    return str(debug_context)


def _is_debug_context(value: Any) -> bool:
    return isinstance(value, str) or hasattr(value, "getPathName")


def _settings_and_debug_context(
    method: str, settings_name: str, positional: list[Any], keywords: dict[str, Any]
) -> tuple[Any, Any]:
    """The optional settings object and the debugContext that end the input overloads.

    A positional str (or DebugContext) is the debug context; anything else in
    that place is the settings object.
    """
    settings = keywords.pop(settings_name, None)
    debug_context = keywords.pop("debugContext", "")
    if keywords:
        raise TypeError(f"{method}() got unexpected keyword arguments {sorted(keywords)}")
    if positional and not _is_debug_context(positional[0]):
        settings = positional.pop(0)
    if positional:
        debug_context = positional.pop(0)
    if positional:
        raise TypeError(f"{method}() got too many arguments")
    return settings, debug_context


class _BuilderCore(NodeAttributeMethods, AnnotationMethods):
    """Builds one ONNX graph: `_BuilderCore()` or `_BuilderCore(modelProtoOrFilename)`."""

    def __init__(self, modelProtoOrFilename: Any = None, *, _parent: _BuilderCore | None = None):
        self._parent = _parent
        self._model_header = ModelProto()  # model fields other than the graph, kept from a load
        self._graph = GraphProto()
        self._defined: set[str] = set()  # tensors this graph defines
        # Declared with addInputTensorFromParentGraph, in order (a Call binds them to its args).
        #: Tensors of enclosing graphs this subgraph reads -> how many inputs it had before.
        self._from_parent: dict[str, int] = {}
        self._node_index_by_output: dict[str, int] = {}
        self._name_scope: list[str] = list(_parent._name_scope) if _parent else []
        self._context_attributes: dict[str, list[AttributeProto]] = {}
        self._metadata: dict[str, str] = {}
        self._revision = 0
        self._finalized_cache: tuple[int, ModelProto] | None = None
        self._context: ModelContext
        if _parent is not None:
            self._context = _parent._context
            self._graph.name = self._context.next_subgraph_name(ROOT_GRAPH_NAME)
        elif modelProtoOrFilename is not None:
            # The original checks a loaded model's structure only (onnx's checker::check_model
            # in willow/src/builder_impl.cpp, loadModelProto); a session checks it in full.
            self._load(load_model(modelProtoOrFilename, infer_shapes=False))
        else:
            self._context = ModelContext()
            self._graph.name = ROOT_GRAPH_NAME

    def _load(self, model: ModelProto) -> None:
        self._context = ModelContext(
            {(opset.domain or AI_ONNX): opset.version for opset in model.opset_import}
        )
        self._graph.CopyFrom(model.graph)
        self._model_header.CopyFrom(model)
        self._model_header.ClearField("graph")
        self._metadata = {entry.key: entry.value for entry in model.metadata_props}
        self._model_header.ClearField("metadata_props")
        for tensor_id in names_in_graph(model.graph):
            self._context.ids.reserve(tensor_id)
        self._defined.update(value.name for value in model.graph.input)
        self._defined.update(tensor.name for tensor in model.graph.initializer)
        for index, node in enumerate(model.graph.node):
            self._register_node_outputs(node, index)

    # -- bookkeeping -------------------------------------------------------------------------

    def _touch(self) -> None:
        self._revision += 1

    def _allocate_id(self, base: str) -> str:
        return self._context.ids.allocate(self.getNameScope(base))

    def _register_node_outputs(self, node: NodeProto, index: int) -> None:
        for output in node.output:
            if output:
                self._defined.add(output)
                self._node_index_by_output[output] = index

    def _is_visible(self, tensor_id: str) -> bool:
        """Defined in this graph, declared from the parent, or defined in an enclosing graph."""
        if tensor_id in self._defined or tensor_id in self._from_parent:
            return True
        return self._parent is not None and self._parent._is_visible(tensor_id)

    @staticmethod
    def _check_tensor_id_type(tensor_id: Any, what: str) -> None:
        if not isinstance(tensor_id, str):
            # The bindings take a TensorId (std::string): pybind11's TypeError otherwise.
            raise IncompatibleArgumentsError(
                f"{what}: a tensor id must be a str, got {tensor_id!r}"
            )

    def _check_tensor(self, tensor_id: Any, what: str) -> None:
        self._check_tensor_id_type(tensor_id, what)
        if not self._is_visible(tensor_id):
            scope = "this subgraph or its parents" if self._parent else "the model"
            raise popart_exception(f"{what}: unknown tensor id '{tensor_id}': it is not in {scope}")

    def _find_node(self, node_output_names: Any) -> NodeProto:
        """The unique node whose outputs include all the given names."""
        wanted = output_name_set(node_output_names)
        indices = {self._node_index_by_output.get(name) for name in wanted}
        if not wanted or None in indices or len(indices) != 1:
            raise popart_exception(
                f"could not find a unique node with outputs {sorted(wanted)} in graph "
                f"'{self._graph.name}'"
            )
        return self._graph.node[indices.pop()]

    # -- nodes ---------------------------------------------------------------------------------

    def add_node(
        self,
        op_type: str,
        inputs: Sequence[str],
        *,
        domain: str = AI_ONNX,
        domain_version: int | None = None,
        attributes: Iterable[AttributeProto] = (),
        num_outputs: int = 1,
        debug_context: Any = "",
    ) -> list[str]:
        """Append a node and return its output ids (`OpType:index`, made unique).

        `domain_version` fixes the version of `domain` in the model; None means
        the node is valid in any version and fixes nothing.
        """
        what = f"{op_type} ({domain or AI_ONNX})"
        check_tensor_ids(what, inputs)
        for tensor_id in inputs:
            if tensor_id != "":  # ONNX's marker for an omitted optional input
                self._check_tensor(tensor_id, what)
        if domain_version is not None:
            self._context.use_opset(domain, domain_version)
        outputs = [self._allocate_id(f"{op_type}:{index}") for index in range(num_outputs)]
        name = debug_name(debug_context)
        node = helper.make_node(
            op_type,
            list(inputs),
            outputs,
            name=self.getNameScope(name) if name else (outputs[0] if outputs else op_type),
            domain=onnx_domain(domain),
        )
        node.attribute.extend(attributes)
        insert_debug_info_id(node, op_debug_info_id(debug_context, op_type, inputs, node.attribute))
        explicit = {attribute.name for attribute in node.attribute}
        for attribute_name, stack in self._context_attributes.items():
            if stack and attribute_name not in explicit:
                node.attribute.append(stack[-1])
        self._graph.node.append(node)
        self._register_node_outputs(node, len(self._graph.node) - 1)
        self._touch()
        # The original's builder traces each op it adds (willow/src/builder_impl.cpp; its
        # logging_test looks for this text at TRACE level).
        _logger.log(
            TRACE, "Adding %s.%s, inputs %s, outputs %s", domain or AI_ONNX, op_type,
            list(inputs), outputs,
        )  # fmt: skip
        return outputs

    def customOp(  # noqa: N802 - the original's name
        self,
        opName: str,  # noqa: N803
        opVersion: int,  # noqa: N803
        domain: str,
        inputs: list,
        attributes: dict,
        numOutputs: int = 1,  # noqa: N803
        name: str = "",
    ) -> list[str]:
        owner = f"customOp {opName} ({domain})"
        onnx_attributes = [make_attribute(key, value, owner) for key, value in attributes.items()]
        domain = domain or AI_ONNX
        # The original's binding adds a custom op at opset version 1 of its domain, whatever
        # its opVersion (python/popart/popart_core/popart.cpp, customOp), so the ops of one
        # custom domain never disagree; PopART's own domains keep the version asked for.
        standard = domain in (AI_ONNX, AI_ONNX_ML, AI_GRAPHCORE)
        return self.add_node(
            opName,
            inputs,
            domain=domain,
            domain_version=int(opVersion) if standard else 1,
            attributes=onnx_attributes,
            num_outputs=int(numOutputs),
            debug_context=name,
        )

    # -- graph inputs and outputs --------------------------------------------------------------

    def addInputTensor(self, *args: Any, **kwargs: Any) -> str:  # noqa: N802
        """(tensorInfo | dataType, shape, [settings], debugContext='') -> the new input's id."""
        _, values = bind("addInputTensor", ADD_INPUT_TENSOR, args, kwargs, owner=BUILDER)
        if "tensorInfo" in values:
            info = values["tensorInfo"]
        else:
            info = TensorInfo(values["dataType"], values["shape"])
        settings, debug_context = values.get("settings"), values["debugContext"]
        tensor_id = self._allocate_id(debug_name(debug_context) or "input")
        self._add_graph_input(
            helper.make_tensor_value_info(tensor_id, info.onnx_type(), info.shape())
        )
        self._metadata[INPUT_DEBUG_ID_PREFIX + tensor_id] = str(
            variable_debug_info_id(debug_context, "addInputTensor", tensor_id)
        )
        if settings is not None:
            self._metadata[names.INPUT_SETTINGS_PREFIX + tensor_id] = encode_input_settings(
                settings
            )
        return tensor_id

    def addUntypedInputTensor(self, debugContext: Any = "") -> str:  # noqa: N802, N803
        if self._parent is None:
            # willow/src/builder_impl.cpp: only a subgraph's inputs may be typed later.
            raise popart_exception("Can not add untyped tensors to the top-level graph.")
        tensor_id = self._allocate_id(debug_name(debugContext) or "input")
        self._add_graph_input(onnx.ValueInfoProto(name=tensor_id))
        return tensor_id

    def _add_graph_input(self, value: onnx.ValueInfoProto) -> None:
        self._graph.input.append(value)
        self._defined.add(value.name)
        self._touch()

    def addInitializedInputTensor(self, initVal: Any, *args: Any, **kwargs: Any) -> str:  # noqa: N802, N803
        """(initVal, debugContext='') or (initVal, variableSettings, debugContext='')."""
        variable_settings, debug_context = _settings_and_debug_context(
            "addInitializedInputTensor", "variableSettings", list(args), kwargs
        )
        array = np.asarray(initVal)
        if array.dtype == object:
            raise popart_exception(
                f"addInitializedInputTensor: cannot store {initVal!r} as a tensor"
            )
        tensor_id = self._allocate_id(debug_name(debug_context) or "init_input")
        # Like PopART, a weight is both an initializer and a graph input.
        self._graph.initializer.append(popart_initializer(array, tensor_id))
        self._add_graph_input(
            helper.make_tensor_value_info(
                tensor_id, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)
            )
        )
        self._metadata[INPUT_DEBUG_ID_PREFIX + tensor_id] = str(
            variable_debug_info_id(debug_context, "addInitializedInputTensor", tensor_id)
        )
        if variable_settings is not None:
            self._metadata[names.VARIABLE_SETTINGS_PREFIX + tensor_id] = encode_variable_settings(
                variable_settings
            )
        return tensor_id

    def addInputTensorFromParentGraph(self, tensorId: str) -> None:  # noqa: N802, N803
        """Declare that this subgraph uses `tensorId` of an enclosing graph."""
        self._check_tensor_id_type(tensorId, "addInputTensorFromParentGraph")
        if self._parent is None:
            raise popart_exception(
                f"addInputTensorFromParentGraph('{tensorId}'): this builder has no parent graph"
            )
        if not self._parent._is_visible(tensorId):
            raise popart_exception(
                f"addInputTensorFromParentGraph: unknown tensor id '{tensorId}': "
                "it is not in the parent graph"
            )
        self._from_parent.setdefault(tensorId, len(self._graph.input))

    def addOutputTensor(self, outputName: str) -> None:  # noqa: N802, N803
        self._check_tensor(outputName, "addOutputTensor")
        if outputName not in self._defined or outputName in self.getOutputTensorIds():
            # ONNX wants a subgraph's outputs made inside it, and each output once: copy an
            # enclosing graph's tensor, or one output again (the original lists a tensor as
            # often as it is added: willow/src/builder_impl.cpp, addOutputTensor; a Loop body
            # scans out its carried value in operators_test/loop_test.py).
            outputName = self.add_node("Identity", [outputName])[0]  # noqa: N806
        self._graph.output.append(onnx.ValueInfoProto(name=outputName))
        self._touch()

    # -- queries -----------------------------------------------------------------------------

    def getInputTensorIds(self) -> list[str]:  # noqa: N802
        return [value.name for value in self._graph.input]

    def getOutputTensorIds(self) -> list[str]:  # noqa: N802
        return [value.name for value in self._graph.output]

    def getValueTensorIds(self) -> list[str]:  # noqa: N802
        return [value.name for value in self._finalized().graph.value_info]

    def getTrainableTensorIds(self) -> list[str]:  # noqa: N802
        return [tensor.name for tensor in self._graph.initializer]

    def isInitializer(self, id: str) -> bool:  # noqa: N802, A002
        return any(tensor.name == id for tensor in self._graph.initializer)

    def _tensor_type(self, tensor_id: str, method: str):
        """The tensor's type, or None for a tensor of this graph whose type is not known."""
        self._check_tensor(tensor_id, method)
        graph = self._finalized().graph
        for value in (*graph.input, *graph.output, *graph.value_info):
            if value.name == tensor_id:
                tensor_type = tensor_type_of(value.type)
                if tensor_type is not None:
                    return tensor_type
        if tensor_id in self._defined or tensor_id in self._from_parent:
            # The original lists every tensor of its graph with the type it could infer, an
            # undefined one if none (an untyped input, a custom op's output), and reads it as
            # no dims and "undefined" (willow/src/builder_impl.cpp, runShapeInference and
            # getTensorShape).
            return None
        raise popart_exception(
            f"{method}: the type and shape of tensor '{tensor_id}' are not known"
        )

    def getTensorShape(self, *args: Any, **kwargs: Any) -> list[int]:  # noqa: N802
        """getTensorShape(id): the tensor's dims, 0 for a dim that is not known (the ONNX
        dim's dim_value, as the original reads it: willow/src/builder_impl.cpp), and none for
        a tensor whose shape is not known."""
        _, values = bind("getTensorShape", GET_TENSOR_SHAPE, args, kwargs, owner=BUILDER)
        id = values["id"]  # noqa: A001 - the original's name
        tensor_type = self._tensor_type(id, "getTensorShape")
        if tensor_type is None or tensor_type.shape is None:
            return []
        return [0 if dim is None else dim for dim in tensor_type.shape]

    def getTensorDtypeString(self, id: str) -> str:  # noqa: N802, A002
        tensor_type = self._tensor_type(id, "getTensorDtypeString")
        if tensor_type is None:
            return lower_case_name(DataType.UNDEFINED)
        return lower_case_name(data_type_of_onnx_type(tensor_type.elem_type))

    # -- models ------------------------------------------------------------------------------

    def createSubgraphBuilder(self) -> _BuilderCore:  # noqa: N802
        return _BuilderCore(_parent=self)

    def setGraphName(self, name: str) -> None:  # noqa: N802
        self._graph.name = name
        self._touch()

    def embedReplicationFactor(self, replicationFactor: int) -> None:  # noqa: N802, N803
        self._metadata[names.REPLICATION_FACTOR] = str(int(replicationFactor))
        self._touch()

    def saveInitializersExternally(self, ids: list[str], filename: str) -> None:  # noqa: N802
        move_initializers_to_file(self._graph.initializer, list(ids), filename)
        self._touch()

    def _ir_version(self, opsets: dict[str, int]) -> int:
        opset_ids = [helper.make_opsetid(onnx_domain(d), v) for d, v in opsets.items()]
        version = helper.find_min_ir_version_for(opset_ids, ignore_unknown=True)
        element_types = {value.type.tensor_type.elem_type for value in self._graph.input}
        element_types |= {tensor.data_type for tensor in self._graph.initializer}
        if element_types & _FLOAT8_TYPES:
            version = max(version, 9)  # float8 types came with IR version 9
        return max(version, self._model_header.ir_version)

    def _model_proto(self) -> ModelProto:
        """The model as built, without inferred types."""
        model = ModelProto()
        model.CopyFrom(self._model_header)
        opsets = self._context.opset_imports()
        model.ir_version = self._ir_version(opsets)
        if not model.producer_name:
            model.producer_name = "openipu.popart.Builder"
        model.ClearField("opset_import")
        for domain, version in opsets.items():
            model.opset_import.append(helper.make_opsetid(onnx_domain(domain), version))
        model.graph.CopyFrom(self._graph)
        for key, value in self._metadata.items():
            model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
        return model

    def _finalized(self) -> ModelProto:
        """The model with every type that can be inferred (cached until the next change)."""
        if self._finalized_cache is None or self._finalized_cache[0] != self._revision:
            self._finalized_cache = (self._revision, infer_types(self._model_proto()))
        return self._finalized_cache[1]

    def subgraph_proto(self) -> GraphProto:
        """This builder's graph, typed as far as it can be on its own, for a node attribute."""
        graph = GraphProto()
        graph.CopyFrom(self._finalized().graph)
        return graph

    def callee_proto(self) -> GraphProto:
        """This builder's graph as a Call's callee: a tensor declared from the parent graph is
        an input where it was declared among the others, as the original's
        addInputTensorFromParentGraph appends a graph input (willow/src/builder_impl.cpp;
        subgraph_tests/subgraph_regression_test.py binds a Call's first argument to it)."""
        graph = self.subgraph_proto()
        formal = list(graph.input)
        names = {value.name for value in formal}
        types = {value.name: value for value in (*graph.value_info, *graph.input)}
        ordered: list[onnx.ValueInfoProto] = []
        parents = sorted(self._from_parent.items(), key=lambda item: item[1])
        for position in range(len(formal) + 1):
            for name, before in parents:
                if before == position and name not in names:
                    known = (
                        self._parent.tensor_value_info(name) if self._parent is not None else None
                    )
                    ordered.append(known or types.get(name) or onnx.ValueInfoProto(name=name))
            if position < len(formal):
                ordered.append(formal[position])
        del graph.input[:]
        graph.input.extend(ordered)
        return graph

    def tensor_value_info(self, name: str) -> onnx.ValueInfoProto | None:
        """The type of a tensor visible here, where it is known."""
        for value in (*self._finalized().graph.input, *self._finalized().graph.value_info):
            if value.name == name:
                return value
        return self._parent.tensor_value_info(name) if self._parent is not None else None

    def getModelProto(self) -> bytes:  # noqa: N802
        return self._finalized().SerializeToString()

    def saveModelProto(self, filename: str) -> None:  # noqa: N802
        model = self._finalized()
        try:
            onnx.checker.check_model(with_relative_external_locations(model))
        except onnx.checker.ValidationError as error:
            raise popart_exception(
                f"saveModelProto: the model is not valid ONNX: {error}"
            ) from None
        with open(filename, "wb") as model_file:
            model_file.write(model.SerializeToString())
