"""Child process of `test_training_files_atomic.py`: trains, writes a file completely (and
copies it to `<file>.expected`), trains on, then writes the file again but stalls halfway
through the write (after printing "half-written") until the test kills it.

Usage: python killed_writer.py modelToHost|compileAndExport|saveVariables DIRECTORY
"""

from __future__ import annotations

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from training_helpers import build_regression, regression_data, train_session  # noqa: E402

import popart  # noqa: E402
from openipu._src.popart.session import executable_file  # noqa: E402

FILE_NAMES = {
    "modelToHost": "model.onnx",
    "compileAndExport": "training.popef",
    "saveVariables": "variables.popef",
}


class _StallingStream:
    """Writes half of what it is given, says so, and waits to be killed."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return self._stream.__exit__(*exc_info)

    def write(self, data) -> int:
        self._stream.write(data[: len(data) // 2])
        self._stream.flush()
        print("half-written", flush=True)
        time.sleep(600)
        raise SystemExit("not killed")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(kind: str, directory: str) -> None:
    model = build_regression(onnx_loss=True)
    x, t = regression_data(4)
    optimizer = popart.SGD({"defaultLearningRate": (0.1, True), "defaultMomentum": (0.9, True)})
    session, _, _ = train_session(model, optimizer, x[:2], t[:2], 2)
    path = os.path.join(directory, FILE_NAMES[kind])
    write = getattr(session, kind)
    write(path)
    shutil.copyfile(path, path + ".expected")
    session.run(popart.PyStepIO({model.x: x[2:], model.t: t[2:]}, {}))  # new weights to write
    fdopen = os.fdopen
    executable_file.os.fdopen = lambda *args, **kwargs: _StallingStream(fdopen(*args, **kwargs))
    write(path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
