"""The dictionaries auto_pipeline's profiles, cluster descriptions and configuration are made
of (the original's utils/types.py): field names as the original's, sizes in bytes, times
in IPU cycles."""

from __future__ import annotations

from typing import TypedDict

# The field names are the original's JSON-style keys.
# ruff: noqa: N815


class CycleInfo(TypedDict):
    """Cycles of a layer or a range of layers."""

    forward: int  # one batch's prediction, without IO
    backward: int  # one batch's training step, without IO
    total: int  # computation and data transfer


class MemoryBaseInfo(TypedDict):
    """The memory of a layer or of a pipeline stage on one IPU."""

    shared: dict[str, int]  # "category_number" -> size, counted once per IPU (vertex code)
    exclusive: dict[str, int]  # category -> size, counted for every layer (parameters)
    inputs: int  # input tensors, carried-over tensors for later layers included
    outputs: int  # output tensors, carried-over tensors for later layers included
    curActivation: int  # training: activations held before the backward pass; 0 in prediction


class MemoryLayerInfo(MemoryBaseInfo):
    """The memory of one layer."""

    maxTemporary: int  # the peak of not-always-live memory of the layer alone
    curCarryOver: int  # prediction: tensors of earlier layers needed by later ones


class MemoryRangeInfo(MemoryBaseInfo):
    """The memory of one pipeline stage."""

    maxTemporary: int  # the peak temporary memory over the stage's program steps
    totalMemory: int  # the sum over all categories


class LayerInfo(TypedDict):
    """The analysed profile of one layer."""

    cycle: CycleInfo
    memory: MemoryLayerInfo


class RangeInfo(TypedDict):
    """The analysed profile of a range of layers (a pipeline stage)."""

    cycle: CycleInfo
    memory: MemoryRangeInfo


class ModelInfo(TypedDict):
    """The analysed profile of a model: its layers in order."""

    layerName: list[str]
    layerType: list[str]
    layerInfo: list[LayerInfo]


class ConnectionInfo(TypedDict):
    """The links of one IPU of the pipeline."""

    sendGBps: int  # to the previous device (the host for the first IPU)
    sendIdleCycle: int
    recvGBps: int  # to the next device (the host for the last IPU)
    recvIdleCycle: int


class IPUClusterInfo(TypedDict):
    """The IPUs a model is pipelined over."""

    clock: int  # Hz
    memory: int  # MB per IPU
    connection: list[ConnectionInfo]


class AutoPipelineConfiguration(TypedDict):
    """How auto_pipeline partitions a model."""

    memoryProportion: float  # each stage must fit in this share of an IPU's memory
    usePoplarEstimation: bool  # cycles from Poplar's estimates (True) or from execution (False)
