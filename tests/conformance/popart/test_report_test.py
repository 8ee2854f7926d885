"""graphcore/popart tests/integration/report_test.py: a session's reports on an IPU Model.
Before prepareDevice (or when the engine is not compiled, `compileEngine = False`) every
report fails with "Session must have been prepared before a report can be fetched"; after
it, the summary report is text, the serialized graph is bytes, and the report (the
original's `pva.Report`) gives the compilation's target (its architecture, Ipu2 here, and
total memory) and the runs by the debug names `run` was given. (openipu has no `pva`
module: the architecture is compared by name.)"""

import numpy as np
import pytest

import popart

NOT_PREPARED = "Session must have been prepared before a report can be fetched"


def _adder(shape):
    builder = popart.Builder()
    info = popart.TensorInfo("FLOAT", shape)
    i1, i2 = builder.addInputTensor(info), builder.addInputTensor(info)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    return builder.getModelProto(), (i1, i2, o)


def _session(shape=(1,), engine_options=None, compile_engine=True):
    proto, (i1, i2, o) = _adder(list(shape))
    options = popart.SessionOptions()
    options.engineOptions = {"debug.retainDebugInformation": "true", **(engine_options or {})}
    options.compileEngine = compile_engine
    device = popart.DeviceManager().createIpuModelDevice(
        {"ipuVersion": "ipu2", "tilesPerIPU": 4, "compileIPUCode": False}
    )
    session = popart.InferenceSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        userOptions=options,
        deviceInfo=device,
    )
    return session, session.initAnchorArrays(), (i1, i2, o)


def _run(session, anchors, ids, *debug_name):
    i1, i2, o = ids
    d1, d2 = np.array([10.0], np.float32), np.array([11.0], np.float32)
    session.run(popart.PyStepIO({i1: d1, i2: d2}, anchors), *debug_name)
    np.testing.assert_allclose(anchors[o], d1 + d2)


def _check_not_prepared(report):
    with pytest.raises(popart.popart_exception) as error:
        report()
    assert error.value.args[0].endswith(NOT_PREPARED)


# The original's four tests before prepareDevice ask for the summary report or the report.
@pytest.mark.follows(
    "test_summary_report_before_execution",
    "test_graph_report_before_execution",
    "test_execution_report_before_execution",
    "test_report_before_execution",
)
@pytest.mark.parametrize("report", ["getSummaryReport", "getSerializedGraph", "getReport"])
def test_reports_before_execution(report):
    session, _, _ = _session([1, 2, 32, 32])
    _check_not_prepared(getattr(session, report))


@pytest.mark.follows("test_compilation_report")
def test_compilation_report(tmp_path):
    session, _, _ = _session(
        engine_options={
            "autoReport.directory": str(tmp_path),
            "autoReport.outputGraphProfile": "true",
        }
    )
    session.prepareDevice()
    target = session.getReport().compilation.target
    assert target.totalMemory > 0
    assert target.architecture.name == "Ipu2"


@pytest.mark.follows("test_compilation_report_deprecated")
def test_compilation_report_deprecated(tmp_path):
    session, _, _ = _session(
        engine_options={
            "autoReport.directory": str(tmp_path),
            "autoReport.outputGraphProfile": "true",
        }
    )
    session.prepareDevice()
    assert len(session.getSummaryReport()) > 0


@pytest.mark.follows("test_compilation_report_cbor")
def test_compilation_report_cbor():
    session, _, _ = _session(engine_options={"autoReport.outputGraphProfile": "true"})
    session.prepareDevice()
    assert len(session.getSummaryReport(True)) > 0


@pytest.mark.follows("test_execution_report")
@pytest.mark.follows("test_execution_report_new")
def test_execution_report(tmp_path):
    session, anchors, ids = _session(
        engine_options={"autoReport.directory": str(tmp_path), "autoReport.all": "true"}
    )
    session.prepareDevice()
    _run(session, anchors, ids, "Test message")
    _run(session, anchors, ids)
    runs = session.getReport().execution.runs
    assert [run.name for run in runs] == ["Test message", ""]


@pytest.mark.follows("test_execution_report_reset")
def test_execution_report_reset(tmp_path):
    session, anchors, ids = _session(
        engine_options={
            "debug.instrument": "true",
            "autoReport.directory": str(tmp_path),
            "autoReport.outputGraphProfile": "true",
        }
    )
    session.prepareDevice()
    _run(session, anchors, ids)
    first = session.getSummaryReport(resetProfile=False)
    assert len(first) == len(session.getSummaryReport(resetProfile=False))
    assert len(session.getReport().execution.runs) == 1
    # Resetting the profile forgets the runs.
    session.getSummaryReport(resetProfile=True)
    assert session.getReport().execution.runs == []


@pytest.mark.follows("test_execution_report_cbor")
def test_execution_report_cbor():
    session, anchors, ids = _session()
    session.prepareDevice()
    _run(session, anchors, ids)
    assert len(session.getSummaryReport(True)) > 0


@pytest.mark.follows("test_no_compile")
def test_no_compile():
    session, _, _ = _session(compile_engine=False)
    session.prepareDevice()
    _check_not_prepared(session.getSummaryReport)


@pytest.mark.follows("test_serialized_graph_report")
def test_serialized_graph_report():
    builder = popart.Builder()
    info = popart.TensorInfo("FLOAT", [2, 2])
    i1, i2, i3 = (builder.addInputTensor(info) for _ in range(3))
    out = builder.aiOnnx.matmul([builder.aiOnnx.matmul([i1, i2], "ff1"), i3], "ff2")
    builder.addOutputTensor(out)
    options = popart.SessionOptions()
    options.engineOptions["debug.retainDebugInformation"] = "true"
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 4}),
        userOptions=options,
    )
    session.initAnchorArrays()
    session.prepareDevice()
    assert len(session.getSerializedGraph()) > 0
