"""The `poprun` command: validation, each instance's environment, output, failures, time limits.

These runs start plain Python programs (no TensorFlow), so they take about a second.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import tomllib

import pytest

from openipu._src.distributed import poprun

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _poprun(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "openipu._src.distributed.poprun", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--num-instances", "2", "--num-replicas", "3"],
            "--num-replicas 3 is not a multiple of --num-instances 2",
        ),
        (
            ["--num-instances", "1", "--num-replicas", "3"],
            "each instance would run 3 replica(s) of 1 IPU(s), 3 IPUs, but an IPU device has a "
            "power-of-two number of IPUs",
        ),
        (
            ["--num-instances", "2", "--num-replicas", "2", "--ipus-per-replica", "3"],
            "3 IPUs, but an IPU device has a power-of-two number",
        ),
        (["--num-instances", "0"], "--num-instances must be at least 1, got 0"),
        (
            ["--num-instances", "2", "--only-output-from-instance", "2"],
            "--only-output-from-instance 2 does not exist: there are 2 instance(s), 0 to 1",
        ),
        (["--timeout", "0"], "--timeout must be positive, got 0"),
        (
            ["--num-instances", "3", "--host", "a,b"],
            "--num-instances 3 cannot be split evenly over the 2 host(s) of --host a,b",
        ),
        (
            ["--num-instances", "2", "--host", "a,b", "--this-host", "a"],
            "with several hosts, give --port",
        ),
        (
            ["--num-instances", "2", "--host", "a,b", "--this-host", "c", "--port", "4000"],
            "--this-host c is not in --host a,b",
        ),
        (
            ["--num-instances", "2", "--host", "a.invalid,b.invalid", "--port", "4000"],
            "cannot tell which of --host a.invalid,b.invalid this machine",
        ),
        (["--num-instances", "2"], "no program to run"),
        (["--num-instances", "two", "python"], "invalid int value: 'two'"),
    ],
)
def test_bad_command_lines_are_refused(args, message, capsys):
    program = [] if "no program" in message else ["python", "-c", "pass"]
    assert poprun.main([*args, *program]) == 2
    error = capsys.readouterr().err
    assert error.startswith("poprun: error: ")
    assert message in error


def test_each_instance_gets_its_place_in_the_run():
    code = (
        "import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
        "if k.startswith(('POPDIST_', 'TF_CONFIG', 'OPENIPU_NUM_IPUS'))}))"
    )
    result = _poprun("--num-instances", "2", "--num-replicas", "4", *_python(code))
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert [line.split(":", 1)[0] for line in lines] == ["[1,0]<stdout>", "[1,1]<stdout>"]
    environments = [json.loads(line.split(":", 1)[1]) for line in lines]
    addresses = json.loads(environments[0]["TF_CONFIG"])["cluster"]["worker"]
    assert len(set(addresses)) == 2 and all(a.startswith("localhost:") for a in addresses)
    for index, env in enumerate(environments):
        assert json.loads(env.pop("TF_CONFIG")) == {
            "cluster": {"worker": addresses},
            "task": {"type": "worker", "index": index},
        }
        assert env == {
            "POPDIST_NUM_INSTANCES": "2",
            "POPDIST_INSTANCE_INDEX": str(index),
            "POPDIST_NUM_TOTAL_REPLICAS": "4",
            "POPDIST_NUM_LOCAL_REPLICAS": "2",
            "POPDIST_REPLICA_INDEX_OFFSET": str(2 * index),
            "POPDIST_NUM_IPUS_PER_REPLICA": "1",
            "OPENIPU_NUM_IPUS": "2",
        }


def test_given_ports_and_hosts_make_the_cluster():
    code = "import os; print(os.environ['TF_CONFIG'])"
    result = _poprun(
        "--num-instances", "4", "--host", "localhost,127.0.0.1", "--this-host", "127.0.0.1",
        "--port", "4100", *_python(code),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    # This machine is the second host: it starts instances 2 and 3 only.
    assert [line.split(":", 1)[0] for line in lines] == ["[1,2]<stdout>", "[1,3]<stdout>"]
    config = json.loads(lines[0].split(":", 1)[1])
    assert config["cluster"]["worker"] == [
        "localhost:4100",
        "localhost:4101",
        "127.0.0.1:4102",
        "127.0.0.1:4103",
    ]


def test_output_lines_keep_their_stream_and_order():
    code = "import sys; print('a'); print('b', file=sys.stderr); print('c')"
    result = _poprun("--num-instances", "2", "--only-output-from-instance", "1", *_python(code))
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["[1,1]<stdout>:a", "[1,1]<stdout>:c"]
    assert result.stderr.splitlines() == ["[1,1]<stderr>:b"]


def test_a_failing_instance_stops_the_others():
    code = (
        "import os, sys, time\n"
        "if os.environ['POPDIST_INSTANCE_INDEX'] == '1': sys.exit(3)\n"
        "time.sleep(60)"
    )
    start = time.monotonic()
    result = _poprun("--num-instances", "2", *_python(code))
    elapsed = time.monotonic() - start
    assert result.returncode == 3
    assert "poprun: instance 1 exited with code 3; stopped instance(s) 0" in result.stderr
    assert elapsed < 15


def test_an_instance_killed_by_a_signal_is_reported():
    code = (
        "import os, signal, time\n"
        "if os.environ['POPDIST_INSTANCE_INDEX'] == '0': os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(60)"
    )
    start = time.monotonic()
    result = _poprun("--num-instances", "2", *_python(code))
    assert result.returncode == 128 + 9
    assert "poprun: instance 0 was killed by signal 9 (SIGKILL); stopped instance(s) 1" in (
        result.stderr
    )
    assert time.monotonic() - start < 15


def test_a_run_over_its_time_limit_is_stopped():
    start = time.monotonic()
    result = _poprun(
        "--num-instances", "2", "--timeout", "1", *_python("import time; time.sleep(60)")
    )
    assert result.returncode == 124
    assert "poprun: the run exceeded --timeout 1 s; stopped instance(s) 0, 1" in result.stderr
    assert time.monotonic() - start < 15


def test_stopping_poprun_stops_its_instances():
    code = "import os, time; print(os.getpid()); time.sleep(60)"
    process = subprocess.Popen(
        [sys.executable, "-m", "openipu._src.distributed.poprun", "--num-instances", "2"]
        + _python(code),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = [int(process.stdout.readline().split(":", 1)[1]) for _ in range(2)]
    process.send_signal(signal.SIGTERM)
    _, error = process.communicate(timeout=15)
    assert process.returncode == 130
    assert "poprun: interrupted; stopped the instances" in error
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_program_that_does_not_exist():
    result = _poprun("--num-instances", "2", "no-such-program-here")
    assert result.returncode == 127
    assert "poprun: cannot start 'no-such-program-here'" in result.stderr


def test_the_topology_is_printed_on_request():
    result = _poprun(
        "--num-instances", "2", "--num-replicas", "4", "--port", "4200", "--print-topology", "yes",
        *_python("pass"),
    )  # fmt: skip
    assert result.returncode == 0
    assert "poprun: 1  localhost:4201  2..3  2" in result.stderr


def test_poprun_is_a_console_script():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["poprun"] == "openipu._src.distributed.poprun:main"
