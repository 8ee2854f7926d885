"""`IPURunConfig` and `RunConfig` (spec 21.13.3; the original's ipu_run_config.py).

`RunConfig` holds the arguments of the stock `tf.estimator.RunConfig` (gone from
TensorFlow 2.21) with the same defaults, validation and `TF_CONFIG` reading, plus the
IPU part.
"""

from __future__ import annotations

import collections
import copy
import inspect
import json
import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from openipu._src.config.ipu_config import IPUConfig

_USE_DEFAULT = object()
#: The stock RunConfig's default when neither checkpoint interval is given.
DEFAULT_SAVE_CHECKPOINTS_SECS = 600
#: The stock RunConfig's message (tensorflow_estimator run_config.py).
_SAVE_CKPT_ERR = "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."
#: The properties `replace` may set, in the stock RunConfig's order (its message lists them).
_DEFAULT_REPLACEABLE_LIST = [
    "model_dir",
    "tf_random_seed",
    "save_summary_steps",
    "save_checkpoints_steps",
    "save_checkpoints_secs",
    "session_config",
    "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours",
    "log_step_count_steps",
    "train_distribute",
    "device_fn",
    "protocol",
    "eval_distribute",
    "experimental_distribute",
    "experimental_max_worker_delay_secs",
    "session_creation_timeout_secs",
    "checkpoint_save_graph_def",
]


def _configured_device_sizes(ipu_options: IPUConfig) -> list[int | None]:
    """One entry per device the configuration asks for: its IPUs, or None (chosen by index)."""
    auto = ipu_options.auto_select_ipus
    auto_list = [auto] if isinstance(auto, int) else list(auto)
    if auto_list:
        return [int(n) for n in auto_list]
    select = ipu_options.select_ipus
    select_list = [select] if isinstance(select, int) else list(select)
    return [None for _ in select_list]


class IPURunConfig(
    collections.namedtuple(
        "IPURunConfig",
        [
            "iterations_per_loop",
            "ipu_options",
            "num_replicas",
            "num_shards",
            "ordinal",
            "prefetch_depth",
        ],
    )
):
    """IPU related configuration required by `IPUEstimator`."""

    def __new__(
        cls,
        iterations_per_loop: int = 1,
        ipu_options: IPUConfig | None = None,
        num_replicas: int = 1,
        num_shards: int = 1,
        ordinal: int = 0,
        prefetch_depth: int | None = None,
    ) -> IPURunConfig:
        num_devices = num_replicas * num_shards
        # The original's checks and messages (ipu_run_config.py).
        if num_devices > 1 and ipu_options is None:
            raise ValueError(
                "IPU configuration requires more than one device, but `ipu_options` is None"
            )
        num_configured_devices = 1
        if ipu_options is not None:
            if not isinstance(ipu_options, IPUConfig):
                raise TypeError("ipu_options must be an IPUConfig instance.")
            sizes = _configured_device_sizes(ipu_options)
            if ordinal >= len(sizes):
                raise ValueError(
                    f"Only {len(sizes)} device(s) available to choose from. You tried to pick "
                    f"a device at ordinal {ordinal}"
                )
            size = sizes[ordinal]
            # A device chosen by index is checked once it exists (its size is known then).
            num_configured_devices = size if size is not None else num_devices
        if num_devices != num_configured_devices:
            raise ValueError(
                f"`IPURunConfig` configured with {num_devices} devices ({num_replicas} replicas "
                f"times {num_shards} shards), but `IpuOptions` configured with "
                f"{num_configured_devices} devices"
            )
        return super().__new__(
            cls,
            iterations_per_loop=iterations_per_loop,
            ipu_options=ipu_options,
            num_replicas=num_replicas,
            num_shards=num_shards,
            ordinal=ordinal,
            prefetch_depth=prefetch_depth,
        )


