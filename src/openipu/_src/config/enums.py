"""Enumerations used by `IPUConfig` (spec section 21.7).

Member values are those of the original's protobuf enums (its config.py takes them from
config_pb2 and threestate_pb2): `IPUConfig._create_protobuf` stores them in `IpuOptions`,
and programs compare its fields with `Member.value`.
"""

import enum


class DeviceConnectionType(enum.Enum):
    """Enumeration to describe the mechanism used to attach to the Poplar device.

    * ALWAYS indicates that the system will attach when configuring the device.
    * ON_DEMAND will defer connection to when the IPU is needed.
    * PRE_COMPILE will never try to attach to a device and anything which is meant to be
      executed on the device will return all zeros. Used to pre-compile Poplar programs on
      machines without IPUs.
    * NEVER will never try to attach to a device.
    """

    ALWAYS = 0
    ON_DEMAND = 1
    PRE_COMPILE = 3
    NEVER = 2


class ExecutionProfileType(enum.Enum):
    """The execution profile type indicates the desired information in the execution profile.

    * NO_PROFILE indicates that there should be no execution profiling.
    * DEVICE_PROFILE indicates that the execution profile should contain only device wide
      events.
    * IPU_PROFILE indicates that the profile should contain IPU level execution events.
    * TILE_PROFILE indicates that the profile should contain Tile level execution events.
    """

    NO_PROFILE = 0
    DEVICE_PROFILE = 1
    IPU_PROFILE = 2
    TILE_PROFILE = 3


class MergeRemoteBuffersBehaviour(enum.Enum):
    """When or if compatible remote buffers should be merged.

    * NO_MERGING indicates that there should be no merging.
    * MERGE indicates that all compatible remote buffers will be merged.
    * IF_BENEFICIAL indicates that compatible remote buffers will only be merged when it is
      considered beneficial for code re-use.
    """

    NO_MERGING = 0
    MERGE = 1
    IF_BENEFICIAL = 2


class SchedulingAlgorithm(enum.Enum):
    """Controls the algorithm that the scheduler uses.

    * CHOOSE_BEST compares several of the scheduling algorithms below and selects the one that
      leads to the lowest predicted overall peak liveness.
    * CLUSTERING groups clusters of operations together in order to look through stretches of
      instructions with potentially high liveness.
    * POST_ORDER schedules the instructions in the order which is obtained by walking the graph
      in 'post order'.
    * LOOK_AHEAD looks ahead a number of operations from any schedulable one, as given by the
      maximum scheduler lookahead depth and maximum scheduler search space size options.
    * SHORTEST_PATH gives priority to the shortest path to the root.
    """

    CHOOSE_BEST = 0
    CLUSTERING = 1
    POST_ORDER = 2
    LOOK_AHEAD = 3
    SHORTEST_PATH = 4


class SelectionOrder(enum.Enum):
    """The order in which the IPUs of a multi-IPU device are selected and mapped to shards.

    * AUTO: automatically try and select the best selection given the network.
    * ZIGZAG: follow the natural ordering of IPUs (0, 1, 2, 3, ...).
    * SNAKE: each consecutive shard is directly connected via IPU-Links to the shard before
      and after (0, 1, 3, 2, 4, 5, 7, 6, ...).
    * HOOF: like SNAKE, and the last and first shard are on adjacent IPUs
      (0, 2, 4, ..., 5, 3, 1).

    `openipu._src.config.selection_order.ipu_order` computes these orders.
    """

    AUTO = 0
    ZIGZAG = 1
    SNAKE = 2
    HOOF = 3


class StochasticRoundingBehaviour(enum.Enum):
    """Controls how stochastic rounding is performed.

    OFF disables stochastic rounding. ON enables stochastic rounding. REPLICA_IDENTICAL_ONLY
    enables stochastic rounding for portions of the graph which are identified as being replica
    identical - meaning that when executed with replication they produce the same result on
    each replica.
    """

    OFF = 0
    ON = 1
    REPLICA_IDENTICAL_ONLY = 2
