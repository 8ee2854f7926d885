"""The page's inline style and script: the report is one file that loads nothing."""

from __future__ import annotations

#: Forbids the page every network load: what it shows is all inside the file.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)

_CATEGORY_COLOURS = {
    "weights": "#4e79a7",
    "optimizer_state": "#f28e2b",
    "activations": "#e15759",
    "gradient_accumulators": "#76b7b2",
    "streams": "#59a14f",
    "exchange": "#edc948",
    "code": "#b07aa1",
    "temporaries": "#ff9da7",
    "remote_buffers": "#9c755f",
    "other": "#bab0ac",
}

_CATEGORY_STYLE = "".join(
    f".category-{name}{{fill:{colour};background:{colour}}}"
    for name, colour in _CATEGORY_COLOURS.items()
)

STYLE = (
    """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em 2em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ccc}
h3{margin-bottom:.3em} .note{color:#666}
table{border-collapse:collapse;margin:.5em 0} th,td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
td.number{text-align:right;font-variant-numeric:tabular-nums} code{font-size:.9em}
dl.headline{display:grid;grid-template-columns:max-content auto;gap:2px 16px}
dl.headline dt{color:#555} dl.headline dd{margin:0;font-weight:600}
.verdict{font-size:1.2em;font-weight:700;padding:.4em .8em;border-radius:4px}
.verdict.fits{background:#e3f4e1;color:#1d5e1a} .verdict.out-of-memory{background:#fbe3e3;color:#8a1414}
tr.oom td{color:#8a1414;font-weight:600}
svg.plot{width:100%;height:auto;display:block;margin:.3em 0;overflow:visible}
svg text{font-size:11px;fill:#333} .bar-label,.axis-label{text-anchor:end} .axis-label.start{text-anchor:start}
.bar{fill:#4e79a7} .op-bar{fill:#59a14f} .stage-bar{fill:#f28e2b}
.capacity-line,.tile-capacity-line{stroke:#c00;stroke-width:1.5;stroke-dasharray:4 3}
.axis{stroke:#999} .tile{fill:#4e79a7} .tile.over{fill:#d62728}
.liveness-line{fill:none;stroke:#e15759;stroke-width:1.5} .liveness-peak{fill:#8a1414}
.ipu-memory.over .bar-value{fill:#8a1414;font-weight:700}
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.4em;vertical-align:-1px}
.ipu-block{max-width:900px}
.readout{color:#555;min-height:1.4em;font-variant-numeric:tabular-nums}
"""
    + _CATEGORY_STYLE
)

#: Hovering a tile plot names the tile under the pointer and its bytes (tile bars are too
#: thin for a tooltip of their own).
SCRIPT = """
function formatBytes(n){var u=["B","KiB","MiB","GiB"],i=0;while(n>=1024&&i<u.length-1){n/=1024;i++}
return i?n.toFixed(1)+" "+u[i]:n+" B"}
document.querySelectorAll("svg.tile-plot").forEach(function(plot){
  var readout=document.getElementById(plot.id+"-readout"),tiles=plot.querySelectorAll("rect.tile");
  if(!readout||!tiles.length)return;
  plot.addEventListener("mousemove",function(event){
    var point=plot.createSVGPoint();point.x=event.clientX;point.y=event.clientY;
    var local=point.matrixTransform(plot.getScreenCTM().inverse());
    var first=tiles[0].x.baseVal.value,width=tiles[0].width.baseVal.value;
    var index=Math.floor((local.x-first)/width);
    if(index<0||index>=tiles.length)return;
    readout.textContent="tile "+index+": "+formatBytes(+tiles[index].getAttribute("data-bytes"));
  });
});
"""
