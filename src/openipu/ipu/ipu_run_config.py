"""`tensorflow.python.ipu.ipu_run_config`: run configs of the IPU estimators."""

from openipu._src.estimator.run_config import IPURunConfig, RunConfig

__all__ = ["IPURunConfig", "RunConfig"]
