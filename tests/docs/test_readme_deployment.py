"""The README's deployment examples run as written: the export with openipu, the serving
in stock TensorFlow (a Python where openipu cannot be imported), the embedded runtime."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
from tests.serving import stock_tensorflow

README = pathlib.Path(__file__).parents[2] / "README.md"


def _deployment_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Deployment", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _run(code: str, cwd) -> str:
    program = pathlib.Path(cwd) / "example.py"
    program.write_text(code)
    result = subprocess.run(
        [sys.executable, str(program)], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_the_exported_model_serves_in_stock_tensorflow_as_documented(tmp_path):
    export, serve, _ = _deployment_blocks()
    assert "[[0.4502 0.5498]]" in _run(export, tmp_path)
    assert (tmp_path / "my_model" / "saved_model.pb").exists()
    assert "[[0.4502 0.5498]]" in stock_tensorflow.run_program(serve, cwd=str(tmp_path))


def test_the_embedded_runtime_example_prints_its_result(tmp_path):
    *_, runtime = _deployment_blocks()
    assert "[10. 20.]" in _run(runtime, tmp_path)
    assert (tmp_path / "my_net.poplar_exec").exists()
