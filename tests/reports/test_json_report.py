"""The JSON report holds the same CostReports as the page, and reads back equal."""

from __future__ import annotations

import json

import pytest
from cost_report_fixtures import make_report

from openipu._src.reports import cost_files, json_report


def test_the_json_report_reads_back_equal_to_its_reports_in_order(tmp_path):
    reports = cost_files.by_program_name(
        [make_report(ipus=4, name="bert", seed=1), make_report(fits=False, name="mlp", seed=2)]
    )
    path = tmp_path / "report.json"
    json_report.write_json_report(reports, path)
    read = json_report.read_json_report(path)
    assert read == reports
    assert list(read) == ["bert", "mlp"]
    document = json.loads(path.read_text())
    assert document["format"] == "openipu-cost-reports" and document["version"] == 1


def test_reports_of_one_program_name_get_distinct_labels():
    reports = [make_report(name="step", seed=seed) for seed in range(3)]
    labelled = cost_files.by_program_name(reports)
    assert list(labelled) == ["step", "step (2)", "step (3)"]
    assert list(labelled.values()) == reports


def test_a_json_file_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"reports": {}}))
    with pytest.raises(ValueError, match="other.json is not an openipu cost report collection"):
        json_report.read_json_report(path)
