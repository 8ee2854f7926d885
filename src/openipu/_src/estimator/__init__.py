"""IPU estimators (spec section 21.13): `IPUEstimator`, `IPUPipelineEstimator`, run configs.

TensorFlow 2.21 has no `tf.estimator`, so the estimator loop is ours: a TF1 graph per
call (`train`, `evaluate`, `predict`) whose IPU part is one `ipu_compiler.compile` of a
device loop (`loops.repeat`, or `pipelining_ops.pipeline`), run by a session loop that
drives `tf.compat.v1.train.SessionRunHook`s (`session_loop.py`).
"""
