"""TensorFlow's eager `Context.configure_collective_ops`, skipped while a strategy is built.

Why: a multi-worker strategy (`CollectiveAllReduceExtended.__init__`) configures
collective ops on the eager context, which TensorFlow refuses once the context
has started, as it has when a program builds its strategy after running ops.
openipu's cluster runtime (`distributed/cluster_runtime.py`) carries the same
settings in the server's session configuration, so the call is skipped within
`configurable_after_startup()`. Before openipu patched the method on the context
instance; the context is a process-wide singleton, so the class is patched now
(the same calls are skipped). Checked with TensorFlow 2.21.
"""

from __future__ import annotations

from openipu._src.integration.patching import Kind, Patch, applied, register


def _skip_early_configuration(*args, **kwargs) -> None:
    del args, kwargs  # carried by the server's session configuration instead


CONFIGURE_COLLECTIVE_OPS = register(
    Patch(
        module="tensorflow.python.eager.context",
        attribute="Context.configure_collective_ops",
        kind=Kind.METHOD,
        replacement=lambda stock: _skip_early_configuration,
        reason="multi-worker strategies built after TensorFlow started must not reconfigure "
        "collectives on the eager context (the server's configuration carries them)",
        tensorflow=("2.21",),
    )
)


def configuration_skipped():
    """Within this context `Context.configure_collective_ops` does nothing (counted, thread-safe)."""
    return applied(CONFIGURE_COLLECTIVE_OPS)
