"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/ipu_session_run_hooks_test.py`.

`IPULoggingTensorHook` logs tensors of a compiled program from the host: at the end of a
session, every N iterations or every N seconds, the last value or all values since the
last log, through `tf_logging.info`.
"""

from __future__ import annotations

import time
from unittest import mock

import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ipu_session_run_hooks import IPULoggingTensorHook
from tensorflow.python.platform import tf_logging

Session = tf.compat.v1.train.MonitoredTrainingSession


@pytest.fixture(autouse=True)
def graph(tf1_graph):
    return tf1_graph


class _Log:
    """Records what `tf_logging.info` was last called with."""

    def __init__(self):
        self.message = ""
        self.messages = []

    def __call__(self, *args, **kwargs):
        self.message = args
        self.messages.append(str(args))

    def __str__(self):
        return str(self.message)


@pytest.fixture
def log():
    recorder = _Log()
    with mock.patch.object(tf_logging, "info", recorder):
        yield recorder


def _compiled(model):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        return ipu.ipu_compiler.compile(model)


@pytest.mark.follows("test_illegal_args")
def test_illegal_args():
    with pytest.raises(ValueError, match="Cannot provide both every_n_iter and every_n_secs"):
        IPULoggingTensorHook(every_n_iter=5, every_n_secs=5)
    with pytest.raises(
        ValueError, match="Either every_n_iter, every_n_secs or at_end should be provided"
    ):
        IPULoggingTensorHook()


@pytest.mark.follows("test_illegal_log_types")
def test_illegal_log_types():
    hook = IPULoggingTensorHook(at_end=True)
    for value in ("foo", [1.0]):
        with pytest.raises(TypeError, match="Expected `tf.Tensor`"):
            hook.log(value)


@pytest.mark.follows("test_missing_log_call")
def test_missing_log_call():
    with pytest.raises(RuntimeError, match="Did you forget to call the log function"):
        IPULoggingTensorHook(at_end=True).begin()


@pytest.mark.follows("test_log_twice_not_supported")
def test_log_twice_not_supported():
    hook = IPULoggingTensorHook(at_end=True)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        t = tf.constant(0.0)
        hook.log(t)
        with pytest.raises(
            RuntimeError, match="Cannot use this hook object's log function more than once"
        ):
            hook.log(t)


def _run_once(hook, model):
    compiled = _compiled(model)
    with Session(hooks=[hook]) as session:
        session.run(compiled)


@pytest.mark.follows("test_print_tensor")
def test_print_tensor(log):
    hook = IPULoggingTensorHook(at_end=True)
    _run_once(hook, lambda: hook.log(tf.constant(42.0, name="foo")))
    assert "foo:0 = 42.0" in str(log)


@pytest.mark.follows("test_print_list")
def test_print_list(log):
    hook = IPULoggingTensorHook(at_end=True)
    _run_once(
        hook, lambda: hook.log([tf.constant(42.0, name="foo"), tf.constant(43.0, name="bar")])
    )
    assert "foo:0 = 42.0, bar:0 = 43.0" in str(log)


@pytest.mark.follows("test_print_dict")
def test_print_dict(log):
    hook = IPULoggingTensorHook(at_end=True)
    _run_once(hook, lambda: hook.log({"foo": tf.constant(42.0), "bar": tf.constant(43.0)}))
    assert "foo = 42.0, bar = 43.0" in str(log)


@pytest.mark.follows("test_print_formatter")
def test_print_formatter(log):
    def formatter(args):
        assert isinstance(args, dict)
        # Plain floats: numpy 2 writes its scalars as np.float32(42.0) where numpy 1 wrote 42.0.
        return f"foobar: { {k: float(v) for k, v in args.items()} }"

    hook = IPULoggingTensorHook(at_end=True, formatter=formatter)
    _run_once(
        hook, lambda: hook.log([tf.constant(42.0, name="foo"), tf.constant(43.0, name="bar")])
    )
    assert "foobar: {'foo:0': 42.0, 'bar:0': 43.0}" in str(log)


@pytest.mark.follows("test_print_at_end_only")
def test_print_at_end_only(log):
    hook = IPULoggingTensorHook(at_end=True)
    compiled = _compiled(lambda: hook.log(tf.constant(42.0, name="foo")))
    with Session(hooks=[hook]) as session:
        log.message = ""
        for _ in range(3):
            session.run(compiled)
            assert "foo" not in str(log)
    assert "foo:0 = 42.0" in str(log)


@pytest.mark.follows("test_print_all_at_end")
def test_print_all_at_end(log):
    hook = IPULoggingTensorHook(at_end=True, logging_mode=IPULoggingTensorHook.LoggingMode.ALL)

    def body(v):
        with tf.control_dependencies([hook.log({"foo": v})]):
            return v + 1

    compiled = _compiled(lambda: ipu.loops.repeat(2, body, inputs=[1.0]))
    with Session(hooks=[hook]) as session:
        for _ in range(2):
            session.run(compiled)
    assert "foo = [1. 2. 1. 2.]" in str(log)


def _counting_model(hook):
    def model():
        step = tf.Variable(0)
        return hook.log({"step": step.assign_add(1).value()})

    return model


@pytest.mark.follows("test_print_every_n_iter")
def test_print_every_n_iter(log):
    hook = IPULoggingTensorHook(every_n_iter=2)
    compiled = _compiled(_counting_model(hook))
    for _ in range(2):  # the hook is used again
        with Session(hooks=[hook]) as session:
            session.run(compiled)
            assert "step = 1" in str(log)
            log.message = ""
            session.run(compiled)
            assert log.message == ""
            session.run(compiled)
            assert "step = 3" in str(log)


@pytest.mark.follows("test_print_every_n_secs")
def test_print_every_n_secs(log):
    hook = IPULoggingTensorHook(every_n_secs=0.5)
    compiled = _compiled(lambda: hook.log({"log": tf.constant(0)}))
    with mock.patch.object(time, "time") as mock_time, Session(hooks=[hook]) as session:
        mock_time.return_value = 1.0
        session.run(compiled)
        assert "log = 0" in str(log)
        log.message = ""
        mock_time.return_value = 1.49
        session.run(compiled)
        assert log.message == ""
        mock_time.return_value = 1.5
        session.run(compiled)
        assert "log = 0" in str(log)


@pytest.mark.follows("test_two_hooks")
def test_two_hooks():
    hook1 = IPULoggingTensorHook(every_n_iter=1)
    hook2 = IPULoggingTensorHook(every_n_iter=2, logging_mode=IPULoggingTensorHook.LoggingMode.ALL)

    def model():
        updated = tf.Variable(0).assign_add(1).value()
        return hook1.log({"hook1": updated}), hook2.log({"hook2": updated})

    compiled = _compiled(model)
    log = _Log()
    with Session(hooks=[hook1, hook2]) as session, mock.patch.object(tf_logging, "info", log):
        session.run(compiled)
        assert len(log.messages) == 2
        assert "hook1 = 1" in log.messages[0] and "hook2 = [1]" in log.messages[1]
        session.run(compiled)
        assert len(log.messages) == 3 and "hook1 = 2" in log.messages[2]
        session.run(compiled)
        assert len(log.messages) == 5
        assert "hook1 = 3" in log.messages[3] and "hook2 = [2 3]" in log.messages[4]
