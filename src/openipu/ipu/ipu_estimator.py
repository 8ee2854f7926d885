"""`tensorflow.python.ipu.ipu_estimator`: the IPU estimator."""

from openipu._src.estimator.ipu_estimator import IPUEstimator
from openipu._src.estimator.spec import IPUEstimatorSpec

__all__ = ["IPUEstimator", "IPUEstimatorSpec"]
