"""`tensorflow.python.ipu.dataset_benchmark`: timing input pipelines."""

from openipu._src.data.dataset_benchmark import dataset_benchmark, infeed_benchmark

__all__ = ["dataset_benchmark", "infeed_benchmark"]
