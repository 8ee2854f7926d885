"""The `*.cost.json` files: named after the program, written whole or not at all."""

from __future__ import annotations

import json
import os

import pytest
from cost_report_fixtures import make_report

from openipu._src.engine.cost_model import report_files
from openipu._src.reports import cost_files


def test_a_cost_file_is_named_after_its_program_and_reads_back_equal(tmp_path):
    report = make_report(ipus=2, name="bert_train")
    path = report_files.write_cost_json(report, tmp_path / "new")
    assert path == tmp_path / "new" / "bert_train.cost.json"
    assert cost_files.load_cost_report(path) == report


def test_a_program_name_cannot_put_the_file_outside_the_directory(tmp_path):
    assert report_files.cost_file_name("../../etc/my model:1") == "_.._etc_my_model_1.cost.json"
    assert report_files.cost_file_name("..") == "program.cost.json"
    report = make_report(name="../outside")
    assert report_files.write_cost_json(report, tmp_path).parent == tmp_path


def test_the_same_program_compiled_again_replaces_its_file(tmp_path):
    report_files.write_cost_json(make_report(name="step", seed=1), tmp_path)
    newer = make_report(name="step", seed=2)
    report_files.write_cost_json(newer, tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["step.cost.json"]
    assert cost_files.load_cost_report(tmp_path / "step.cost.json") == newer


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "step.cost.json"
    path.write_text("old")

    def fail(descriptor):
        raise OSError("disk full")

    monkeypatch.setattr(report_files.os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        report_files.write_text_atomically(path, "new")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["step.cost.json"]


def test_a_written_file_gets_the_mode_open_would_give(tmp_path):
    # The temporary file is the one renamed into place: not private to its writer.
    mask = os.umask(0o022)
    try:
        report_files.write_text_atomically(tmp_path / "report.html", "x")
    finally:
        os.umask(mask)
    assert (tmp_path / "report.html").stat().st_mode & 0o777 == 0o644


def test_the_directory_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(report_files.REPORT_DIR_ENV, raising=False)
    assert report_files.report_directory() is None
    monkeypatch.setenv(report_files.REPORT_DIR_ENV, str(tmp_path))
    assert report_files.report_directory() == tmp_path


def test_a_file_that_is_not_a_cost_report_is_named_in_the_error(tmp_path):
    broken = tmp_path / "broken.cost.json"
    broken.write_text("{not json")
    with pytest.raises(cost_files.ReportError, match="broken.cost.json: cannot read"):
        cost_files.load_cost_report(broken)
    other = tmp_path / "other.cost.json"
    other.write_text(json.dumps({"program": {}}))
    with pytest.raises(cost_files.ReportError, match="other.cost.json: not a cost report"):
        cost_files.load_cost_report(other)
