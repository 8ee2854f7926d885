"""graphcore/popart tests/integration/operators_test/scan_test.py: Scan over two inputs
zipped, added or multiplied, forwards or reversed on either side; a basic RNN as a Scan with
a state and a scanned axis 1; and a body reading a constant of the outer graph (TopK's k),
against numpy (Cpu)."""

import numpy as np
import pytest

# PopART's Scan (willow/src/op/scan.cpp) slices a 1-D scan input into [1]-shaped pieces (ONNX:
# scalars) and concatenates the body's scan outputs along the output axis (ONNX: stacks them
# along a new axis).
D0 = np.array([0, 2, 4, 6]).astype(np.float32)
D1 = np.array([1, 3, 5, 7]).astype(np.float32)


def _step(reverse):
    return -1 if reverse else 1


@pytest.mark.follows("test_scan_zip")
@pytest.mark.parametrize("rev_d0", [False, True])
@pytest.mark.parametrize("rev_d1", [False, True])
@pytest.mark.parametrize("rev_out", [False, True])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_scan_zip(op_tester, rev_d0, rev_d1, rev_out, op):
    _scan_pair(op_tester, rev_d0, rev_d1, rev_out, op)


@pytest.mark.follows("test_scan_zip")
@pytest.mark.parametrize("rev_out", [False, True])
def test_scan_zip_concat(op_tester, rev_out):
    _scan_pair(op_tester, True, False, rev_out, "zip")


def _scan_pair(op_tester, rev_d0, rev_d1, rev_out, op):
    def init_builder(builder):
        td0, td1 = builder.addInputTensor(D0), builder.addInputTensor(D1)
        builder.setGraphName("main_graph")
        body = builder.createSubgraphBuilder()
        body.setGraphName("body")
        a, b = body.addUntypedInputTensor(td0), body.addUntypedInputTensor(td1)
        if op == "zip":
            out = body.aiOnnx.concat([a, b], 0)
        elif op == "add":
            out = body.aiOnnx.add([a, b])
        else:
            out = body.aiOnnx.mul([a, b])
        body.addOutputTensor(out)
        o = builder.aiOnnx.scan(
            [td0, td1],
            num_scan_inputs=2,
            body=body,
            scan_input_directions=[int(rev_d0), int(rev_d1)],
            scan_output_directions=[int(rev_out)],
            num_outputs=1,
        )[0]
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        a, b = D0[:: _step(rev_d0)], D1[:: _step(rev_d1)]
        out = {"zip": np.stack([a, b], axis=1), "add": a + b, "mul": a * b}[op]
        return [out[:: _step(rev_out)].flatten()]

    op_tester.run(init_builder, reference, step_type="infer")


@pytest.mark.follows("test_scan_basic_rnn")
@pytest.mark.parametrize("rev_d, rev_out", [(False, False), (True, True)])
def test_scan_basic_rnn(op_tester, rev_d, rev_out):
    np.random.seed(1302)
    data = np.random.randint(-4, 4, [8, 16, 32]).astype(np.float32)
    state = np.random.randint(-4, 4, [8, 24, 1]).astype(np.float32)
    w = np.random.randint(-4, 4, [1, 24, 32]).astype(np.float32)
    u = np.random.randint(-4, 4, [1, 24, 24]).astype(np.float32)
    v = np.random.randint(-4, 4, [1, 64, 24]).astype(np.float32)

    def init_builder(builder):
        td, ts = builder.addInputTensor(data), builder.addInputTensor(state)
        tw, tu, tv = (builder.addInitializedInputTensor(x) for x in (w, u, v))
        builder.setGraphName("main_graph")
        body = builder.createSubgraphBuilder()
        body.setGraphName("body")
        ts_in = body.addUntypedInputTensor(ts)
        td_in = body.reshape_const(body.aiOnnx, [body.addUntypedInputTensor(td)], [8, 32, 1])
        th = body.aiOnnx.add([body.aiOnnx.matmul([tu, ts_in]), body.aiOnnx.matmul([tw, td_in])])
        th = body.aiOnnx.tanh([th])
        body.addOutputTensor(th)
        body.addOutputTensor(body.aiOnnx.matmul([tv, th]))
        ots, otd = builder.aiOnnx.scan(
            [ts, td],
            num_scan_inputs=1,
            body=body,
            scan_input_axes=[1],
            scan_input_directions=[int(rev_d)],
            scan_output_axes=[1],
            scan_output_directions=[int(rev_out)],
            num_outputs=2,
        )
        builder.addOutputTensor(ots)
        builder.addOutputTensor(otd)
        return [ots, otd]

    def reference(_):
        s = state.astype(np.float64)
        outputs = []
        for x in np.split(data, data.shape[1], axis=1)[:: _step(rev_d)]:
            s = np.tanh(u @ s + w @ x.reshape(8, 32, 1))
            outputs.append(v @ s)
        return [
            s.astype(np.float32),
            np.concatenate(outputs[:: _step(rev_out)], axis=1).astype(np.float32),
        ]

    op_tester.rtol = 1e-03
    op_tester.atol = 1e-04
    op_tester.run(init_builder, reference, step_type="infer")


@pytest.mark.follows("test_scan_const_implicit_tensor")
@pytest.mark.parametrize("rev_in, rev_out", [(False, False), (True, True)])
def test_scan_const_implicit_tensor(op_tester, rev_in, rev_out):
    def init_builder(builder):
        td0, td1 = builder.addInputTensor(D0), builder.addInputTensor(D1)
        k = builder.aiOnnx.constant(np.array([1]).astype(np.int64), "k")
        builder.setGraphName("main_graph")
        body = builder.createSubgraphBuilder()
        body.setGraphName("body")
        a, b = body.addUntypedInputTensor(td0), body.addUntypedInputTensor(td1)
        add_1 = body.aiOnnx.add([a, b])
        body.addOutputTensor(body.aiOnnx.add([a, body.aiOnnx.topk([add_1, k], axis=0)[0]]))
        o = builder.aiOnnx.scan(
            [td0, td1],
            num_scan_inputs=2,
            body=body,
            scan_input_directions=[int(rev_in), int(rev_in)],
            scan_output_directions=[int(rev_out)],
            num_outputs=1,
        )[0]
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        a, b = D0[:: _step(rev_in)], D1[:: _step(rev_in)]
        return [(a + (a + b))[:: _step(rev_out)]]

    op_tester.run(init_builder, reference, step_type="infer")
