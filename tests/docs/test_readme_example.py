"""The README's example runs as a plain program (no openipu import) and prints what it says."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).parents[2] / "README.md"


def test_readme_example_prints_its_documented_results(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has a Python example"
    program = tmp_path / "example.py"
    program.write_text(blocks[0])
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    # Ten iterations each add the sum of a 4-vector of ones to the running total.
    assert float(re.findall(r"\d+\.\d*", lines[0])[0]) == 40.0  # tf.Tensor(40.0, ...)
    outfed = [float(v) for v in re.findall(r"\d+\.\d*", " ".join(lines[1:]))]
    assert outfed == [4.0 * i for i in range(1, 11)]
