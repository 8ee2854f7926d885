"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/experimental/auto_pipeline/utils/types_utils_test.py`.

`types_utils.transfer_cycle` counts the cycles a pipeline stage spends moving data (its
inputs in and outputs out over the links, plus the host's transfers to the first IPU
and from the last), worked out by hand below from the cluster's link speeds and idle
cycles; `aggregate_info_inplace` adds a layer's profile to a range's (cycles summed,
code shared, variables summed, temporary memory and carried-over activations).
"""

from __future__ import annotations

import copy

import pytest

from ipu_tensorflow_addons.keras.experimental.auto_pipeline.utils import types_utils


def _cluster(ipus):
    # 10 bytes a cycle between IPUs, 1 byte a cycle from the host (IPU 0) and to it (last).
    return {
        "clock": 1024**3,
        "memory": 128,
        "connection": [
            {
                "recvGBps": 1 if i == 0 else 10,
                "recvIdleCycle": 1000000 if i == 0 else 100000,
                "sendGBps": 1 if i == ipus - 1 else 10,
                "sendIdleCycle": 1000000 if i == ipus - 1 else 100000,
            }
            for i in range(ipus)
        ],
    }


PROFILE = {
    "layerName": [str(i) for i in range(12)],
    "layerType": [str(i) for i in range(12)],
    "layerInfo": [
        {
            "cycle": {"forward": 10000, "backward": 0},
            "memory": {
                "shared": {},
                "exclusive": {},
                "inputs": (i + 1) * 1000,
                "outputs": (i + 1) * 1000,
                "maxTemporary": 0,
                "curCarryOver": 0,
                "curActivation": 0,
            },
        }
        for i in range(12)
    ],
}

TRANSFER_CASES = [
    # IPU 0 sends 2000 bytes (200 + 100000), receives 1000 from the host (1000 + 1000000);
    # IPU 1 sends 12000 to the host (12000 + 1000000).
    ((2, 0, 0, 1), 2113200),
    # IPU 1 receives 7000 (700 + 100000); the host's transfers as above.
    ((2, 1, 6, 11), 2113700),
    # IPU 1 of 4 receives 3000 (300 + 100000) and sends 5000 (500 + 100000); the host's.
    ((4, 1, 2, 4), 2213800),
]


@pytest.mark.follows("testAll")
@pytest.mark.parametrize("args,expected", TRANSFER_CASES)
def test_transfer_cycle(args, expected):
    ipus, ipu, first, last = args
    assert types_utils.transfer_cycle(_cluster(ipus), ipu, PROFILE, first, last) == expected


@pytest.mark.follows("testAll")
def test_aggregate_info_inplace():
    old_range = {
        "cycle": {"forward": 12345, "backward": 123456},
        "memory": {
            "shared": {"code_1": 1000},
            "exclusive": {"var_1": 10000},
            "maxTemporary": 999999,
            "curActivation": 0,
            "totalMemory": 1000 + 10000 + 999999,
            "inputs": 100,
            "outputs": 100,
        },
    }
    new_layer = {
        "cycle": {"forward": 123, "backward": 1234},
        "memory": {
            "shared": {"code_1": 1000, "code_2": 1000},
            "exclusive": {"var_1": 10000, "var_2": 10000},
            "inputs": 233,
            "outputs": 233,
            "maxTemporary": 9000000,
            "curCarryOver": 999999,
            "curActivation": 0,
        },
    }
    layer_before = copy.deepcopy(new_layer)
    new_range = types_utils.aggregate_info_inplace(old_range, new_layer)
    assert new_range == {
        "cycle": {"forward": 12345 + 123, "backward": 123456 + 1234},
        "memory": {
            "shared": {"code_1": 1000, "code_2": 1000},
            "exclusive": {"var_1": 20000, "var_2": 10000},
            "maxTemporary": 9000000 + 999999,
            "curActivation": 0,
            "totalMemory": 1000 + 1000 + 20000 + 10000 + 9000000 + 999999,
            "inputs": 100,
            "outputs": 233,
        },
    }
    assert new_layer == layer_before
