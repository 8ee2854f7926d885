"""The versions an executable depends on (part of every cache key and file)."""

from __future__ import annotations

import functools
import importlib.metadata

import tensorflow as tf


@functools.cache
def current() -> dict[str, str]:
    try:
        openipu_version = importlib.metadata.version("openipu")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        openipu_version = "source"
    return {"openipu": openipu_version, "tensorflow": tf.__version__}
