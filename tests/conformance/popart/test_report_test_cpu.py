"""graphcore/popart tests/integration/report_test_cpu.py: on the Cpu device a prepared
session has no profile: asking for its summary report (the original's three tests, named
after the summary, graph and execution reports, all ask for the summary) raises Poplar's
error "Profiling is disabled for current device type."."""

import pytest

import popart


def _prepared_cpu_session():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [1, 2, 32, 32])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.initAnchorArrays()
    session.prepareDevice()
    return session


def _check_no_profile(session):
    with pytest.raises(popart.poplar_exception) as error:
        session.getSummaryReport()
    assert error.value.args[0].endswith("Profiling is disabled for current device type.")


@pytest.mark.follows("test_summary_report_with_cpu_device")
def test_summary_report_with_cpu_device():
    _check_no_profile(_prepared_cpu_session())


@pytest.mark.follows("test_graph_report_with_cpu_device")
def test_graph_report_with_cpu_device():
    _check_no_profile(_prepared_cpu_session())


@pytest.mark.follows("test_execution_report_with_cpu_device")
def test_execution_report_with_cpu_device():
    session = _prepared_cpu_session()
    _check_no_profile(session)
    with pytest.raises(popart.poplar_exception, match="Profiling is disabled"):
        session.getReport()
