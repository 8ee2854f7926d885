"""The HTML report in a real browser (headless Chromium): the plots are there with one
element per figure, hold the CostReport's exact numbers, and the headline states them."""

from __future__ import annotations

import re

import pytest
from cost_report_fixtures import make_report

from openipu._src.reports import cost_files, html_report, memory_charts

PIPELINED = make_report(ipus=4, name="bert_pipeline", seed=1)
OUT_OF_MEMORY = make_report(ipus=1, fits=False, name="mlp", seed=2)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    html_report.write_html_report(cost_files.by_program_name([PIPELINED, OUT_OF_MEMORY]), path)
    return path


@pytest.fixture
def page(open_page, report_file):
    page = open_page(report_file)
    yield page
    assert page.problems == []


def _data(within, selector, attribute):
    """`data-<attribute>` of every element `selector` matches in `within` (a page or an
    element), in document order."""
    return within.locator(selector).evaluate_all(
        f"elements => elements.map(e => e.getAttribute('data-{attribute}'))"
    )


def test_the_page_loads_nothing_but_itself(page, report_file):
    assert page.requests == [report_file.resolve().as_uri()]
    assert page.title() == "openipu cost report: 2 programs"


@pytest.mark.parametrize("prefix, report", [("p0", PIPELINED), ("p1", OUT_OF_MEMORY)])
def test_memory_per_ipu_stacks_every_on_chip_category_up_to_the_total(page, prefix, report):
    categories = memory_charts.on_chip_categories([report])
    bars = page.locator(f"#{prefix}-memory g.ipu-memory")
    assert bars.count() == len(report["ipus"])
    for position, ipu in enumerate(report["ipus"]):
        bar = bars.nth(position)
        assert bar.get_attribute("data-total-bytes") == str(ipu["total_bytes"])
        segments = bar.locator("rect.memory-segment")
        assert segments.count() == len(categories)
        sizes = [int(s) for s in _data(bar, "rect.memory-segment", "bytes")]
        assert sizes == [ipu["categories"][name] for name in categories]
        assert sum(sizes) == ipu["total_bytes"]
        line = bar.locator("line.capacity-line")
        assert line.get_attribute("data-bytes") == str(ipu["capacity_bytes"])
    # Drawn, not only present: the plot takes the column's width.
    assert page.locator(f"#{prefix}-memory").bounding_box()["width"] > 500


@pytest.mark.parametrize("prefix, report", [("p0", PIPELINED), ("p1", OUT_OF_MEMORY)])
def test_every_tile_is_a_bar_of_its_bytes_under_the_tile_capacity_line(page, prefix, report):
    per_tile = report["chip"]["bytes_per_tile"]
    for ipu in report["ipus"]:
        plot = f"#{prefix}-ipu{ipu['index']}-tiles"
        assert page.locator(f"{plot} rect.tile").count() == 1472
        assert [int(v) for v in _data(page, f"{plot} rect.tile", "bytes")] == ipu["tile_bytes"]
        over = sum(size > per_tile for size in ipu["tile_bytes"])
        assert page.locator(f"{plot} rect.tile.over").count() == over
        assert page.locator(f"{plot} line.tile-capacity-line").get_attribute("data-bytes") == str(
            per_tile
        )
    assert page.locator(f"#{prefix}-ipu0-tiles").bounding_box()["width"] > 500


def test_the_out_of_memory_program_has_tiles_over_capacity_and_the_other_none(page):
    assert page.locator("#p1-ipu0-tiles rect.tile.over").count() > 0
    assert page.locator("#p0 rect.tile.over").count() == 0


def test_hovering_a_tile_plot_names_the_tile_under_the_pointer(page):
    plot = page.locator("#p0-ipu0-tiles")
    plot.scroll_into_view_if_needed()
    box = plot.bounding_box()
    plot.hover(position={"x": box["width"] * 0.5, "y": box["height"] * 0.6})
    readout = page.locator("#p0-ipu0-tiles-readout").text_content()
    tile = int(re.match(r"tile (\d+): ", readout).group(1))
    assert 600 < tile < 900  # the middle of 1472 tiles, past the axis labels on the left


@pytest.mark.parametrize("prefix, report", [("p0", PIPELINED), ("p1", OUT_OF_MEMORY)])
def test_the_liveness_line_has_a_point_per_op_and_marks_the_peak(page, prefix, report):
    for ipu in report["ipus"]:
        plot = f"#{prefix}-ipu{ipu['index']}-liveness"
        points = page.eval_on_selector(
            f"{plot} polyline.liveness-line", "line => line.points.numberOfItems"
        )
        assert points == len(ipu["liveness"])
        peak = page.locator(f"{plot} circle.liveness-peak")
        assert peak.get_attribute("data-bytes") == str(max(ipu["liveness"]))
        assert int(peak.get_attribute("data-step")) == ipu["liveness"].index(max(ipu["liveness"]))


@pytest.mark.parametrize("prefix, report", [("p0", PIPELINED), ("p1", OUT_OF_MEMORY)])
def test_cycles_per_stage_and_the_costliest_ops_are_bars(page, prefix, report):
    stages = [int(v) for v in _data(page, f"#{prefix}-stages rect.stage-bar", "cycles")]
    assert stages == report["cycles"]["per_stage"]
    costliest = sorted(op["cycles"] for op in report["ops"])[::-1][:20]
    assert [int(v) for v in _data(page, f"#{prefix}-ops rect.op-bar", "cycles")] == costliest
    parts = _data(page, f"#{prefix}-cycle-parts rect.cycle-part", "part")
    assert parts == ["compute", "exchange", "sync", "host_io", "collectives", "pipeline_bubble"]


