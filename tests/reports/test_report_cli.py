"""`openipu report PROGRAM_OR_DIR`: renders a directory of `*.cost.json` files, or runs a
Python program with OPENIPU_COST_REPORT_DIR set and renders what its programs wrote."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

from cost_report_fixtures import make_report

from openipu._src.cli.main import main
from openipu._src.engine.cost_model import report_files
from openipu._src.reports import json_report

HERE = pathlib.Path(__file__).parent


def _openipu(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "openipu._src.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_a_directory_renders_every_cost_file_below_it(tmp_path, capsys):
    first = make_report(ipus=2, name="train", seed=1)
    second = make_report(fits=False, name="eval", seed=2)
    report_files.write_cost_json(first, tmp_path / "bert")
    report_files.write_cost_json(second, tmp_path / "mlp" / "deeper")
    assert main(["report", str(tmp_path)]) == 0
    assert "2 program(s), 1 out of memory" in capsys.readouterr().out
    assert json_report.read_json_report(tmp_path / "report.json") == {
        "bert/train": first,
        "mlp/deeper/eval": second,
    }
    page = (tmp_path / "report.html").read_text()
    assert 'data-program="bert/train"' in page and 'data-program="mlp/deeper/eval"' in page


def test_the_output_goes_where_o_says(tmp_path):
    report_files.write_cost_json(make_report(name="step"), tmp_path / "in")
    assert main(["report", str(tmp_path / "in"), "-o", str(tmp_path / "out" / "cost")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cost.html", "cost.json"]
    (tmp_path / "dir").mkdir()
    assert main(["report", str(tmp_path / "in"), "-o", str(tmp_path / "dir")]) == 0
    assert sorted(p.name for p in (tmp_path / "dir").iterdir()) == ["report.html", "report.json"]


def test_a_missing_path_is_a_usage_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["report", str(missing)]) == 2
    assert f"{missing}: no such file or directory" in capsys.readouterr().err


def test_a_directory_without_reports_is_a_usage_error_naming_it(tmp_path, capsys):
    (tmp_path / "notes.json").write_text("{}")
    assert main(["report", str(tmp_path)]) == 2
    assert f"{tmp_path}: no cost reports (*.cost.json) found" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()


def test_arguments_are_for_a_program_not_a_directory(tmp_path, capsys):
    report_files.write_cost_json(make_report(), tmp_path)
    assert main(["report", str(tmp_path), "--", "--epochs", "2"]) == 2
    assert "is a directory: arguments (--epochs 2) are for a program" in capsys.readouterr().err


def test_a_broken_cost_file_is_named(tmp_path, capsys):
    (tmp_path / "bad.cost.json").write_text("[]")
    assert main(["report", str(tmp_path)]) == 2
    assert "bad.cost.json: not a cost report" in capsys.readouterr().err


def test_a_file_that_is_no_python_program_is_a_usage_error(tmp_path, capsys):
    text = tmp_path / "notes.txt"
    text.write_text("")
    assert main(["report", str(text)]) == 2
    assert "notes.txt: neither a directory" in capsys.readouterr().err


def _program(tmp_path, body):
    """A Python program that can build CostReports (as the engine will, once it writes them)."""
    path = tmp_path / "train.py"
    path.write_text(
        textwrap.dedent(
            f"""\
            import os, sys
            sys.path.insert(0, {str(HERE)!r})
            from cost_report_fixtures import make_report
            from openipu._src.engine.cost_model import report_files
            directory = os.environ[report_files.REPORT_DIR_ENV]
            """
        )
        + textwrap.dedent(body)
    )
    return path


def test_a_program_runs_with_the_report_directory_set_and_its_reports_are_rendered(tmp_path):
    program = _program(
        tmp_path,
        """\
        print("training on", sys.argv[1:])
        for name in sys.argv[1:]:
            report_files.write_cost_json(make_report(ipus=2, name=name), directory)
        """,
    )
    result = _openipu("report", str(program), "--", "encoder", "decoder", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "training on ['encoder', 'decoder']" in result.stdout
    assert "2 program(s), 0 out of memory" in result.stdout
    reports = json_report.read_json_report(tmp_path / "train.report.json")
    assert reports == {
        "decoder": make_report(ipus=2, name="decoder"),
        "encoder": make_report(ipus=2, name="encoder"),
    }
    assert (tmp_path / "train.report.html").exists()
    # The temporary directory the program wrote to is gone.
    assert not any(p.name.endswith(".cost.json") for p in tmp_path.rglob("*"))


def test_a_program_that_fails_still_gets_its_report_and_its_status(tmp_path, capfd):
    program = _program(
        tmp_path,
        """\
        report_files.write_cost_json(make_report(fits=False, name="too_big"), directory)
        sys.exit(3)  # as a program stopped by an out-of-memory error would
        """,
    )
    assert main(["report", str(program), "-o", str(tmp_path / "oom.html")]) == 3
    captured = capfd.readouterr()
    assert "1 program(s), 1 out of memory" in captured.out
    assert f"{program} exited with status 3" in captured.err
    assert list(json_report.read_json_report(tmp_path / "oom.json")) == ["too_big"]


def test_a_program_that_compiles_nothing_is_a_usage_error(tmp_path, capfd):
    program = _program(tmp_path, "print('no IPU here')\n")
    assert main(["report", str(program)]) == 2
    assert f"{program} compiled no IPU program: no cost reports" in capfd.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["train.py"]
