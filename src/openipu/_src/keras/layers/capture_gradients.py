"""Keras layers that capture the gradients flowing into a wrapped layer's output or into
its activations (`keras.ipu.layers`, graphcore/keras
keras/ipu/layers/capture_upstream_gradients.py).

Their captured gradients reach the optimizer of a model trained on the IPU as
`apply_gradients(..., captured_grads={tag: [gradients]})` when the optimizer
supports them (`keras/extensions/captured_gradients.py`).
"""

from __future__ import annotations

import inspect

import tf_keras
from tensorflow.python.platform import tf_logging as logging

from openipu._src.keras.delegation import delegated
from openipu._src.ops.grad_util_ops import capture_upstream_gradients


class _GradientCaptureLayerBase(tf_keras.layers.Layer):
    """A wrapper of `layer` that owns its weights; `tag` names the captured gradients."""

    def __init__(self, layer, tag) -> None:
        _GradientCaptureLayerBase._check_is_layer(layer)
        self._layer = layer
        self._tag = tag
        super().__init__(dtype=layer.dtype, name=tag)

    def call(self, inputs, *args, **kwargs):
        raise NotImplementedError(
            "_GradientCaptureLayerBase cannot be called. Child classes must "
            "override its call method."
        )

    def build(self, input_shape):
        super().build(input_shape)
        return self.layer.build(input_shape)

    @staticmethod
    def _check_is_layer(layer) -> None:
        if not isinstance(layer, tf_keras.layers.Layer):
            raise ValueError("Expected an instance of a keras.engine.base_layer.Layer")

    @staticmethod
    def _filter_call_kwargs(layer, kwargs: dict) -> dict:
        """`kwargs` for `layer.call`, without `training` when it does not take one."""
        if kwargs and "training" in kwargs:
            keyword_only = inspect.getfullargspec(type(layer).call).kwonlyargs
            if not keyword_only:
                return {}
            if "training" not in keyword_only:
                logging.warning(
                    f"Layer {layer.name} does not take a 'training' kwarg to its call "
                    "method, but one was passed to _GradientCaptureLayerBase.call. "
                    "This keyword argument cannot be delegated to the wrapped layer's "
                    "call method, so is being dropped."
                )
                return {k: v for k, v in kwargs.items() if k != "training"}
        return kwargs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"wrapped_layer_type": type(self.layer), "tag": self.tag})
        return config

    @property
    def tag(self):
        return self._tag

    @property
    def layer(self):
        return self._layer

    # The wrapper's weights are the wrapped layer's.
    non_trainable_variables = delegated("layer", "non_trainable_variables")
    trainable_variables = delegated("layer", "trainable_variables")
    variables = delegated("layer", "variables")
    non_trainable_weights = delegated("layer", "non_trainable_weights")
    trainable_weights = delegated("layer", "trainable_weights")
    weights = delegated("layer", "weights")


class CaptureUpstreamGradients(_GradientCaptureLayerBase):
    """Wraps a layer instance; the gradients flowing into its outputs are captured under
    `tag` (default: the layer's name + "_cug")."""

    def __init__(self, layer, tag=None) -> None:
        super().__init__(layer, tag if tag is not None else layer.name + "_cug")

    def call(self, inputs, *args, **kwargs):
        kwargs = _GradientCaptureLayerBase._filter_call_kwargs(self.layer, kwargs)
        return capture_upstream_gradients(self.layer.call(inputs, *args, **kwargs), tag=self.tag)

    def get_config(self) -> dict:
        return {**super().get_config(), "wrapped_layer_config": self.layer.get_config()}

    @classmethod
    def from_config(cls, config):
        layer = config["wrapped_layer_type"].from_config(config["wrapped_layer_config"])
        return cls(layer, tag=config["tag"])


class _ActivationCapture(tf_keras.layers.Activation):
    """An activation whose input's incoming gradients are captured under `tag`."""

    def __init__(self, activation, tag, **kwargs) -> None:
        super().__init__(activation, **kwargs)
        self._original_activation = activation
        self._tag = tag

    def call(self, inputs):
        return super().call(capture_upstream_gradients(inputs, tag=self._tag))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "activation": self._original_activation,
            "tag": self._tag,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class CaptureActivationGradients(_GradientCaptureLayerBase):
    """Wraps a layer instance that has activations; the gradients flowing into each
    activation are captured under `tag` + "_" + its config key (default tag: the
    layer's name + "_cag")."""

    def __init__(self, layer, tag=None) -> None:
        super().__init__(layer, tag if tag is not None else layer.name + "_cag")
        if not CaptureActivationGradients.layer_is_supported(layer):
            raise ValueError(
                f"Layer {layer.name} does not use an activation function "
                "so is not supported by "
                "keras.ipu.layers.CaptureActivationGradients"
            )
        layer_config = self.layer.get_config()
        self._unwrapped_activations = {}
        wrapped_activations = {}
        for key in CaptureActivationGradients._find_activation_config_items(layer_config):
            self._unwrapped_activations[key] = layer_config[key]
            activation = tf_keras.activations.deserialize(layer_config[key])
            wrapped = _ActivationCapture(activation, tag=f"{self.tag}_{key}")
            wrapped_activations[key] = wrapped
            layer_config[key] = wrapped
        # Kept, as the original keeps them (its tests count them).
        self._wrapped_activations = wrapped_activations
        # The wrapped layer is made again from its config, with the capturing activations.
        with tf_keras.utils.custom_object_scope(wrapped_activations):
            self._layer = type(self.layer).from_config(layer_config)

    def call(self, inputs, *args, **kwargs):
        kwargs = _GradientCaptureLayerBase._filter_call_kwargs(self.layer, kwargs)
        return self.layer.call(inputs, *args, **kwargs)

    @staticmethod
    def _find_activation_config_items(config) -> list[str]:
        if not isinstance(config, dict):
            raise ValueError("Expected a layer configuration dictionary.")

        def valid_activation(key) -> bool:
            try:
                tf_keras.activations.deserialize(config[key])
            except Exception:  # noqa: BLE001 - as the original: anything not an activation
                return False
            return True

        return [k for k in config if "activation" in k and valid_activation(k)]

    @staticmethod
    def layer_is_supported(layer) -> bool:
        """Whether `layer` has activations that can be captured."""
        _GradientCaptureLayerBase._check_is_layer(layer)
        return bool(CaptureActivationGradients._find_activation_config_items(layer.get_config()))

    def get_config(self) -> dict:
        config = super().get_config()
        original = self._layer.get_config()
        original.update(self._unwrapped_activations)
        return {**config, "wrapped_layer_config": original}

    @classmethod
    def from_config(cls, config):
        # The original returns an undefined `StoreActivationGradients` here (a NameError).
        layer = config["wrapped_layer_type"].from_config(config["wrapped_layer_config"])
        return cls(layer, tag=config["tag"])
