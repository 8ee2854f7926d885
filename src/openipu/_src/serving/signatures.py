"""The input signatures of an export: checked, then taken from the arguments that give them.

Which arguments may give a step's signature, and the exception types of each refusal,
follow the original (tensorflow/python/ipu/serving.py `_validate_signatures`,
`_prepare_input_signature`).
"""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.python.util import nest


def validate_export_dir(export_dir: Any, purge_export_dir: bool) -> None:
    """A non-empty `export_dir` is emptied with `purge_export_dir`, else refused."""
    if not isinstance(export_dir, (str, os.PathLike)):
        raise TypeError(f"export_dir must be a path (str), got {export_dir!r}")
    if os.path.isdir(export_dir) and os.listdir(export_dir):
        if not purge_export_dir:
            raise ValueError(
                f'Directory "{os.fspath(export_dir)}" is not empty. Please specify an empty '
                "directory, or pass purge_export_dir=True to empty it first."
            )
        shutil.rmtree(export_dir)


def validate_restore_dir(directory: Any, param_name: str) -> None:
    """An existing but empty directory holds no checkpoint (the original's `_validate_dir`)."""
    if os.path.isdir(directory) and not os.listdir(directory):
        raise ValueError(
            f'Directory "{os.fspath(directory)}" passed as "{param_name}" param is empty. '
            "Please specify a correct directory."
        )


def _has_own_signature(step: Any) -> bool:
    return (
        isinstance(step, tf.types.experimental.GenericFunction)
        and getattr(step, "input_signature", None) is not None
    )


def _require_tf_function_signature(step: Any, name: str, dataset_allowed: bool = True) -> None:
    alternatives = f"`{name}_signature`" + (" or `input_dataset`" if dataset_allowed else "")
    if not isinstance(step, tf.types.experimental.GenericFunction):
        raise ValueError(
            f"`input_signature` deduction from given `{name}` is not possible. Please mark it "
            f"as tf.function with `input_signature` parameter set or provide {alternatives}."
        )
    if step.input_signature is None:
        # The original's words (serving.py validate_tf_function).
        raise ValueError(
            f"Empty `input_signature` inside provided tf.function `{name}`. Please specify it "
            f"or provide {alternatives}."
        )


def _check_signature_value(name: str, signature: Any) -> None:
    # The original's messages (serving.py validate_single_signature).
    if not isinstance(signature, (tuple, list)):
        raise TypeError(
            f"`{name}` must be an instance of tuple or list. Received {type(signature)}"
        )
    if not signature:
        raise ValueError(f"`{name}` must be not empty.")
    for index, spec in enumerate(signature):
        if not isinstance(spec, tf.TensorSpec):
            raise TypeError(f"`{name}[{index}]` is not an instance of TensorSpec: {spec!r}")


def validate_signatures(
    predict_step: Callable[..., Any],
    predict_step_signature: Any = None,
    input_dataset: Any = None,
    preprocessing_step: Any = None,
    preprocessing_step_signature: Any = None,
    postprocessing_step: Any = None,
    postprocessing_step_signature: Any = None,
) -> None:
    """Refuses argument combinations from which no signature follows, or which conflict."""
    if preprocessing_step is None:
        if input_dataset is not None and predict_step_signature is not None:
            raise ValueError(
                "Both `predict_step_signature` and `input_dataset` cannot be provided. Please "
                "pass only one of them."
            )
        if input_dataset is None and predict_step_signature is None:
            _require_tf_function_signature(predict_step, "predict_step")
    else:
        if preprocessing_step_signature is not None and input_dataset is not None:
            raise ValueError(
                "Both `preprocessing_step_signature` and `input_dataset` cannot be provided. "
                "Please pass only one of them."
            )
        if predict_step_signature is None and input_dataset is None:
            _require_tf_function_signature(preprocessing_step, "preprocessing_step")
        if predict_step_signature is None:
            _require_tf_function_signature(predict_step, "predict_step", dataset_allowed=False)
    if input_dataset is not None and not isinstance(input_dataset, tf.data.Dataset):
        raise TypeError(
            "If `input_dataset` is provided, it should be an instance of tf.Dataset. "
            f"Received {type(input_dataset)}"
        )
    if postprocessing_step is not None and postprocessing_step_signature is None:
        _require_tf_function_signature(
            postprocessing_step, "postprocessing_step", dataset_allowed=False
        )
    for name, value in (
        ("preprocessing_step_signature", preprocessing_step_signature),
        ("postprocessing_step_signature", postprocessing_step_signature),
        ("predict_step_signature", predict_step_signature),
    ):
        if value is not None:
            _check_signature_value(name, value)


def prepare_input_signature(
    step: Callable[..., Any],
    step_signature: Sequence[tf.TensorSpec] | None = None,
    input_dataset: tf.data.Dataset | None = None,
    non_feed_inputs: Sequence[Any] | None = None,
    drop_non_feed_inputs: bool = True,
) -> list[tf.TensorSpec]:
    """The step's input signature, each spec named after the step's parameter.

    `non_feed_inputs` come first in the step's arguments (a pipeline's `inputs`); with
    `drop_non_feed_inputs` they are not part of the returned signature.
    """
    non_feed = list(non_feed_inputs or [])
    non_feed_specs = [tf.TensorSpec.from_tensor(tf.convert_to_tensor(v)) for v in non_feed]
    if step_signature is not None:
        signature = list(step_signature)
    elif input_dataset is not None:
        signature = non_feed_specs + list(nest.flatten(input_dataset.element_spec))
    elif _has_own_signature(step):
        function: Any = step  # a tf.function with an input_signature (checked just above)
        signature = list(function.input_signature)
    else:
        raise ValueError(f"Missing input_signature for {getattr(step, '__name__', step)}")
    names = list(inspect.signature(step).parameters)
    if non_feed and drop_non_feed_inputs:
        names = names[len(non_feed) :]
        if len(signature) > len(names):
            signature = signature[len(non_feed) :]
    if len(signature) != len(names):
        raise ValueError(
            f"Length of input_signature does not match the number of "
            f"{getattr(step, '__name__', step)} arguments: input_signature {signature}, "
            f"arguments {names}"
        )
    return [
        tf.TensorSpec.from_spec(spec, name=name)
        for spec, name in zip(signature, names, strict=True)
    ]
