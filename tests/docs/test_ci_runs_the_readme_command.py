"""`.ci/run` runs exactly the README's test command (its second command), so what the README
promises is what CI checks."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).parents[2]


def test_ci_runs_the_readme_test_command():
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert block, "the README starts with its commands"
    commands = block.group(1).strip().splitlines()
    assert len(commands) == 2
    script = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert script[-1] == commands[1]
