"""Private tf_keras attributes openipu reads, each through one accessor.

Keras offers no public way to reach these; openipu reads them and changes
nothing. Each accessor's `Internal` record says where the attribute lives, why
openipu needs it, and the versions it was checked with;
`tests/integration/test_keras_internals.py` checks every one on real Keras
objects, so an upgrade that renames one fails there and not in a training run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tf_keras.src.engine import data_adapter, training


@dataclass(frozen=True)
class Internal:
    """A private tf_keras attribute openipu reads."""

    owner: str  # "tf_keras.src.engine.training.Model": where Keras defines or sets it
    attribute: str
    reason: str
    tf_keras: tuple[str, ...] = ("2.21",)  # major.minor versions checked


INTERNALS: list[Internal] = []


def _internal(owner: str, attribute: str, reason: str) -> Internal:
    record = Internal(owner, attribute, reason)
    INTERNALS.append(record)
    return record


_internal(
    "tf_keras.src.engine.training.Model",
    "_train_counter",
    "an IPU execution counts its steps as Keras' train_function does (callbacks read it)",
)
_internal(
    "tf_keras.src.engine.training.Model",
    "_test_counter",
    "an IPU execution counts its steps as Keras' test_function does",
)
_internal(
    "tf_keras.src.engine.training.Model",
    "_predict_counter",
    "an IPU execution counts its steps as Keras' predict_function does",
)


def step_counter(model, kind: Literal["train", "test", "predict"]):
    """The model's step counter variable of `fit` (train), `evaluate` (test) or `predict`."""
    return getattr(model, f"_{kind}_counter")


_internal(
    "tf_keras.src.engine.training.Model",
    "_steps_per_execution",
    "fit checks the pipeline/accumulation options against the compiled steps_per_execution",
)


def steps_per_execution(model):
    """The `tf.Variable` `compile(steps_per_execution=...)` set (None before `compile`)."""
    return model._steps_per_execution


_internal(
    "tf_keras.src.engine.base_layer.Layer",
    "_inbound_nodes",
    "pipeline stages are recorded per layer invocation: a functional graph's nodes",
)


def inbound_nodes(layer) -> list:
    """The nodes of the functional graphs in which `layer` was called."""
    return layer._inbound_nodes


_internal(
    "tf_keras.src.engine.base_layer.Layer",
    "_outbound_nodes",
    "a subclassed model's call is traced as a graph of nodes; each trace starts afresh",
)


def outbound_nodes(layer) -> list:
    """The nodes that take `layer`'s outputs."""
    return layer._outbound_nodes


_internal(
    "tf_keras.src.engine.functional",
    "_map_graph_network",
    "a subclassed model's traced call is ordered as a functional graph (its pipeline stages)",
)


def map_graph_network(inputs, outputs) -> dict:
    """The nodes by depth of the graph from `inputs` to `outputs`."""
    import tensorflow as tf
    from tf_keras.src.engine import functional

    return functional._map_graph_network(tf.nest.flatten(inputs), tf.nest.flatten(outputs))[1]


_internal(
    "tf_keras.src.engine.base_layer_utils",
    "call_context",
    "a subclassed model's call is traced in Keras' call context (as `__call__` would)",
)


_internal(
    "tf_keras.src.engine.base_layer_utils.CallContext",
    "layer",
    "a PipelineStage entered in a subclassed model's call marks that model as staged",
)


def calling_layer():
    """The layer (or model) whose call is running in this thread, None outside calls."""
    from tf_keras.src.engine import base_layer_utils

    return base_layer_utils.call_context().layer


def call_context(model, inputs):
    """The context in which `model.call(inputs)` builds a graph (metrics and losses of its
    layers are recorded as in a call)."""
    from tf_keras.src.engine import base_layer_utils

    return base_layer_utils.call_context().enter(layer=model, inputs=inputs, build_graph=True)


_internal(
    "tf_keras.src.engine.training.Model",
    "_set_save_spec",
    "a subclassed model traced for its pipeline stages can be saved, as the original's",
)


def set_save_spec(model, specs) -> None:
    """Sets the input specs a saved model's `call` is traced with (if none are set yet)."""
    model._set_save_spec(specs)


