"""`SessionOptions.serializedPoprithmsShiftGraphsDir`: the graph the scheduler orders, as a
JSON file per scheduled graph (willow/src/scheduler.cpp, serializePoprithmsGraph).

The original writes poprithms' shift graph (ops, their data and topological constraints)
to the next free `poprithms_shift_graph_<i>.json` of the directory, which must exist.
Here the graph is the model's ops with, for each, the ops whose outputs it reads (its
constraints), in the order they run.
"""

from __future__ import annotations

import itertools
import json
import os

import onnx


def shift_graph(graph: onnx.GraphProto) -> dict[str, object]:
    producers = {name: index for index, node in enumerate(graph.node) for name in node.output}
    ops = []
    for index, node in enumerate(graph.node):
        ins = sorted({producers[name] for name in node.input if name in producers})
        ops.append(
            {"id": index, "name": node.name or node.op_type, "type": node.op_type, "ins": ins}
        )
    for op in ops:
        op["outs"] = [other["id"] for other in ops if op["id"] in other["ins"]]
    return {"ops": ops}


def write_shift_graph(directory: str, graph: onnx.GraphProto) -> str:
    """Writes `graph` to the next free poprithms_shift_graph_<i>.json of `directory`."""
    for number in itertools.count():
        path = os.path.join(directory, f"poprithms_shift_graph_{number}.json")
        if not os.path.exists(path):
            break
    with open(path, "w", encoding="utf-8") as file:
        json.dump(shift_graph(graph), file)
    return path
