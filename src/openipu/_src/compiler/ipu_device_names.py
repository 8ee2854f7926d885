"""A graph's plain `tf.device("/device:IPU:<n>")` means `ipu.scopes.ipu_scope` (the patch
is `integration/ipu_device_names.py`). Installed when `tensorflow.python.ipu` is imported."""

from __future__ import annotations

import contextlib

from openipu._src.integration import ipu_device_names


def _ipu_scope(device: str) -> contextlib.AbstractContextManager[None]:
    # Imported when a graph first names an IPU: `scopes` brings the engine, which importing
    # `tensorflow.python.ipu` does not load.
    from openipu._src.compiler import scopes

    return scopes.ipu_scope(device)


ipu_device_names.install(_ipu_scope)
