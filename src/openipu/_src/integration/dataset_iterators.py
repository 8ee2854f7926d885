"""`iter(dataset)` in an IPUStrategy scope gives the strategy's iterator.

Why: the original's TensorFlow changed `DatasetV2.__iter__`
(tensorflow/python/data/ops/dataset_ops.py): when eager, it asks the current strategy
`_enable_dataset_iterators()` and, if so, returns `_create_dataset_iterator(dataset)`
(an `ipu_infeed_queue.IPUOwnedIterator`, tensorflow/python/ipu/keras_extensions.py).
Stock TensorFlow has no such hook, so `__iter__` is wrapped to ask the same of the
strategy in scope; every other caller gets the stock iterator, as do tf.distribute's own
per-device iterators (Keras' `train_on_batch` distributes its batch; the original's
strategy has them use legacy iterators, `_enable_legacy_iterators`) and the engine where
it reads datasets on the host itself (`stock_iterator`, `keep_stock_iterator`).

Checked with TensorFlow 2.21 (`DatasetV2.__iter__` makes an `OwnedIterator`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import multi_device_iterator_ops

from openipu._src.integration.patching import Kind, Patch, original, register

_STOCK_ITERATOR = "_openipu_stock_iterator"


def keep_stock_iterator(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`iter(dataset)` gives the stock iterator even in an IPUStrategy scope (for a dataset
    of the engine's own that others iterate, such as Keras)."""
    setattr(dataset, _STOCK_ITERATOR, True)
    return dataset


def stock_iterator(dataset: tf.data.Dataset) -> Any:
    """The stock `iter(dataset)`, whatever the strategy in scope."""
    return original(DATASET_ITER)(dataset)


def _of_distributed_iterator(dataset: tf.data.Dataset) -> bool:
    """Whether `dataset` is a device's dataset of a tf.distribute multi-device iterator
    (multi_device_iterator_ops.py `_create_device_dataset`: the generator, maybe prefetched)."""
    generators = (
        multi_device_iterator_ops._PerDeviceGenerator,  # noqa: SLF001
        multi_device_iterator_ops._ReincarnatedPerDeviceGenerator,  # noqa: SLF001
    )
    for candidate in (dataset, getattr(dataset, "_input_dataset", None)):
        if isinstance(candidate, generators):
            return True
    return False


def _strategy_iter(stock: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def __iter__(self: tf.data.Dataset) -> Any:  # noqa: N807 - the method replaced
        if (
            tf.executing_eagerly()
            and not getattr(self, _STOCK_ITERATOR, False)
            and not _of_distributed_iterator(self)
        ):
            strategy = tf.distribute.get_strategy()
            enabled = getattr(strategy, "_enable_dataset_iterators", None)
            if enabled is not None and enabled():
                return strategy._create_dataset_iterator(self)  # noqa: SLF001 - the protocol
        return stock(self)

    __iter__.__doc__ = stock.__doc__
    return __iter__


DATASET_ITER = register(
    Patch(
        module="tensorflow.python.data.ops.dataset_ops",
        attribute="DatasetV2.__iter__",
        kind=Kind.METHOD,
        replacement=_strategy_iter,
        reason="iter(dataset) in an IPUStrategy scope is the strategy's iterator "
        "(ipu_infeed_queue.IPUOwnedIterator), as the original's dataset_ops.py",
        tensorflow=("2.21",),
    )
)