class RunConfig:
    """RunConfig with IPU support: the stock estimator RunConfig's arguments, and the IPU's."""

    def __init__(
        self,
        ipu_run_config: IPURunConfig | None = None,
        master: str | None = None,
        *,
        model_dir: str | os.PathLike | None = None,
        tf_random_seed: int | None = None,
        save_summary_steps: int = 100,
        save_checkpoints_steps: Any = _USE_DEFAULT,
        save_checkpoints_secs: Any = _USE_DEFAULT,
        session_config: Any = None,
        keep_checkpoint_max: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000,
        log_step_count_steps: int | None = 100,
        train_distribute: Any = None,
        device_fn: Any = None,
        protocol: str | None = None,
        eval_distribute: Any = None,
        experimental_distribute: Any = None,
        experimental_max_worker_delay_secs: int | None = None,
        session_creation_timeout_secs: int = 7200,
        checkpoint_save_graph_def: bool = True,
    ) -> None:
        # `ipu_run_config` is not checked (ipu_run_config.py): any object with the
        # IPURunConfig attributes the estimators read is accepted, as there.
        # The stock RunConfig's rule: at most one interval; by default every 600 seconds.
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, DEFAULT_SAVE_CHECKPOINTS_SECS
        else:
            save_checkpoints_steps = (
                None if save_checkpoints_steps is _USE_DEFAULT else save_checkpoints_steps
            )
            save_checkpoints_secs = (
                None if save_checkpoints_secs is _USE_DEFAULT else save_checkpoints_secs
            )
        if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(_SAVE_CKPT_ERR)
        if experimental_distribute is not None:
            train_distribute = train_distribute or getattr(
                experimental_distribute, "train_distribute", None
            )
            eval_distribute = eval_distribute or getattr(
                experimental_distribute, "eval_distribute", None
            )
        self._ipu_run_config = ipu_run_config or IPURunConfig()
        self._model_dir = os.fspath(model_dir) if model_dir is not None else None
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute = train_distribute
        self._eval_distribute = eval_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._checkpoint_save_graph_def = checkpoint_save_graph_def
        self._read_tf_config()
        # master is read from TF_CONFIG; only an explicit argument overrides it.
        if master is not None:
            self._master = master
        _check_properties(self)

    def _read_tf_config(self) -> None:
        """The cluster properties from the TF_CONFIG environment variable (stock rules)."""
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        cluster: dict[str, list[str]] = tf_config.get("cluster", {}) or {}
        task = tf_config.get("task", {}) or {}
        self._task_type: str = task.get("type", "worker")
        self._task_id: int = int(task.get("index", 0))
        self._evaluation_master = ""
        if self._task_type == "evaluator":
            self._cluster_spec: dict[str, list[str]] = {}
            self._master = ""
            self._num_ps_replicas = 0
            self._num_worker_replicas = 0
            self._is_chief = False
            return
        self._cluster_spec = cluster
        addresses = cluster.get(self._task_type, [])
        self._master = (
            addresses[self._task_id] if cluster and self._task_id < len(addresses) else ""
        )
        if self._master and not self._master.startswith("grpc://"):
            self._master = "grpc://" + self._master
        self._num_ps_replicas = len(cluster.get("ps", []))
        self._num_worker_replicas = (
            len(cluster.get("worker", [])) + len(cluster.get("chief", [])) if cluster else 1
        )
        if "chief" in cluster:
            self._is_chief = self._task_type == "chief"
        else:
            self._is_chief = self._task_type == "worker" and self._task_id == 0

    @property
    def ipu_run_config(self) -> IPURunConfig:
        return self._ipu_run_config

    @property
    def master(self) -> str:
        return self._master

    @property
    def evaluation_master(self) -> str:
        return self._evaluation_master

    @property
    def model_dir(self) -> str | None:
        return self._model_dir

    @property
    def tf_random_seed(self) -> int | None:
        return self._tf_random_seed

    @property
    def save_summary_steps(self) -> int:
        return self._save_summary_steps

    @property
    def save_checkpoints_steps(self) -> int | None:
        return self._save_checkpoints_steps

    @property
    def save_checkpoints_secs(self) -> float | None:
        return self._save_checkpoints_secs

    @property
    def session_config(self) -> Any:
        return self._session_config

    @property
    def keep_checkpoint_max(self) -> int | None:
        return self._keep_checkpoint_max

    @property
    def keep_checkpoint_every_n_hours(self) -> float:
        return self._keep_checkpoint_every_n_hours

    @property
    def log_step_count_steps(self) -> int | None:
        return self._log_step_count_steps

    @property
    def train_distribute(self) -> Any:
        return self._train_distribute

    @property
    def eval_distribute(self) -> Any:
        return self._eval_distribute

    @property
    def device_fn(self) -> Any:
        return self._device_fn

    @property
    def protocol(self) -> str | None:
        return self._protocol

    @property
    def experimental_max_worker_delay_secs(self) -> int | None:
        return self._experimental_max_worker_delay_secs

    @property
    def session_creation_timeout_secs(self) -> int:
        return self._session_creation_timeout_secs

    @property
    def checkpoint_save_graph_def(self) -> bool:
        return self._checkpoint_save_graph_def

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        return self._cluster_spec

    @property
    def task_type(self) -> str:
        return self._task_type

    @property
    def task_id(self) -> int:
        return self._task_id

    @property
    def num_ps_replicas(self) -> int:
        return self._num_ps_replicas

    @property
    def num_worker_replicas(self) -> int:
        return self._num_worker_replicas

    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def global_id_in_cluster(self) -> int:
        return self._task_id

    def __deepcopy__(self, memo: dict) -> RunConfig:
        # The distribution strategies are shared, not copied: each owns its process's
        # place in the cluster (the estimator hands out deep copies of its config).
        shared = (self._train_distribute, self._eval_distribute, self._experimental_distribute)
        memo.update({id(strategy): strategy for strategy in shared if strategy is not None})
        new = copy.copy(self)
        memo[id(self)] = new
        for name, value in vars(self).items():
            setattr(new, name, copy.deepcopy(value, memo))
        return new

    def replace(self, **kwargs: Any) -> RunConfig:
        """A copy with the given properties replaced (the stock RunConfig's method).

        As there, replacing one checkpoint interval (with a value) clears the other; both
        may be given together only if one of them is None.
        """
        for name in kwargs:
            if name not in _DEFAULT_REPLACEABLE_LIST:
                raise ValueError(
                    f"Replacing {name} is not supported. Allowed properties are "
                    f"{_DEFAULT_REPLACEABLE_LIST}."
                )
        new = copy.copy(self)
        for name, value in kwargs.items():
            if name == "model_dir" and value is not None:
                value = os.fspath(value)
            setattr(new, f"_{name}", value)
        steps, secs = new._save_checkpoints_steps, new._save_checkpoints_secs
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" in kwargs:
            if steps is not None and secs is not None:
                raise ValueError(_SAVE_CKPT_ERR)
        elif "save_checkpoints_steps" in kwargs and steps is not None:
            new._save_checkpoints_secs = None
        elif "save_checkpoints_secs" in kwargs and secs is not None:
            new._save_checkpoints_steps = None
        _check_properties(new)
        return new


