"""What a program build leaves in its graph's collections when it is abandoned and built again.

A replicated program is sometimes built twice: with fewer replicas once a pipeline or
shards show that a replica spans several IPUs (`replicated.with_replica_count`), or with
one Python trace per replica when its Python could not be traced once
(`replicated.traced_once_or_each`). In a TF1 graph the first build's ops stay (a graph
cannot drop ops), harmless while nothing refers to them; but the user's code also put
them in the graph's collections (`tf.compat.v1.losses.*` in LOSSES, batch norm updates in
UPDATE_OPS, summaries), and the second build reading those collections
(`losses.get_total_loss()`) would count the first build's values too, or fail to compile
when they belong to the abandoned region. The original traces once and never has them.

So the collections go back to what they held before the first build, except for the
variables it made: the second build finds those again (`tf.compat.v1.get_variable`
reuses them) instead of making new ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops


@dataclasses.dataclass(frozen=True)
class CollectionsSnapshot:
    """A graph's collections before a build (None for eager code: there are none)."""

    graph: ops.Graph | None
    items: dict[str, set[int]]  # key -> ids of the items it held

    def restore(self) -> None:
        """Drops what the collections gained since, but the variables."""
        if self.graph is None:
            return
        for key in self.graph.get_all_collection_keys():
            held = self.items.get(key, set())
            collection = self.graph.get_collection_ref(key)
            collection[:] = [item for item in collection if id(item) in held or _is_variable(item)]


def snapshot() -> CollectionsSnapshot:
    """The default graph's collections now."""
    if tf.executing_eagerly():
        return CollectionsSnapshot(None, {})
    graph = ops.get_default_graph()
    return CollectionsSnapshot(
        graph,
        {
            key: {id(item) for item in graph.get_collection(key)}
            for key in graph.get_all_collection_keys()
        },
    )


def _is_variable(item: Any) -> bool:
    return isinstance(item, tf.Variable)
