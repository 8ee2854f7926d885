"""`tensorflow.python.ipu`: the public IPU API (re-exports only; the code is in `openipu._src`).

Importing this package splits the host CPU into one logical TensorFlow device
per emulated IPU, which must happen before TensorFlow starts its runtime.
Submodules load on first use, as attributes (`ipu.config`) or imports.
"""

import _openipu_startup
from openipu._src.lazy_submodules import LazySubmodules
from openipu._src.system import host_devices

host_devices.ensure_logical_devices()

# A graph's plain tf.device("/device:IPU:<n>") places operations on that emulated IPU.
from openipu._src.compiler import ipu_device_names as _ipu_device_names  # noqa: E402, F401
from openipu._src.integration import variable_initialized_value as _initialized_value  # noqa: E402

# TF1 programs' `Variable.initialized_value()`, which TensorFlow 2.21 refuses.
_initialized_value.install()

# The original exposes `functional_ops.outlined_function` at the top level too
# (tensorflow/python/ipu/__init__.py).
from openipu._src.ops.functional_ops import outlined_function as outlined_function  # noqa: E402

_submodules = LazySubmodules(
    __name__,
    "tensorflow.python.ipu",
    {
        "config",
        "data",
        "dataset_benchmark",
        "distributed",
        "eager",
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
        "popfloat_cast_to_gfloat",
        "scopes",
        "serving",
        "sharding",
        "test_utils",
        "utils",
        "vertex_edsl",
    }
    | _openipu_startup.IPU_OPERATOR_MODULES
    | _openipu_startup.IPU_OPTIMIZER_MODULES,
)
__getattr__ = _submodules.attribute


def __dir__() -> list[str]:
    return _submodules.listing(globals())
