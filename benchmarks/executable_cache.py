"""The executable cache: time to the first result of a program, in a first process (which
compiles it) and in a second one that finds it in the cache.

Two programs, each run in a fresh Python process twice: the first run starts from an empty
cache, the second from what the first left. Each prints the seconds from building its
program to its first result (imports are the same in both and are not counted); the
ratio is how much sooner the second process has its result (higher is better).

- TensorFlow: an `IPUStrategy.run` of decompositions (SVD and QR of a 32x32 matrix, six
  rounds), whose XLA compiling takes a few seconds on a CPU, with
  `TF_POPLAR_FLAGS=--executable_cache_path=DIR`.
- PopART: an `InferenceSession` of one transformer encoder block (the model of
  `popart_inference.py`) with `enableEngineCaching` and `cachePath=DIR`; compiling it means
  compiling the lowering and timing it against onnxruntime.

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


POPART_PROGRAM = """
import sys
import time
import numpy as np
import popart
sys.path.insert(0, {benchmarks!r})
import popart_inference

model = popart_inference.transformer_block()
start = time.perf_counter()
options = popart.SessionOptions()
options.enableEngineCaching = True
options.cachePath = {cache!r}
data_flow = popart.DataFlow(4, {{model.output_id: popart.AnchorReturnType("ALL")}})
# A whole Mk2 IPU, as popart_inference.py (the default 4 tiles are too small for it).
device = popart.DeviceManager().createIpuModelDevice({{"tilesPerIPU": 1472}})
session = popart.InferenceSession(model.proto, data_flow, device, userOptions=options)
session.prepareDevice()
session.weightsFromHost()
anchors = session.initAnchorArrays()
session.run(popart.PyStepIO({{model.input_id: np.stack([model.batch] * 4)}}, anchors))
result = float(anchors[model.output_id].astype(np.float64).sum())
print(f"SECONDS={{time.perf_counter() - start:.3f}} RESULT={{result:.3f}}")
"""


def first_result(cache: str, front_end: str) -> tuple[float, float]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if front_end == "tensorflow":
        env["TF_POPLAR_FLAGS"] = f"--executable_cache_path={cache}"
        program = PROGRAM
    else:
        benchmarks = os.path.dirname(os.path.abspath(__file__))
        program = POPART_PROGRAM.format(benchmarks=benchmarks, cache=cache)
    completed = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    )
    line = [x for x in completed.stdout.splitlines() if x.startswith("SECONDS=")][-1]
    seconds, result = line.split()
    return float(seconds.split("=")[1]), float(result.split("=")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for front_end in ("tensorflow", "popart"):
        firsts, seconds = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                cold, cold_result = first_result(cache, front_end)
                warm, warm_result = first_result(cache, front_end)
            assert cold_result == warm_result, (cold_result, warm_result)
            firsts.append(cold)
            seconds.append(warm)
        cold, warm = min(firsts), min(seconds)
        print(f"{front_end}:")
        print(f"  first process (compiles):          {cold:7.3f} s to the first result")
        print(f"  second process (from the cache):   {warm:7.3f} s to the first result")
        print(f"  second / first speed-up:           {cold / warm:7.2f}x")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
