"""The HTML page as text: one file that loads nothing, escapes what it shows, and is the
same page for the same reports."""

from __future__ import annotations

import re

from cost_report_fixtures import make_report

from openipu._src.reports import cost_files, html_report

REPORTS = cost_files.by_program_name(
    [make_report(ipus=2, name="two_stage <pipeline>", seed=3), make_report(name="single")]
)


def test_the_page_refers_to_nothing_outside_itself():
    page = html_report.render_html(REPORTS)
    assert not re.search(r"https?:|//[a-z]", page.replace("http-equiv", ""))
    # The only links are to the page's own sections.
    assert re.findall(r'(?:src|href)="([^"]*)"', page) == ["#p0", "#p1"]
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_names_are_escaped():
    page = html_report.render_html(REPORTS)
    assert "<pipeline>" not in page
    assert "two_stage &lt;pipeline&gt;" in page
    assert "&lt;0&gt;&amp;x" in page  # an op's name, "...<0>&x"


def test_the_same_reports_give_the_same_page():
    assert html_report.render_html(REPORTS) == html_report.render_html(dict(REPORTS))


def test_the_page_is_written_to_the_file(tmp_path):
    path = tmp_path / "report.html"
    html_report.write_html_report(REPORTS, path)
    assert path.read_text(encoding="utf-8") == html_report.render_html(REPORTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
