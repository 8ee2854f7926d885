"""Interpreter start-up hook, run by `openipu.pth` in site-packages.

It lives outside the `openipu` package so that running it does not execute
`openipu/__init__.py`.

It makes unmodified IPU programs work without importing openipu:

1. `TF_USE_LEGACY_KERAS=1` is set unless the user already set the variable,
   so `tf.keras` is Keras 2 (`tf_keras`), which IPU programs are written for.
2. An import hook maps the original module paths onto openipu's public
   modules: `tensorflow.python.ipu[.X]` is `openipu.ipu[.X]`, and the Keras 2
   API modules (`tf.keras`, `tensorflow.keras`, `tf_keras`) gain an `ipu`
   attribute (`openipu.keras_ipu`).

Set `OPENIPU_DISABLE_STARTUP_HOOK=1` to turn all of this off; `import openipu`
(before TensorFlow) then does the same for one program.

This runs in every interpreter: it must stay cheap and never import
TensorFlow.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

#: Public module paths of the original stack -> openipu's public modules.
MODULE_ALIASES: dict[str, str] = {
    "tensorflow.python.ipu": "openipu.ipu",
    "tensorflow.keras.ipu": "openipu.keras_ipu",
    "tf_keras.ipu": "openipu.keras_ipu",
}

#: Modules that receive a lazy `ipu` attribute once they have been executed.
_KERAS_API_MODULES = ("tf_keras", "tf_keras.api._v2.keras")


class _AliasLoader(importlib.abc.Loader):
    """Loads an alias name as the very same module object as its target."""

    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(self._target)

    def exec_module(self, module: types.ModuleType) -> None:
        # The target module was executed when it was imported under its own name.
        return None


class _KerasApiLoader(importlib.abc.Loader):
    """Wraps the real loader of a Keras 2 API module to add `ipu` after it ran."""

    def __init__(self, wrapped: importlib.abc.Loader) -> None:
        self._wrapped = wrapped

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._wrapped.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._wrapped.exec_module(module)
        if not hasattr(module, "ipu"):
            module.ipu = LazyModule("openipu.keras_ipu")

    def __getattr__(self, name: str):
        return getattr(self._wrapped, name)


class LazyModule(types.ModuleType):
    """A module proxy that imports its target on first attribute access.

    Used for `tf.keras.ipu` so that importing Keras does not import openipu.
    """

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self._target = target

    def _load(self) -> types.ModuleType:
        return importlib.import_module(self._target)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self._load(), name)

    def __dir__(self) -> list[str]:
        return dir(self._load())


class AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves the original stack's module paths to openipu modules."""

    def find_spec(self, fullname: str, path=None, target=None):
        for public, private in MODULE_ALIASES.items():
            if fullname == public or fullname.startswith(public + "."):
                return importlib.util.spec_from_loader(
                    fullname, _AliasLoader(private + fullname[len(public) :])
                )
        if fullname in _KERAS_API_MODULES:
            spec = _find_with_other_finders(self, fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _KerasApiLoader(spec.loader)
            return spec
        return None


def _find_with_other_finders(me, fullname, path, target):
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def install() -> None:
    """Installs the alias finder (idempotent) and patches already-imported Keras."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
    for name in _KERAS_API_MODULES:
        module = sys.modules.get(name)
        if module is not None and not hasattr(module, "ipu"):
            module.ipu = LazyModule("openipu.keras_ipu")
    keras_v2 = sys.modules.get("tensorflow.keras")
    if keras_v2 is not None and not hasattr(keras_v2, "ipu"):
        keras_v2.ipu = LazyModule("openipu.keras_ipu")


def hook_disabled() -> bool:
    return os.environ.get("OPENIPU_DISABLE_STARTUP_HOOK", "").lower() not in ("", "0", "false")


def activate() -> None:
    """Selects Keras 2 for TensorFlow (unless the user chose) and installs the aliases."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    install()


if not hook_disabled():
    activate()
