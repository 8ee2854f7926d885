"""The `poprun` command: start the instances of a distributed program.

    poprun --num-instances 2 --num-replicas 4 python train.py --epochs 3

starts 2 instances of `python train.py --epochs 3` on this machine, each
running 2 of the 4 replicas on an emulated machine of its own 2 IPUs, with
the environment of `environment` (PopDist variables, `TF_CONFIG` with free
loopback ports, `OPENIPU_NUM_IPUS`). Output lines carry their instance
(`[1,0]<stdout>:`); the first instance to fail stops the run.

Several hosts: run the same command on every host with `--host h1,h2,...`
and `--port P`. Instances are split into equal consecutive blocks, one per
host (instance i listens on its host at port P + i); each host starts its
own block, found by its name in the list (or given with `--this-host`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import Sequence

from openipu._src.distributed import environment, launcher

_YES_NO = ("yes", "no")
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


class UsageError(ValueError):
    """A poprun command line that cannot describe a run."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = _parse(list(sys.argv[1:] if argv is None else argv))
        plan = _plan(options)
    except UsageError as error:
        print(f"poprun: error: {error}", file=sys.stderr)
        return 2
    if options.print_topology == "yes":
        _print_topology(plan)
    # SIGTERM ends poprun like Ctrl-C: the instances (in sessions of their own) are stopped.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = launcher.run_instances(
            plan.instances,
            timeout=options.timeout,
            output_from=options.only_output_from_instance,
        )
    except KeyboardInterrupt:
        print("poprun: interrupted; stopped the instances", file=sys.stderr)
        return 130
    except OSError as error:
        print(f"poprun: cannot start {options.program[0]!r}: {error}", file=sys.stderr)
        return 127
    if result.message:
        print(result.message, file=sys.stderr)
    return result.exit_code


def _interrupt(signum, frame) -> None:
    del signum, frame
    raise KeyboardInterrupt


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="poprun",
        description="Start the instances of a distributed IPU program (emulated IPUs).",
    )
    parser.add_argument("--num-instances", type=int, default=1, help="instances (processes)")
    parser.add_argument(
        "--num-replicas",
        type=int,
        default=None,
        help="replicas in total (default: one per instance)",
    )
    parser.add_argument("--ipus-per-replica", type=int, default=1, help="IPUs of one replica")
    parser.add_argument(
        "--host",
        default="localhost",
        help="comma-separated hosts; instances are split evenly over them (default: localhost)",
    )
    parser.add_argument(
        "--this-host", default=None, help="which entry of --host this machine is (default: by name)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="instance i listens on port PORT + i (default: free ports; needed with several hosts)",
    )
    parser.add_argument(
        "--only-output-from-instance",
        type=int,
        default=None,
        help="relay only this instance's output",
    )
    parser.add_argument("--print-topology", choices=_YES_NO, default="no")
    parser.add_argument(
        "--numa-aware", choices=_YES_NO, default="no", help="accepted; emulated IPUs have no NUMA"
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="stop the run after this many seconds"
    )
    # Real PopRun's options for its IPU partition and its MPI launcher: accepted (programs'
    # launch scripts pass them) and without effect, as emulated IPUs need no partition and
    # the instances are started without MPI.
    parser.add_argument(
        "--offline-mode", choices=("on", "off"), default="off", help="accepted; no effect"
    )
    parser.add_argument("--mpi-global-args", default="", help="accepted; no MPI here")
    parser.add_argument("--mpi-local-args", default="", help="accepted; no MPI here")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments")
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    options = _parser().parse_args(argv)
    if not options.program:
        raise UsageError("no program to run: poprun [options] PROGRAM [ARGS...]")
    if options.num_replicas is None:
        options.num_replicas = options.num_instances
    for name in ("num_instances", "num_replicas", "ipus_per_replica"):
        value = getattr(options, name)
        if value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if options.num_replicas % options.num_instances:
        raise UsageError(
            f"--num-replicas {options.num_replicas} is not a multiple of --num-instances "
            f"{options.num_instances}: every instance runs the same number of replicas"
        )
    local_ipus = options.num_replicas // options.num_instances * options.ipus_per_replica
    if local_ipus & (local_ipus - 1):
        raise UsageError(
            f"each instance would run {options.num_replicas // options.num_instances} replica(s) "
            f"of {options.ipus_per_replica} IPU(s), {local_ipus} IPUs, but an IPU device has a "
            "power-of-two number of IPUs (1, 2, 4, 8, ...)"
        )
    shown = options.only_output_from_instance
    if shown is not None and not 0 <= shown < options.num_instances:
        raise UsageError(
            f"--only-output-from-instance {shown} does not exist: there are "
            f"{options.num_instances} instance(s), 0 to {options.num_instances - 1}"
        )
    if options.timeout is not None and options.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {options.timeout:g}")
    if options.port is not None and not 0 < options.port <= 65535 - options.num_instances:
        raise UsageError(
            f"--port {options.port} leaves no room for {options.num_instances} ports below 65536"
        )
    return options


