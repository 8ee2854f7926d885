"""Cost reports a person reads: one self-contained HTML page and the same data as JSON.

Front-end level: reads the `*.cost.json` files the engine writes
(engine/cost_model/report_files.py) and renders CostReports; the `openipu report` command
(cli/report.py) drives it.
"""
