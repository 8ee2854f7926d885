"""`tensorflow.python.ipu.ipu_session_run_hooks`: session run hooks for IPU programs."""

from openipu._src.estimator.session_run_hooks import IPULoggingTensorHook

__all__ = ["IPULoggingTensorHook"]