class _Plan:
    """The instances this host starts, and the whole run's addresses."""

    def __init__(self, instances, addresses, hosts) -> None:
        self.instances = instances
        self.addresses = addresses
        self.hosts = hosts


def _plan(options: argparse.Namespace) -> _Plan:
    hosts = [h.strip() for h in options.host.split(",") if h.strip()]
    if not hosts:
        raise UsageError("--host lists no host")
    count = options.num_instances
    if count % len(hosts):
        raise UsageError(
            f"--num-instances {count} cannot be split evenly over the {len(hosts)} host(s) of "
            f"--host {options.host}"
        )
    per_host = count // len(hosts)
    host_of = [hosts[i // per_host] for i in range(count)]
    local = _local_instances(options, hosts, per_host)
    if options.port is not None:
        ports = [options.port + i for i in range(count)]
    elif len(set(hosts)) == 1 and len(local) == count:
        ports = _free_ports(count)
    else:
        raise UsageError("with several hosts, give --port so that every host agrees on the ports")
    addresses = [f"{host}:{port}" for host, port in zip(host_of, ports, strict=True)]
    instances = []
    for index in local:
        placement = environment.Placement(
            num_instances=count,
            instance_index=index,
            num_total_replicas=options.num_replicas,
            num_ipus_per_replica=options.ipus_per_replica,
        )
        env = dict(os.environ)
        env.update(placement.as_environment())
        env[environment.TF_CONFIG] = environment.tf_config_for(addresses, index)
        env["OPENIPU_NUM_IPUS"] = str(placement.num_local_ipus)
        env["PYTHONUNBUFFERED"] = "1"  # lines reach the relay as they are printed
        instances.append(launcher.InstanceSpec(index, options.program, env))
    return _Plan(instances, addresses, host_of)


def _local_instances(options: argparse.Namespace, hosts: list[str], per_host: int) -> list[int]:
    """Indices of the instances this machine starts."""
    if options.this_host is not None:
        if options.this_host not in hosts:
            raise UsageError(f"--this-host {options.this_host} is not in --host {options.host}")
        mine = {options.this_host}
    elif all(h in _LOOPBACK for h in hosts):
        mine = set(hosts)
    else:
        names = {socket.gethostname(), socket.getfqdn(), *_LOOPBACK}
        mine = {h for h in hosts if h in names}
        if len(mine) != 1:
            raise UsageError(
                f"cannot tell which of --host {options.host} this machine ({socket.gethostname()}) "
                "is: give --this-host"
            )
    return [i for i in range(options.num_instances) if hosts[i // per_host] in mine]


def _free_ports(count: int) -> list[int]:
    """Ports free on the loopback interface now (all held open together, so distinct)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _print_topology(plan: _Plan) -> None:
    print("poprun: instance  host:port  replicas  IPUs", file=sys.stderr)
    for spec in plan.instances:
        env = spec.environment
        first = int(env[environment.REPLICA_INDEX_OFFSET])
        local = int(env[environment.NUM_LOCAL_REPLICAS])
        print(
            f"poprun: {spec.index}  {plan.addresses[spec.index]}  {first}..{first + local - 1}  "
            f"{env['OPENIPU_NUM_IPUS']}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
