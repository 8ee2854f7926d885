"""graphcore/popart tests/integration/operators_test/sequenceslice_test.py: ai.graphcore
SequenceSlice copies runs of rows from a source into a destination at run-time offsets
(the rest zeroed), with and without inplacing, against numpy (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_sequenceslice")
@pytest.mark.parametrize("inplacing", [False, True])
@pytest.mark.parametrize(
    "source_shape, dest_shape, n, source_offset, dest_offset",
    [
        ([6, 6], [3, 6], [1, 1, 1], [0, 2, 4], [0, 1, 2]),
        ([6, 6], [3, 6], [1, 2], [0, 4], [2, 0]),
        ([6, 6], [4, 6], [1, 1], [0, 3], [0, 2]),
    ],
)
def test_sequenceslice(
    op_tester, inplacing, source_shape, dest_shape, n, source_offset, dest_offset
):
    source = (np.arange(np.prod(source_shape)) + 10).reshape(source_shape).astype(np.float32)
    dest = np.zeros(dest_shape, np.float32)
    n, source_offset, dest_offset = (
        np.asarray(v, np.uint32) for v in (n, source_offset, dest_offset)
    )

    def init_builder(builder):
        ids = [builder.addInputTensor(v) for v in (source, dest, n, source_offset, dest_offset)]
        o = builder.aiGraphcore.sequenceslice(ids, True)
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        result = np.copy(dest)
        for count, s, d in zip(n, source_offset, dest_offset, strict=True):
            result[d : d + count] = source[s : s + count]
        return [result]

    op_tester.inplacing = inplacing
    op_tester.run(init_builder, reference, "infer")
