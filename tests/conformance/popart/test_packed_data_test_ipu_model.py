"""graphcore/popart tests/integration/operators_test/packed_data_test_ipu_model.py: two
PackedDataBlocks on two virtual graphs (x @ x^T on IPU 0, then y @ y on IPU 1) with manual
virtual graphs and standard recomputation (IpuModel2)."""

import numpy as np
import pytest
from test_packed_data_test import LENGTHS, MAX_LENGTH, _pack_into, _packed, _unpack

import popart

DEVICE = "IpuModel2"


@pytest.mark.follows("test_multi_ipu")
def test_multi_ipu(op_tester):
    data, offsets = _packed(np.random.default_rng(0), LENGTHS, 5)
    data = (data * 9 + 1).astype(np.uint32).astype(np.float32)
    lengths = np.array(LENGTHS, np.uint32)

    def block(builder, ipu, packed, offsets_id, lengths_id, body_of):
        body = builder.createSubgraphBuilder()
        with body.virtualGraph(ipu):
            x = body.addUntypedInputTensor()
            y = body_of(body, x)
        body.addOutputTensor(y)
        with builder.virtualGraph(ipu):
            return builder.aiGraphcore.packedDataBlock(
                [packed, offsets_id, lengths_id, offsets_id, lengths_id],
                [MAX_LENGTH],
                data.shape[0],
                1,
                body,
            )

    def init_builder(builder):
        data_id = builder.addInputTensor(data, "data")
        lengths_id = builder.addInputTensor(lengths, "lengths")
        offsets_id = builder.addInputTensor(offsets, "offsets")
        gram = block(
            builder,
            0,
            data_id,
            offsets_id,
            lengths_id,
            lambda b, x: b.aiOnnx.matmul([x, b.aiOnnx.transpose([x], [0, 2, 1])]),
        )
        out = block(builder, 1, gram, offsets_id, lengths_id, lambda b, x: b.aiOnnx.matmul([x, x]))
        builder.addOutputTensor(out)
        return [out]

    def reference(_):
        d = _unpack(data, offsets, lengths, MAX_LENGTH)
        gram = d @ np.swapaxes(d, 1, 2)
        return [_pack_into(np.zeros([27, 10], np.float32), gram @ gram, offsets, lengths)]

    op_tester.numIPUs = 2
    op_tester.options.virtualGraphMode = popart.VirtualGraphMode.Manual
    op_tester.options.autoRecomputation = popart.RecomputationType.Standard
    op_tester.patterns.enablePattern("PackedDataBlock", True)
    op_tester.run(init_builder, reference, "infer")
