"""`tensorflow.python.ipu.ipu_pipeline_estimator`: the pipelining IPU estimator."""

from openipu._src.estimator.pipeline_estimator import (
    IPUPipelineEstimator,
    IPUPipelineEstimatorSpec,
)

__all__ = ["IPUPipelineEstimator", "IPUPipelineEstimatorSpec"]