def _device_fn_takes_op(device_fn: Any) -> bool:
    try:
        parameters = inspect.signature(device_fn).parameters
    except (TypeError, ValueError):
        return False
    return list(parameters) == ["op"]


#: (property, the value is valid, the stock message): tensorflow_estimator's RunConfig checks
#: them in its constructor and replace() (run_config.py, _validate_properties); a None value
#: is not checked.
_PROPERTY_RULES: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("model_dir", bool, "model_dir should be non-empty"),
    ("save_summary_steps", lambda steps: steps >= 0, "save_summary_steps should be >= 0"),
    (
        "save_checkpoints_steps",
        lambda steps: steps >= 0,
        "save_checkpoints_steps should be >= 0",
    ),
    ("save_checkpoints_secs", lambda secs: secs >= 0, "save_checkpoints_secs should be >= 0"),
    (
        "session_config",
        lambda config: isinstance(config, tf.compat.v1.ConfigProto),
        "session_config must be instance of ConfigProto",
    ),
    ("keep_checkpoint_max", lambda count: count >= 0, "keep_checkpoint_max should be >= 0"),
    (
        "keep_checkpoint_every_n_hours",
        lambda hours: hours > 0,
        "keep_checkpoint_every_n_hours should be > 0",
    ),
    ("log_step_count_steps", lambda steps: steps > 0, "log_step_count_steps should be > 0"),
    ("tf_random_seed", lambda seed: isinstance(seed, int), "tf_random_seed must be integer."),
    (
        "experimental_max_worker_delay_secs",
        lambda secs: isinstance(secs, int),
        "experimental_max_worker_delay_secs must be an integer if set.",
    ),
    (
        "session_creation_timeout_secs",
        lambda secs: secs > 0,
        "session_creation_timeout_secs should be > 0",
    ),
    (
        "device_fn",
        lambda device_fn: callable(device_fn) and _device_fn_takes_op(device_fn),
        'device_fn must be callable with exactly one argument "op".',
    ),
    (
        "protocol",
        lambda protocol: protocol in (None, "grpc", "grpc+verbs"),
        "protocol should be grpc or grpc+verbs",
    ),
)


def _check_properties(config: RunConfig) -> None:
    for name, valid, message in _PROPERTY_RULES:
        value = getattr(config, f"_{name}")
        if value is not None and not valid(value):
            raise ValueError(message)
