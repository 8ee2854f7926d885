"""`IPUEstimator` (spec 21.13.1): an estimator whose steps run in a device loop on an IPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorflow.python.util import function_utils

from openipu._src.estimator.estimator_base import IPUEstimatorBase
from openipu._src.estimator.model_fn_wrapper import ModelFnWrapper

#: The arguments a model_fn may take (the stock Estimator's).
_VALID_MODEL_FN_ARGS = frozenset({"features", "labels", "mode", "params", "self", "config"})


def verify_model_fn_args(model_fn: Callable[..., Any], params: dict | None) -> None:
    """The stock Estimator's checks of a model_fn's signature, and its messages."""
    args = set(function_utils.fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, but params ({params}) "
            "is passed to Estimator."
        )
    unexpected = sorted(args - _VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}")


class IPUEstimator(IPUEstimatorBase):
    """Estimator with IPU support: each call runs `iterations_per_loop` steps per session run.

    IPUEstimator(model_fn, model_dir=None, config=None, params=None, warm_start_from=None,
    train_batch_size=None, eval_batch_size=None, predict_batch_size=None)
    """

    _wrapper_class = ModelFnWrapper

    def _verify_model_fn(self, model_fn: Callable[..., Any], params: dict | None) -> None:
        verify_model_fn_args(model_fn, params)
