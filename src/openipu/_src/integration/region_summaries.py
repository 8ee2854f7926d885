"""TensorFlow's `summary_op_util.skip_summary`, true while this thread builds an IPU region.

Why: summaries cannot compile, so a region is built with summary ops skipped, as
`xla.compile` does. TensorFlow's own way (`xla._disable_summary_context`) swaps the
module's function for `lambda: True` and puts back what it found, which is not
thread-safe: two threads building regions at once (workers of a between-graph program
run as threads) can leave the lambda installed for good, and every later summary of
the process is skipped. Here the function is replaced (counted, thread-safe) by one
that skips only in the threads building a region and otherwise asks the stock one.
Checked with TensorFlow 2.21.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from openipu._src.integration.patching import Kind, Patch, applied, register


class _Building(threading.local):
    depth = 0


_building = _Building()


def _skipping_in_regions(stock: Callable[[], bool]) -> Callable[[], bool]:
    def skip_summary() -> bool:
        return _building.depth > 0 or stock()

    return skip_summary


SKIP_SUMMARY = register(
    Patch(
        module="tensorflow.python.distribute.summary_op_util",
        attribute="skip_summary",
        kind=Kind.FUNCTION,
        replacement=_skipping_in_regions,
        reason="summaries are skipped while a thread builds an IPU region, without "
        "affecting other threads (xla._disable_summary_context is not thread-safe)",
        tensorflow=("2.21",),
    )
)


@contextlib.contextmanager
def summaries_skipped() -> Iterator[None]:
    """Within this context, summary ops this thread builds are skipped (as in xla.compile)."""
    with applied(SKIP_SUMMARY):
        _building.depth += 1
        try:
            yield
        finally:
            _building.depth -= 1
