"""graphcore/popart tests/integration/operators_test/packed_data_test.py: ai.graphcore
PackedDataBlock running a subgraph (x @ x^T) over packed sequences, callbackBatchSize at a
time, against numpy's unpack / compute / pack (Cpu); and that numpy reference itself against
the plain unpacked computation."""

import numpy as np
import pytest

LENGTHS = [3, 5, 7, 4, 6, 2]
MAX_LENGTH = 10


def _packed(rng, lengths, width):
    data = np.concatenate([rng.random((n, width)) for n in lengths]).astype(np.float32)
    return data, np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint32)


def _unpack(data, offsets, lengths, length):
    out = np.zeros((len(lengths), length, *data.shape[1:]), data.dtype)
    for i, (offset, n) in enumerate(zip(offsets, lengths, strict=True)):
        out[i, :n] = data[offset : offset + n]
    return out


def _pack_into(result, sequences, offsets, lengths):
    for sequence, offset, n in zip(sequences, offsets, lengths, strict=True):
        result[offset : offset + n] = sequence[:n]
    return result


def _packed_reference(data, offsets, lengths, batch, func, calls):
    unpacked = _unpack(data, offsets, lengths, MAX_LENGTH)
    results = []
    for start in range(0, len(lengths) // batch * batch, batch):
        calls.append(start)
        results.extend(func(unpacked[start : start + batch]))
    result = np.zeros((data.shape[0], *results[0].shape[1:]), results[0].dtype)
    return _pack_into(result, results, offsets, lengths)


def _gram(x):
    return np.matmul(x, np.swapaxes(x, -1, -2))


@pytest.mark.follows("test_packed_data_block_reference")
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_packed_data_block_reference(batch):
    data, offsets = _packed(np.random.default_rng(0), LENGTHS, 5)
    calls = []
    packed = _packed_reference(data, offsets, LENGTHS, batch, _gram, calls)
    assert len(calls) == len(LENGTHS) // batch
    unpacked = _gram(_unpack(data, offsets, LENGTHS, MAX_LENGTH))
    np.testing.assert_array_equal(_unpack(packed, offsets, LENGTHS, MAX_LENGTH), unpacked)


@pytest.mark.follows("test_packeddatablockop")
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_packeddatablockop(op_tester, batch):
    data, offsets = _packed(np.random.default_rng(0), LENGTHS, 5)
    data = (data * 9 + 1).astype(np.uint32).astype(np.float32)  # exact products
    lengths = np.array(LENGTHS, np.uint32)

    def init_builder(builder):
        data_id = builder.addInputTensor(data, "data")
        lengths_id = builder.addInputTensor(lengths, "lengths")
        offsets_id = builder.addInputTensor(offsets, "offsets")
        body = builder.createSubgraphBuilder()
        x = body.addUntypedInputTensor()
        body.addOutputTensor(body.aiOnnx.matmul([x, body.aiOnnx.transpose([x], [0, 2, 1])]))
        out = builder.aiGraphcore.packedDataBlock(
            [data_id, offsets_id, lengths_id, offsets_id, lengths_id],
            [MAX_LENGTH],
            data.shape[0],
            batch,
            body,
        )
        builder.addOutputTensor(out)
        return [out]

    def reference(_):
        sequences = _gram(_unpack(data, offsets, lengths, MAX_LENGTH))
        return [_pack_into(np.zeros([27, 10], np.float32), sequences, offsets, lengths)]

    op_tester.patterns.enablePattern("PackedDataBlock", True)
    op_tester.run(init_builder, reference, "infer")


@pytest.mark.follows("test_bertlike_attention")
def test_bertlike_attention(op_tester):
    # BERT-like attention heads (no softmax) over packed sequences; smaller than the original's
    # (hidden 1024, 8 sequences of up to 384 tokens, 16 heads).
    hidden, sequences, length, heads = 32, 4, 12, 4
    head_size = hidden // heads
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, length + 1, sequences).astype(np.uint32)
    data, offsets = _packed(rng, list(lengths), 3 * hidden)
    data = np.pad(data, [(0, sequences * length - data.shape[0]), (0, 0)])

    def init_builder(builder):
        data_id = builder.addInputTensor(data, "data")
        lengths_id = builder.addInputTensor(lengths, "lengths")
        offsets_id = builder.addInputTensor(offsets, "offsets")
        body = builder.createSubgraphBuilder()
        qkv = body.addUntypedInputTensor()
        q, k, v = body.aiOnnx.split([qkv], 3, axis=2)

        def heads_of(t, perm):
            t = body.reshape_const(body.aiOnnx, [t], [length, heads, head_size])
            return body.aiOnnx.transpose([t], perm)

        x = body.aiOnnx.matmul([heads_of(q, [1, 0, 2]), heads_of(k, [1, 2, 0])])
        scale = body.aiOnnx.constant(np.array([1 / np.sqrt(head_size)], np.float32))
        x = body.aiOnnx.matmul([body.aiOnnx.mul([x, scale]), heads_of(v, [1, 0, 2])])
        x = body.aiOnnx.transpose([x], [1, 0, 2])
        body.addOutputTensor(body.reshape_const(body.aiOnnx, [x], [1, length, hidden]))
        out = builder.aiGraphcore.packedDataBlock(
            [data_id, offsets_id, lengths_id, offsets_id, lengths_id],
            [length],
            data.shape[0],
            1,
            body,
        )
        builder.addOutputTensor(out)
        return [out]

    def reference(_):
        unpacked = _unpack(data, offsets, lengths, length)  # [S, L, 3 * hidden]
        q, k, v = (
            t.reshape(sequences, length, heads, head_size).transpose(0, 2, 1, 3)
            for t in np.split(unpacked, 3, axis=2)
        )
        x = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(head_size) @ v
        x = x.transpose(0, 2, 1, 3).reshape(sequences, length, hidden)
        return [_pack_into(np.zeros((sequences * length, hidden), np.float32), x, offsets, lengths)]

    op_tester.patterns.enablePattern("PackedDataBlock", True)
    op_tester.atol = 1e-5
    op_tester.run(init_builder, reference, "infer")
