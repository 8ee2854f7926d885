"""Entry point of the `openipu` command."""

from __future__ import annotations

import argparse
import os
import sys

from openipu._src.cli import demo


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openipu", description="openipu: the IPU programming stack on emulated IPUs"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="list the emulated IPU devices and the configuration")
    info.add_argument(
        "--config",
        metavar="JSON_FILE",
        help="also show the devices an IPUConfig (saved with IPUConfig.to_json) would create",
    )
    demo = commands.add_parser("demo", help="train a small Keras model on emulated IPUs")
    demo.add_argument("--epochs", type=int, default=3)
    demo.add_argument("--batch-size", type=int, default=32)
    demo.add_argument("--steps-per-execution", type=int, default=50)
    demo.add_argument("--samples", type=int, default=32000)
    report = commands.add_parser(
        "report",
        help="the cost model's estimates as an HTML page and JSON",
        description="Renders every *.cost.json below a directory, or runs a Python program "
        "and renders the estimates of the IPU programs it compiles.",
    )
    report.add_argument(
        "path",
        metavar="PROGRAM_OR_DIR",
        help="a Python program to run, or a directory holding *.cost.json files",
    )
    report.add_argument(
        "-o",
        "--out",
        metavar="OUT",
        help="the HTML file (the JSON goes beside it, ending .json) or a directory; default: "
        "DIR/report.html, or PROGRAM.report.html beside the program",
    )
    report.add_argument(
        "program_args", nargs="*", metavar="ARGS", help="the program's arguments, after --"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.command == "info":
        # lazy: info imports TensorFlow, which must start after TF_CPP_MIN_LOG_LEVEL is set
        from openipu._src.cli import info

        return info.run(args.config)
    if args.command == "report":
        # lazy: only `report` needs the report modules
        from openipu._src.cli import report

        return report.run(args.path, args.out, args.program_args)
    return demo.run(
        epochs=args.epochs,
        batch_size=args.batch_size,
        steps_per_execution=args.steps_per_execution,
        samples=args.samples,
    )


if __name__ == "__main__":
    sys.exit(main())
