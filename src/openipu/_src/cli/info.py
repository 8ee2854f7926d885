"""`openipu info`: the emulated machine, its device listing and the active settings.

Like the original's device listing tool (`gc-info -l`), plus the settings
that change how openipu runs programs.
"""

from __future__ import annotations

import json
import os

import _openipu_startup
from openipu._src.config import poplar_flags
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.engine import compile_policy
from openipu._src.system import configure, host_devices, topology


def _listing_lines(num_ipus: int) -> list[str]:
    lines = ["Emulated IPU device listing:", ""]
    for entry in topology.device_listing(num_ipus):
        kind = "IPU" if entry.num_ipus == 1 else f"Multi IPU ({entry.num_ipus} IPUs)"
        ipus = ",".join(str(i) for i in entry.ipus)
        hosts = [host_devices.host_device_for_ipu(i) for i in entry.ipus]
        host_text = hosts[0] if len(hosts) == 1 else f"{hosts[0]} .. {hosts[-1]}"
        lines.append(
            f"-+- Id: [{entry.device_id:2d}], type: [{kind}], IPUs: [{ipus}] on {host_text}"
        )
    return lines


def _settings_lines() -> list[str]:
    import tensorflow as tf
    import tf_keras

    hook = "off" if _openipu_startup.hook_disabled() else "on"
    forced = compile_policy.forced_mode()
    return [
        "",
        "Settings:",
        f"  IPUs in the emulated machine ({topology.NUM_IPUS_ENV}): {topology.num_emulated_ipus()}",
        f"  compilation ({compile_policy.COMPILE_MODE_ENV}): "
        + (forced.value if forced else "auto (XLA unless slower or impossible)"),
        f"  TF_POPLAR_FLAGS: {' '.join(poplar_flags.poplar_flags()) or '(none)'}",
        f"  synthetic data: {poplar_flags.use_synthetic_data()}",
        f"  start-up hook (OPENIPU_DISABLE_STARTUP_HOOK): {hook}",
        f"  Keras for tf.keras: tf_keras {tf_keras.__version__}"
        f" (TF_USE_LEGACY_KERAS={os.environ.get('TF_USE_LEGACY_KERAS', '')})",
        f"  TensorFlow {tf.__version__}, logical host devices: "
        f"{len(tf.config.list_logical_devices('CPU'))} CPU, "
        f"{len(tf.config.list_logical_devices('GPU'))} GPU",
    ]


def _config_lines(path: str) -> list[str]:
    config = IPUConfig()
    with open(path) as handle:
        config.from_json(handle.read())
    config.validate()
    configure.configure_ipu_system(config)
    system = configure.current_system()
    lines = ["", f"Devices of {path}:"]
    for device in system.devices:
        lines.append(f"  {device.name}: IPUs {list(device.ipus)}")
    changed = {k: v for k, v in json.loads(config.to_json()).items() if k in _changed(config)}
    lines.append(f"  options changed from the defaults: {changed or 'none'}")
    configure.reset_ipu_configuration()
    return lines


def _changed(config) -> set[str]:
    defaults = IPUConfig().to_dict()
    return {k for k, v in config.to_dict().items() if defaults.get(k) != v}


def run(config_path: str | None = None) -> int:
    host_devices.ensure_logical_devices()
    lines = _listing_lines(topology.num_emulated_ipus()) + _settings_lines()
    if config_path:
        lines += _config_lines(config_path)
    print("\n".join(lines))
    return 0
