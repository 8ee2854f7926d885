"""Host dataset tools (spec section 21.12): dataset benchmarks and `BufferDataset`."""

from openipu._src.data.buffer_dataset import BufferDataset
from openipu._src.data.dataset_benchmark import (
    BenchmarkStats,
    dataset_benchmark,
    infeed_benchmark,
)

__all__ = ["BenchmarkStats", "BufferDataset", "dataset_benchmark", "infeed_benchmark"]
