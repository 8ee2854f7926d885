"""IPUConfig.configure_ipu_system delegates to openipu._src.system.configure."""

import subprocess
import sys
import types

from openipu._src.config import IPUConfig


def test_configure_ipu_system_calls_the_system_module(monkeypatch):
    calls = []
    fake_module = types.ModuleType("openipu._src.system.configure")

    def fake_configure_ipu_system(config, device):
        calls.append((config, device))
        return "configured"

    fake_module.configure_ipu_system = fake_configure_ipu_system
    monkeypatch.setitem(sys.modules, "openipu._src.system.configure", fake_module)

    config = IPUConfig()
    config.auto_select_ipus = 2
    assert config.configure_ipu_system() == "configured"
    assert config.configure_ipu_system(device="/device:CPU:0") == "configured"
    assert calls == [(config, "cpu"), (config, "/device:CPU:0")]
    assert calls[0][0] is config


def test_config_package_does_not_import_tensorflow():
    code = (
        "import sys; import openipu._src.config as c; c.IPUConfig().to_json(); "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False"