def test_a_pipeline_has_a_bar_per_stage(page):
    assert page.locator("#p0-stages rect.stage-bar").count() == 4
    assert page.locator("#p1-stages rect.stage-bar").count() == 1


@pytest.mark.parametrize("prefix, report", [("p0", PIPELINED), ("p1", OUT_OF_MEMORY)])
def test_the_largest_tensors_table_lists_them_largest_first(page, prefix, report):
    rows = page.locator(f"#{prefix}-tensors tbody tr")
    assert rows.count() == len(report["largest_tensors"])
    expected = sorted(report["largest_tensors"], key=lambda tensor: -tensor["bytes"])
    names = rows.evaluate_all("rows => rows.map(r => r.cells[0].textContent)")
    assert names == [tensor["name"] for tensor in expected]
    assert [int(v) for v in _data(page, f"#{prefix}-tensors tbody tr", "bytes")] == [
        tensor["bytes"] for tensor in expected
    ]


def test_op_names_show_as_written(page):
    # "<" and "&" in names are text on the page, not markup.
    name = PIPELINED["ops"][0]["name"]
    assert "<" in name and "&" in name
    shown = page.locator("#p0-op-table tbody tr").evaluate_all(
        "rows => rows.map(r => r.cells[0].textContent)"
    )
    assert set(shown) <= {op["name"] for op in PIPELINED["ops"]} and len(shown) == 50


def _number(text):
    """The first figure of `text`, its thousands separators dropped."""
    return int(re.search(r"\d[\d,]*", text).group(0).replace(",", ""))


@pytest.mark.parametrize("prefix, report", [("p0", PIPELINED), ("p1", OUT_OF_MEMORY)])
def test_the_headline_figures_are_the_reports(page, prefix, report):
    cycles, clock = report["cycles"], report["chip"]["clock_hz"]
    for figure, key in (("cycles-per-step", "per_step"), ("cycles-per-call", "per_call")):
        element = page.locator(f"#{prefix}-{figure}")
        assert int(element.get_attribute("data-value")) == cycles[key]
        assert _number(element.text_content()) == cycles[key]
    for figure, key in (("time-per-step", "per_step"), ("time-per-call", "per_call")):
        element = page.locator(f"#{prefix}-{figure}")
        assert float(element.get_attribute("data-value")) == cycles[key] / clock
        assert "GHz" in element.text_content()
    peak = max(ipu["total_bytes"] / ipu["capacity_bytes"] for ipu in report["ipus"])
    shown_peak = int(page.locator(f"#{prefix}-peak-memory").get_attribute("data-value"))
    assert shown_peak in [ipu["total_bytes"] for ipu in report["ipus"]]
    assert any(shown_peak / ipu["capacity_bytes"] == peak for ipu in report["ipus"])
    steps = page.locator(f"#{prefix}-steps-per-call")
    assert int(steps.text_content()) == report["program"]["steps_per_call"]


def test_the_verdicts_say_which_program_fits(page):
    assert page.locator("#p0-verdict").get_attribute("data-fits") == "true"
    assert page.locator("#p0-verdict").text_content().startswith("Fits")
    verdict = page.locator("#p1-verdict")
    assert verdict.get_attribute("data-fits") == "false"
    assert verdict.text_content().startswith("Out of memory: IPU 0 needs")
    overall = page.locator("#overall")
    assert overall.get_attribute("data-out-of-memory") == "1"
    assert "1 of 2 program(s) run out of memory: mlp" in overall.text_content()
    summary = page.locator("#summary tbody tr")
    assert summary.count() == 2
    assert _data(page, "#summary tbody tr", "program") == ["bert_pipeline", "mlp"]
    assert _data(page, "#summary tbody tr", "fits") == ["true", "false"]


def _bare_report():
    """A program the estimator knows little of: no ops, no schedule, no tensors, and a
    memory category outside the schema's list."""
    report = make_report(name="bare", seed=5)
    report["ops"], report["largest_tensors"] = [], []
    report["cycles"]["per_stage"] = [0]
    for ipu in report["ipus"]:
        ipu["liveness"] = []
        ipu["categories"]["host_exchange_buffers"] = 0
    return report


MK1 = make_report(ipus=3, name="mk1_three_stages", seed=4, chip="ipu1")
BARE = _bare_report()


def test_other_chips_and_bare_reports_draw_what_they_hold(open_page, tmp_path):
    path = tmp_path / "report.html"
    html_report.write_html_report(cost_files.by_program_name([MK1, BARE]), path)
    page = open_page(path)
    for ipu in range(3):
        assert page.locator(f"#p0-ipu{ipu}-tiles rect.tile").count() == 1216
    assert page.locator("#p0-stages rect.stage-bar").count() == 3
    assert "256.0 KiB" in page.locator("#p0-chip").text_content()
    assert page.locator("#p1-ops rect.op-bar").count() == 0
    assert page.locator("#p1-tensors tbody tr").count() == 0
    points = page.eval_on_selector(
        "#p1-ipu0-liveness polyline", "line => line.points.numberOfItems"
    )
    assert points == 0 and page.locator("#p1-ipu0-liveness circle").count() == 0
    other = page.locator('#p1-memory rect[data-category="host_exchange_buffers"]')
    assert (
        other.get_attribute("class")
        == "memory-segment category-other category-host_exchange_buffers"
    )
    assert page.problems == []
