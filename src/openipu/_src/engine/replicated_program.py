"""A program compiled with as many replicas as its configured IPU device holds.

What `ipu_compiler.compile` and `IPUStrategy.run` compile: one region whose replicas
are built in lock-step (`engine.replicas`), R being the device's IPUs over the IPUs one
replica needs (found while building: `replicated.with_replica_count`). Only replica 0's
outputs reach the host. What was compiled is recorded (`compiled_program.recent`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from openipu._src.engine import region, variable_reuse
from openipu._src.engine.replicas import (  # shared_cond, shared_while: their hooks
    lockstep,
    replicated,
    shared_cond,  # noqa: F401
    shared_while,  # noqa: F401
)
from openipu._src.engine.replicas.layout import ReplicaLayout
from openipu._src.engine.value_types import Nested
from openipu._src.system import configure


def compile_replicated(
    computation: Callable[..., Nested],
    inputs: Nested,
    ipu_ordinal: int,
    purpose: str,
    flat_return_rules: bool = True,
) -> Nested:
    """`computation(*inputs)` as one region of R replicas on `/device:IPU:<ipu_ordinal>`."""
    device = configure.current_system(purpose).device(ipu_ordinal)
    numbering = variable_reuse.ScopeNumbering()  # a rebuild numbers scopes as the first

    def attempt(replicas: int) -> Nested:
        def build(layout: ReplicaLayout, *args: Nested) -> Nested:
            return replicated.first_replica_outputs(
                lambda _: computation(*args),
                replicas,
                device.num_ipus,
                ipu_ordinal,
                layout=layout,
            )

        return replicated.traced_once_or_each(lambda: compile_once(build, replicas))

    def compile_once(build: Callable[..., Nested], replicas: int) -> Nested:
        # A build after an abandoned one (more replicas, or the replicas' Python traced
        # once) finds the variables it made.
        rebuilt = replicas < device.num_ipus or lockstep.traces_each_replica()
        # The replicas may become fewer while the program is built (a pipeline in it).
        layout = ReplicaLayout(replicas, device.num_ipus)
        return _reusing_variables_if_rebuilt(rebuilt, numbering)(
            computation if replicas == 1 else functools.partial(build, layout),
            inputs,
            device.host_device(),
            ipu_ordinal=ipu_ordinal,
            flat_return_rules=flat_return_rules,
            record_as=purpose,
            replicas=replicas,
            ipus_per_replica=device.num_ipus // replicas,
            layout=layout,
        )

    return replicated.with_replica_count(device.num_ipus, attempt, f"/device:IPU:{ipu_ordinal}")


def _reusing_variables_if_rebuilt(
    rebuilt: bool, numbering: variable_reuse.ScopeNumbering
) -> Callable[..., Nested]:
    """`region.compile_region`, finding the variables an abandoned first build made.

    A build with fewer replicas than IPUs follows one that found a replica spans several
    IPUs (shards, a pipeline) after making some variables (`tf.compat.v1.get_variable`
    refuses to make them again).
    """
    if not rebuilt or tf.executing_eagerly():
        return region.compile_region

    def compile_again(*args: Any, **kwargs: Any) -> Nested:
        with variable_reuse.finding_variables_again(numbering=numbering):
            return region.compile_region(*args, **kwargs)

    return compile_again
