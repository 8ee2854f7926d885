"""The executable cache: time to the first result of a program, in a first process (which
compiles it) and in a second one that finds it in the cache.

The program is an `IPUStrategy.run` of decompositions (SVD and QR of a 32x32 matrix, six
rounds), whose XLA compiling takes a few seconds on a CPU. Each run is a fresh Python
process with `TF_POPLAR_FLAGS=--executable_cache_path=DIR`; it prints the seconds from
building the program to its first result (TensorFlow's import is the same in both and is
not counted). The first run starts from an empty cache, the second from what the first
left; the ratio is how much sooner the second process has its result (higher is better).

    python benchmarks/executable_cache.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

PROGRAM = """
import time
import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()
start = time.perf_counter()
strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():

    @tf.function(jit_compile=True)
    def decompose(x):
        for i in range(6):
            s, u, v = tf.linalg.svd(x + float(i))
            x = tf.matmul(u, v, adjoint_b=True) + tf.linalg.diag(s) * 0.01
            q, r = tf.linalg.qr(x)
            x = q + r * 0.001
        return tf.reduce_sum(x)

    x = tf.constant(np.random.default_rng(0).standard_normal((32, 32)), tf.float32)
    result = strategy.run(decompose, args=(x,))
print(f"SECONDS={time.perf_counter() - start:.3f} RESULT={float(result):.6f}")
"""


def first_result(cache: str) -> tuple[float, float]:
    env = dict(os.environ)
    env["TF_POPLAR_FLAGS"] = f"--executable_cache_path={cache}"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    completed = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    line = [x for x in completed.stdout.splitlines() if x.startswith("SECONDS=")][-1]
    seconds, result = line.split()
    return float(seconds.split("=")[1]), float(result.split("=")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    firsts, seconds = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold, cold_result = first_result(cache)
            warm, warm_result = first_result(cache)
        assert cold_result == warm_result, (cold_result, warm_result)
        firsts.append(cold)
        seconds.append(warm)
    cold, warm = min(firsts), min(seconds)
    print(f"first process (compiles):          {cold:7.3f} s to the first result")
    print(f"second process (from the cache):   {warm:7.3f} s to the first result")
    print(f"second / first speed-up:           {cold / warm:7.2f}x")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
