"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/application_compile_and_run_test.py`.

Two processes share an executable cache (`--executable_cache_path` in `TF_POPLAR_FLAGS`):
each compiles the same TF1 program with `application_compile_op`, then runs the
executable with the embedded runtime after resetting the IPU configuration. The
original forks them with `multiprocessing`; here each is a fresh interpreter (forking a
process that has TensorFlow's threads running is unsafe), started together. As in the
original, the cache flag is set after the IPU module is imported: TensorFlow's runtime
has started then and its XLA cache cannot follow (openipu warns), so each process
compiles on its own, with the same results.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_PROCESS = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import tensorflow as tf
    from tensorflow.python import ipu
    from tensorflow.python.ipu.ops import application_compile_op

    tf.compat.v1.disable_eager_execution()
    tmp_folder, pid = sys.argv[1], sys.argv[2]
    os.environ["TF_POPLAR_FLAGS"] = (
        f"--executable_cache_path={tmp_folder} " + os.environ.get("TF_POPLAR_FLAGS", "")
    )
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()

    with tf.compat.v1.Session() as sess:
        dataset = tf.data.Dataset.from_tensor_slices(np.ones(10, dtype=np.float32))
        infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(x):
            return outfeed_queue.enqueue(x * x)

        def my_net():
            return ipu.loops.repeat(2, body, [], infeed_queue)

        result = application_compile_op.experimental_application_compile_op(
            my_net, output_path=f"{tmp_folder}/{pid}.poplar_exec)"
        )
        compiled_path = sess.run(result)

    ipu.config.reset_ipu_configuration()
    ctx = ipu.embedded_runtime.embedded_runtime_start(compiled_path, [], f"engine_{pid}")
    input_data = tf.compat.v1.placeholder(np.float32, shape=[])
    result = ipu.embedded_runtime.embedded_runtime_call([input_data], ctx)
    with tf.compat.v1.Session() as sess:
        res = sess.run(result, {input_data: 2.0})
    assert res == [4.0], res
    print("result", [float(v) for v in res])
    """
)


@pytest.mark.slow
@pytest.mark.follows("test_from_cache")
def test_from_cache(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS, str(tmp_path), str(pid)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in range(2)
    ]
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
        assert "result [4.0]" in out
    # Both wrote their executable. The flag, set after the import as the original's test
    # sets it, cannot reach TensorFlow's XLA cache any more: a warning says so.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.poplar_exec)", "1.poplar_exec)"]
    assert "was set after TensorFlow's runtime started" in err
