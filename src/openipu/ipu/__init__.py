"""`tensorflow.python.ipu`: the public IPU API (re-exports only; the code is in `openipu._src`).

Importing this package splits the host CPU into one logical TensorFlow device
per emulated IPU, which must happen before TensorFlow starts its runtime.
Submodules load on first use, as attributes (`ipu.config`) or imports.
"""

import importlib

import _openipu_startup
from openipu._src.system import host_devices

host_devices.ensure_logical_devices()

_SUBMODULES = frozenset(
    {
        "config",
        "data",
        "dataset_benchmark",
        "distributed",
        "gradient_accumulation",
        "horovod",
        "ipu_compiler",
        "ipu_estimator",
        "ipu_infeed_queue",
        "ipu_multi_worker_strategy",
        "ipu_outfeed_queue",
        "ipu_pipeline_estimator",
        "ipu_run_config",
        "ipu_session_run_hooks",
        "ipu_strategy",
        "keras",
        "loops",
        "ops",
        "optimizers",
        "scopes",
        "serving",
        "sharding",
        "utils",
    }
    | _openipu_startup.IPU_OPERATOR_MODULES
    | _openipu_startup.IPU_OPTIMIZER_MODULES
)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tensorflow.python.ipu' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)
