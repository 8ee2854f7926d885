"""Loops of replicated programs (`tf.while_loop`): one loop, each iteration building every
replica.

On an IPU a collective may sit in a loop whose trip count the replicas agree on
(`assume_equal_across_replicas`, or a count that does not depend on the replica): every
replica runs the loop alike and meets the others in each iteration. A replicated program
traced once copies replica 0's ops for the others, and a loop's body is a function every
copy shares, where replicas cannot meet. So such a loop is built as one loop on replica
0's condition whose body builds every replica's body (`replicated.build_once`), as a
shared conditional (`shared_cond`) or device loop (`shared_loop`) is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorflow.python.util import nest

from openipu._src.engine.replicas import lockstep, replicated, shared_cond, traced_once
from openipu._src.engine.replicas.variable_copies import variables_untouched
from openipu._src.integration import replicated_conds


def _user_while(
    stock: Callable[..., Any],
    cond: Callable[..., Any],
    body: Callable[..., Any],
    loop_vars: Any,
    **options: Any,
) -> Any:
    """A `tf.while_loop` of the user's: as TensorFlow builds it, unless its body holds a
    collective in a program traced once; then one loop for every replica (`_shared`).

    The replicas are assumed to agree on when the loop ends, as on the IPU (a replica that
    disagreed would hang the others' collectives): replica 0's condition decides.
    """
    group = shared_cond.group_building_here()
    if group is None:
        return stock(cond, body, loop_vars, **options)
    try:
        with group.branches_may_meet():
            return stock(cond, body, loop_vars, **options)
    except Exception as error:  # noqa: BLE001 - autograph re-raises it as its own error
        if replicated.cause(error, traced_once.MeetingInBranch) is None:
            raise
    return _shared(stock, cond, body, loop_vars, options)


def _shared(
    stock: Callable[..., Any],
    cond: Callable[..., Any],
    body: Callable[..., Any],
    loop_vars: Any,
    options: dict[str, Any],
) -> Any:
    """One loop on replica 0's condition whose body builds every replica's body."""

    def combine(values: list[tuple[Any, Callable[..., Any]]]) -> list[Any]:
        replicas = len(values)
        count = len(nest.flatten(loop_vars))
        bodies = [own_body for _, own_body in values]

        def own(flat: list[Any], r: int) -> Any:
            """Replica r's loop variables, in their structure."""
            return nest.pack_sequence_as(loop_vars, list(flat[r * count : (r + 1) * count]))

        def replica_zero_condition(*flat: Any) -> Any:
            return cond(*own(list(flat), 0))

        def every_replica(*flat: Any) -> list[Any]:
            per_replica = [own(list(flat), r) for r in range(replicas)]
            outputs = replicated.build_once(
                lambda r, inputs: nest.flatten(bodies[r](*inputs)), replicas, per_replica
            )
            return [tensor for output in outputs for tensor in output]

        flat_vars = [tensor for own_vars, _ in values for tensor in nest.flatten(own_vars)]
        loop_options = {
            name: options[name]
            for name in ("parallel_iterations", "maximum_iterations", "name", "back_prop")
            if name in options
        }
        with lockstep.outside_replicas(), variables_untouched():
            results = stock(replica_zero_condition, every_replica, flat_vars, **loop_options)
        return [own(list(results), r) for r in range(replicas)]

    return lockstep.exchange((loop_vars, body), combine, "a loop")


replicated_conds.install_while(_user_while)
