"""A failed read of an infeed's dataset ends the process, as on the original.

The original's infeed thread reads the dataset in the background and, when the dataset
iterator fails (anything but its end), logs "An infeed dataset iterator has failed with
status: ..." with LOG(FATAL), which aborts the process
(tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc; infeed_outfeed_test.py
testDatasetExceptionTerminates expects SIGABRT). Here the host reads the dataset with
graph ops built under `READ_SCOPE`; a run that fails in one of them is recognised by the
node named in its error and ends the same way. The end of the dataset (OutOfRangeError)
and an iterator that was never initialized are errors the program can catch, as there.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import tensorflow as tf

from openipu._src.integration import run_errors

#: The name scope of the ops reading an infeed's dataset (their errors name it).
READ_SCOPE = "openipu_infeed_dataset_read"

_RECOVERABLE = (tf.errors.OutOfRangeError,)
_NOT_INITIALIZED = "iterator has not been initialized"


def _aborting_on_failed_read(error: BaseException) -> object:
    if not isinstance(error, tf.errors.OpError) or isinstance(error, _RECOVERABLE):
        return error
    message = str(error.message or "")
    node = str(error.node_def.name) if error.node_def is not None else ""
    # A session's error names the failed node; a tf.function's names it in its message.
    if (READ_SCOPE not in node and READ_SCOPE not in message) or _NOT_INITIALIZED in message:
        return error
    status = f"{type(error).__name__}: {message}"
    sys.stderr.write(f"An infeed dataset iterator has failed with status: {status}\n")
    sys.stderr.flush()
    os.abort()


@contextlib.contextmanager
def dataset_reads() -> Iterator[None]:
    """Ops built in the context read an infeed's dataset: their failure aborts the run's
    process."""
    run_errors.install(_aborting_on_failed_read)
    with tf.name_scope(READ_SCOPE):
        yield
