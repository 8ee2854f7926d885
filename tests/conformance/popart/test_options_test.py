"""graphcore/popart tests/integration/options_test.py: SessionOptions defaults and setters,
engine options reaching the engine, unknown attributes refused (Cpu)."""

import pytest

import popart


@pytest.mark.follows("test_create_empty_options")
def test_create_empty_options():
    opts = popart.SessionOptions()
    assert opts is not None
    assert not opts.dotChecks
    assert len(opts.engineOptions) == 0
    assert len(opts.convolutionOptions) == 0
    assert len(opts.reportOptions) == 0
    assert opts.logDir == ""


@pytest.mark.follows("test_set_dotchecks")
def test_set_dotchecks():
    opts = popart.SessionOptions()
    assert len(opts.dotChecks) == 0
    opts.dotChecks = {"Final", "Fwd0"}
    assert len(opts.dotChecks) == 2


@pytest.mark.follows("test_set_enabledOutlining_flag")
def test_set_enabledOutlining_flag():  # noqa: N802
    opts = popart.SessionOptions()
    assert opts.enableOutlining is True
    opts.enableOutlining = False
    assert opts.enableOutlining is False


def _only(opts, name):
    for other in ("engineOptions", "convolutionOptions", "reportOptions"):
        assert len(getattr(opts, other)) == (1 if other == name else 0)
    assert getattr(opts, name)["option"] == "value"


@pytest.mark.follows("test_set_engineOptions")
def test_set_engineOptions():  # noqa: N802
    opts = popart.SessionOptions()
    opts.engineOptions = {"option": "value"}
    _only(opts, "engineOptions")


@pytest.mark.follows("test_set_convolutionOptions")
def test_set_convolutionOptions():  # noqa: N802
    opts = popart.SessionOptions()
    opts.convolutionOptions = {"option": "value"}
    _only(opts, "convolutionOptions")


@pytest.mark.follows("test_set_reportOptions")
def test_set_reportOptions():  # noqa: N802
    opts = popart.SessionOptions()
    opts.reportOptions = {"option": "value"}
    _only(opts, "reportOptions")


@pytest.mark.follows("test_engine_options_passed_to_engine")
def test_engine_options_passed_to_engine():
    builder = popart.Builder()
    shape = popart.TensorInfo("FLOAT", [1, 2, 32, 32])
    i1, i2 = builder.addInputTensor(shape), builder.addInputTensor(shape)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    opts = popart.SessionOptions()
    opts.engineOptions = {"option": "value"}
    with pytest.raises(popart.poplar_exception) as e_info:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            userOptions=opts,
            deviceInfo=popart.DeviceManager().createCpuDevice(),
        )
        session.initAnchorArrays()
        session.prepareDevice()
    assert e_info.value.args[0].endswith("Unrecognised option 'option'")


@pytest.mark.follows("test_set_bad_options")
def test_set_bad_options():
    opts = popart.SessionOptions()
    with pytest.raises(AttributeError):
        opts.foo = "bar"


@pytest.mark.follows("test_update_options")
def test_update_options():
    opts = popart.SessionOptions()
    opts.engineOptions = {"aaaaa": "a"}
    opts.engineOptions["bbbb"] = "b"
    assert dict(opts.engineOptions.items()) == {"aaaaa": "a", "bbbb": "b"}


@pytest.mark.follows("test_numIOTiles_option")
def test_numIOTiles_option():  # noqa: N802
    opts = popart.SessionOptions()
    opts.numIOTiles = 42
    assert opts.numIOTiles == 42


@pytest.mark.follows("test_customTransformApplierSettings")
def test_customTransformApplierSettings():  # noqa: N802
    opts = popart.SessionOptions()
    settings = opts.experimentalSettings
    assert len(settings.customTransformApplierSettings) == 0
    settings.customTransformApplierSettings = {
        "Fwd0": ["Transform A", "Transform B"],
        "Fwd1": ["Transform C", "Transform D"],
    }
    assert len(opts.experimentalSettings.customTransformApplierSettings) == 2


@pytest.mark.follows("test_updatableNamedBuffers_option")
def test_updatableNamedBuffers_option():  # noqa: N802
    opts = popart.SessionOptions()
    assert len(opts.updatableNamedBuffers) == 0
    opts.updatableNamedBuffers = ["t1", "t2"]
    assert list(opts.updatableNamedBuffers) == ["t1", "t2"]


@pytest.mark.follows("test_createHostTransferableTensorWithOffset")
def test_createHostTransferableTensorWithOffset():  # noqa: N802
    opts = popart.SessionOptions()
    opts.experimentalSettings.createHostTransferableTensorWithOffset = True
    assert opts.experimentalSettings.createHostTransferableTensorWithOffset is True
