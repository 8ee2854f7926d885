"""Interpreter start-up hook, run by `openipu.pth` in site-packages.

It lives outside the `openipu` package so that running it does not execute
`openipu/__init__.py`.

It makes unmodified IPU programs work without importing openipu:

1. `TF_USE_LEGACY_KERAS=1` is set unless the user already set the variable,
   so `tf.keras` is Keras 2 (`tf_keras`), which IPU programs are written for.
2. An import hook maps the original module paths onto openipu's public
   modules: `tensorflow.python.ipu[.X]` is `openipu.ipu[.X]`, and the Keras 2
   API modules (`tf.keras`, `tensorflow.keras`, `tf_keras`) gain an `ipu`
   attribute (`openipu.keras_ipu`). That attribute is a patch of Keras, so its
   record and installation live in `openipu._src.integration.keras_api_attribute`,
   imported only when a program imports Keras (it imports no TensorFlow).

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
    # The original's generated op modules that programs import (gen_pop_datastream_ops,
    # gen_popops_ops, gen_poputil_ops, gen_poprand_ops, gen_ipu_ops) and its backend's
    # protobuf modules (poplar.driver: config_pb2, option_flag_pb2, threestate_pb2).
    "tensorflow.compiler.plugin": "openipu.compiler_plugin",
}

#: The IPU operator modules: `tensorflow.python.ipu.ops.<name>`, also reachable as
#: `tensorflow.python.ipu.<name>` (the very same module object).
IPU_OPERATOR_MODULES = frozenset(
    {
        "all_to_all_op",
        "application_compile_op",
        "control_flow_ops",
        "cross_replica_ops",
        "custom_ops",
        "embedded_runtime",
        "embedding_ops",
        "f8_ops",
        "functional_ops",
        "grad_util_ops",
        "image_ops",
        "internal_ops",
        "math_ops",
        "nn_ops",
        "normalization_ops",
        "pipelining_ops",
        "rand_ops",
        "reduce_scatter_op",
        "replication_ops",
        "slicing_ops",
        "statistics_ops",
        "within_replica_ops",
    }
)
MODULE_ALIASES.update(
    {f"openipu.ipu.{name}": f"openipu.ipu.ops.{name}" for name in IPU_OPERATOR_MODULES}
)

#: The optimizer modules, reachable as `tensorflow.python.ipu.<name>` too (their older path).
IPU_OPTIMIZER_MODULES = frozenset(
    {
        "cross_replica_optimizer",
        "gradient_accumulation_optimizer",
        "ipu_optimizer",
        "map_gradient_optimizer",
        "sharded_optimizer",
    }
)
MODULE_ALIASES.update(
    {f"openipu.ipu.{name}": f"openipu.ipu.optimizers.{name}" for name in IPU_OPTIMIZER_MODULES}
)

# The original's ipu/__init__.py imports the gfloat casts as `ipu.popfloat_cast_to_gfloat`.
MODULE_ALIASES["openipu.ipu.popfloat_cast_to_gfloat"] = (
    "openipu.ipu.ops.experimental.popfloat_cast_to_gfloat"
)

#: Modules that receive a lazy `ipu` attribute once they have been executed
#: (`openipu._src.integration.keras_api_attribute` declares and applies that patch).
KERAS_API_MODULES = ("tf_keras", "tf_keras.api._v2.keras", "tensorflow.keras")


class _AliasLoader(importlib.abc.Loader):
    """Loads an alias name as the very same module object as its target."""

    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self._target)
        self._target_spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # The target module already ran when it was imported under its own name. The import
        # system has just set its __spec__ to the alias's: give it back its own.
        module.__spec__ = self._target_spec


class _KerasApiLoader(importlib.abc.Loader):
    """Wraps the real loader of a Keras 2 API module to add `ipu` after it ran."""

    def __init__(self, wrapped: importlib.abc.Loader) -> None:
        self._wrapped = wrapped

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._wrapped.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._wrapped.exec_module(module)
        _add_ipu_attribute(module)

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

    # Of the target's special names only `__all__` (star imports read it) and `__ipu__built__`
    # (the original Keras's mark of IPU support, keras/ipu/__init__.py) are forwarded; the
    # others (`__path__`, `__file__`, ...) are probed by the import system and copy/pickle,
    # which must neither load the target nor mistake the proxy for it.
    _FORWARDED_SPECIAL_NAMES = frozenset({"__all__", "__ipu__built__"})

    def __getattr__(self, name: str):
        if _is_special(name) and name not in self._FORWARDED_SPECIAL_NAMES:
            raise AttributeError(name)
        return getattr(self._load(), name)

    def __dir__(self) -> list[str]:
        # Only what __getattr__ gives: the proxy's own names and the target's public ones.
        target = dir(self._load())
        forwarded = {n for n in target if not _is_special(n) or n in self._FORWARDED_SPECIAL_NAMES}
        return sorted(set(super().__dir__()) | forwarded)


def _is_special(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves the original stack's module paths to openipu modules."""

    def find_spec(self, fullname: str, path=None, target=None):
        target_name = resolve_alias(fullname)
        if target_name is not None:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(target_name))
        if fullname in KERAS_API_MODULES:
            spec = _find_with_other_finders(self, fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _KerasApiLoader(spec.loader)
            return spec
        return None


def resolve_alias(fullname: str) -> str | None:
    """The module that `fullname` names, following aliases (None if it is no alias)."""
    for public, private in MODULE_ALIASES.items():
        if fullname == public or fullname.startswith(public + "."):
            target = private + fullname[len(public) :]
            return resolve_alias(target) or target
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
    for name in KERAS_API_MODULES:
        module = sys.modules.get(name)
        if module is not None and not hasattr(module, "ipu"):
            _add_ipu_attribute(module)


def _add_ipu_attribute(module: types.ModuleType) -> None:
    """Gives a Keras API module its lazy `ipu` attribute (openipu's patch of it).

    Imported here, not at the top: the patch's module belongs to the `openipu`
    package, whose `__init__` imports this module, and only a program that
    imports Keras needs it.
    """
    from openipu._src.integration import keras_api_attribute

    keras_api_attribute.add_to(module)


def hook_disabled() -> bool:
    return os.environ.get("OPENIPU_DISABLE_STARTUP_HOOK", "").lower() not in ("", "0", "false")


def activate() -> None:
    """Selects Keras 2 for TensorFlow (unless the user chose) and installs the aliases."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    install()


if not hook_disabled():
    activate()