_internal(
    "tf_keras.src.engine.functional.Functional",
    "_nodes_by_depth",
    "pipeline stages are checked in the functional graph's topological order",
)


def nodes_by_depth(model) -> dict:
    """A functional model's nodes by depth (0: its outputs)."""
    return model._nodes_by_depth


_internal(
    "tf_keras.src.engine.training.Model",
    "_build_input_shape",
    "a subclassed model's call is traced once with its build input shape to record stages",
)


def build_input_shape(model):
    """The input shape a built (subclassed or Sequential) model was built with."""
    return model._build_input_shape


_internal(
    "tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2",
    "_compute_gradients",
    "gradient accumulation computes a legacy optimizer's gradients and applies them later",
)


def legacy_compute_gradients(optimizer, loss, var_list, tape=None) -> list:
    """`(gradient, variable)` pairs from a legacy (OptimizerV2) optimizer, as `minimize` does."""
    return optimizer._compute_gradients(loss, var_list=var_list, tape=tape)


_internal(
    "tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2",
    "_get_hyper",
    "the addons' Adam and LAMB read beta_1/beta_2 as their base class does",
)


def optimizer_hyper(optimizer, name: str, dtype=None) -> Any:
    """A legacy optimizer's hyperparameter `name` (a tensor or variable, cast to `dtype`)."""
    return optimizer._get_hyper(name, dtype)


_internal(
    "tf_keras.src.engine.data_adapter",
    "_make_class_weight_map_fn",
    "the IPU data handler weights samples by class_weight as Keras' DataHandler does",
)


def class_weight_map_fn(class_weight: dict):
    """Keras' dataset map function applying `class_weight` to (x, y[, sample_weight])."""
    return data_adapter._make_class_weight_map_fn(class_weight)


_internal(
    "tf_keras.src.engine.training",
    "_disallow_inside_tf_function",
    "an IPU model's fit/evaluate/predict refuse a call inside a tf.function as stock Keras "
    "does, before their own checks read eager values",
)


def disallow_inside_tf_function(method_name: str) -> None:
    """Keras' RuntimeError for `Model.<method_name>` called inside a `tf.function`."""
    training._disallow_inside_tf_function(method_name)


_internal(
    "tf_keras.src.engine.data_adapter.GeneratorDataAdapter",
    "_first_batch_size",
    "IPU programs need a static batch size: a generator's is its first batch's",
)


def first_batch_size(adapter) -> int | None:
    """The size of the first batch a generator adapter peeked at (None for other adapters)."""
    return getattr(adapter, "_first_batch_size", None)


_internal(
    "tf_keras.src.engine.functional.Functional",
    "_serialized_attributes",
    "a model revived from a SavedModel (set by its loader) gets the IPU options in its "
    "metadata's config back",
)


def saved_model_config(model) -> dict:
    """The config a model revived from a SavedModel was saved with ({} for other models)."""
    attributes = getattr(model, "_serialized_attributes", None) or {}
    metadata = attributes.get("metadata") or {}
    config = (metadata.get("model_config") or {}).get("config")
    return config if isinstance(config, dict) else {}


# `IPUDataHandler` (keras/extensions/data_handler.py) subclasses Keras' DataHandler,
# overriding these private hooks and reading the state its constructor sets.
for _name, _reason in (
    ("_configure_dataset_and_inferred_steps", "overridden: the dataset becomes whole executions"),
    ("_infer_steps", "overridden: steps stay counted in batches"),
    ("_adapter", "read: the data adapter (batch size, partial batches)"),
    ("_steps_per_execution", "read: the executions' size"),
    ("_inferred_steps", "set: the steps of an epoch, in batches"),
    ("_dataset", "set: the dataset the handler iterates"),
    ("_model", "read: the model, whose infeed options set the host prefetch"),
    ("steps", "overridden: with asynchronous callbacks, Keras' loop gets every step"),
    ("_current_step", "set: the step of the epoch `steps` is at"),
    ("_initial_step", "set: where `steps` starts (an initial epoch)"),
    ("_step_increment", "set: the steps one yield stands for, less one"),
    ("_insufficient_data", "read: the data ran out"),
):
    _internal("tf_keras.src.engine.data_adapter.DataHandler", _name, _reason)
