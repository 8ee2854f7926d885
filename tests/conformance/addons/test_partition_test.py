"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/experimental/auto_pipeline/prediction/partition_test.py`.

`partition.get_auto_pipeline_partition_by_cycle_and_transfer` splits a profiled model
over 2 or 4 IPUs: evenly by cycles, keeping invocations of one layer (shared weights)
on one stage, never putting more code on an IPU than fits, and cutting only where
little data crosses. The expected splits are the original's, worked out by hand.
"""

from __future__ import annotations

import pytest

from ipu_tensorflow_addons.keras.experimental.auto_pipeline.prediction import partition

MIB = 1024**2
CONFIG = {"memoryProportion": 0.85, "usePoplarEstimation": True}


def _cluster(ipus):
    # One byte a cycle on every link, no idle cycles; 894 MiB an IPU.
    link = {"recvGBps": 1, "recvIdleCycle": 0, "sendGBps": 1, "sendIdleCycle": 0}
    return {"clock": 1024**3, "memory": 894, "connection": [dict(link) for _ in range(ipus)]}


def _profile(
    count, names=None, types=None, code=lambda i: 0, inputs=lambda i: 0, outputs=lambda i: 0
):
    # A name per layer (invocations of one layer share it), a type per kind of computation.
    names = names if names is not None else list(range(count))
    types = types if types is not None else names
    return {
        "layerName": [str(n) for n in names],
        "layerType": [str(n) for n in types],
        "layerInfo": [
            {
                "cycle": {"forward": 10000, "backward": 0},
                "memory": {
                    "shared": {},
                    "exclusive": {"vertexCode": code(i)} if code(i) else {},
                    "inputs": inputs(i),
                    "outputs": outputs(i),
                    "maxTemporary": 0,
                    "curCarryOver": 0,
                    "curActivation": 0,
                },
            }
            for i in range(count)
        ],
    }


HUGE = 99999999999
CASES = {
    "even_2": (_profile(6, types=[0] * 6), 2, [[0, 3, 6]]),
    # Layers 0-1 and 2-5 are invocations of two layers: one split only.
    "shared_parameters_2": (_profile(6, names=[0, 0, 1, 1, 1, 1]), 2, [[0, 2, 6]]),
    # Layers 0 and 1 do not fit on one IPU together.
    "memory_2": (_profile(6, code=lambda i: 600 * MIB if i < 2 else 0), 2, [[0, 1, 6]]),
    # Only the cut between layers 1 and 2 moves little data.
    "transfer_2": (
        _profile(
            6,
            inputs=lambda i: 0 if i == 2 else HUGE,
            outputs=lambda i: 0 if i == 1 else HUGE,
        ),
        2,
        [[0, 2, 6]],
    ),
    "even_4": (_profile(16, types=[0] * 16), 4, [[0, 4, 8, 12, 16]]),
    "shared_parameters_4": (
        _profile(16, names=[0] * 2 + [1] * 7 + [2] * 3 + [3] * 4),
        4,
        [[0, 2, 9, 12, 16]],
    ),
    # Layers 0/1, 1/6 and 6/7 do not fit together; the last cut is free (the last
    # stage's cycles dominate).
    "memory_4": (
        _profile(16, code=lambda i: 600 * MIB if i in (0, 1, 6, 7) else 0),
        4,
        [[0, 1, middle, 7, 16] for middle in range(2, 7)],
    ),
    # Cuts at 2, 5, 6 and 8 move little data; 2, 5 and 8 balance the cycles.
    "transfer_4": (
        _profile(
            16,
            inputs=lambda i: 0 if i in (2, 5, 6, 8) else HUGE,
            outputs=lambda i: 0 if i + 1 in (2, 5, 6, 8) else HUGE,
        ),
        4,
        [[0, 2, 5, 8, 16]],
    ),
}


@pytest.mark.follows("testAll")
@pytest.mark.parametrize("case", CASES)
def test_partition(case):
    profile, ipus, allowed = CASES[case]
    split = partition.get_auto_pipeline_partition_by_cycle_and_transfer(
        profile, _cluster(ipus), CONFIG
    )
    assert split in allowed
