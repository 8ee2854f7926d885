"""The PopART conformance suite (graphcore/popart `tests/integration`), ported by intent.

`op_tester` plays the part of the original's operator-test fixture
(`tests/integration/operators_test/conftest.py`): a test builds a model with
`init_builder(builder) -> [anchor ids]`, gives `reference(ref_data) -> [arrays]`
(numpy here: torch is not installed), and `run` executes it on the device the
original's CMake chose for that file (module constant `DEVICE`, "Cpu" by default as
the original's DEFAULT_TEST_VARIANTS) and compares anchors and weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import popart


def create_test_device(variant: str = "Cpu", num_ipus: int = 1, tiles_per_ipu: int | None = None):
    """The device of a test variant: "Cpu" or an IPU Model ("IpuModel", "IpuModel2")."""
    manager = popart.DeviceManager()
    if variant == "Cpu":
        return manager.createCpuDevice()
    options: dict[str, Any] = {"numIPUs": num_ipus}
    # The original's test_util gives simulated devices 4 tiles unless told otherwise.
    options["tilesPerIPU"] = 4 if tiles_per_ipu is None else tiles_per_ipu
    if variant == "IpuModel2":
        options["ipuVersion"] = "ipu2"
    return manager.createIpuModelDevice(options)


class _RecordingBuilder:
    """A popart.Builder that remembers the inputs it was given (their data feeds the run)."""

    def __init__(self, opsets: dict[str, int] | None) -> None:
        self._builder = popart.Builder(opsets=opsets) if opsets else popart.Builder()
        self._input_map: dict[str, np.ndarray] = {}
        self._init_input_map: dict[str, np.ndarray] = {}
        self._outputs: list[str] = []

    def addInputTensor(self, data: np.ndarray, debugName: str = "") -> str:  # noqa: N802,N803
        tensor_id = self._builder.addInputTensor(popart.TensorInfo(data), debugName)
        self._input_map[tensor_id] = data
        return tensor_id

    def addInitializedInputTensor(self, data: np.ndarray, debugName: str = "") -> str:  # noqa: N802,N803
        tensor_id = self._builder.addInitializedInputTensor(data, debugName)
        self._init_input_map[tensor_id] = data
        return tensor_id

    def addOutputTensor(self, tensor_id: str) -> None:  # noqa: N802
        self._outputs.append(tensor_id)
        self._builder.addOutputTensor(tensor_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._builder, name)


class RefData:
    def __init__(self, outputs: list[str], anchors: dict[str, np.ndarray]) -> None:
        self._outputs = outputs
        self._anchors = anchors

    def getOutputTensorGrad(self, index: int) -> np.ndarray:  # noqa: N802
        return self._anchors[popart.reservedGradientPrefix() + self._outputs[index]]

    def getOutputTensor(self, index: int) -> np.ndarray:  # noqa: N802
        return self._anchors[self._outputs[index]]


class OpTester:
    def __init__(self, variant: str) -> None:
        np.random.seed(0)
        self.variant = variant
        self.patterns = popart.Patterns(popart.PatternsLevel.Minimal)
        self.options = popart.SessionOptions()
        self.numIPUs = 1
        self.tilesPerIPU: int | None = None
        self.rtol = 1e-05
        self.atol = 1e-08
        self.check_shapes = True
        self.check_dtypes = True
        self.equal_nan = False
        self.inplacing = True
        self.lossReduction = popart.ReductionType.Mean
        self.device = None

    def setPatterns(self, patterns: Any, enableRuntimeAsserts: bool | None = None) -> None:  # noqa: N802,N803
        self.patterns = (
            patterns if isinstance(patterns, popart.Patterns) else popart.Patterns(patterns)
        )
        if enableRuntimeAsserts is not None:
            self.patterns.enableRuntimeAsserts(enableRuntimeAsserts)

    def verifyTensor(self, actual: np.ndarray, expected: np.ndarray) -> None:  # noqa: N802
        expected = np.asarray(expected)
        if self.check_shapes:
            assert actual.shape == expected.shape
        if self.check_dtypes:
            assert actual.dtype == expected.dtype
        np.testing.assert_allclose(
            actual, expected, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan
        )

    def run(
        self,
        init_builder: Callable[[Any], list[str]],
        reference: Callable[[RefData], list[Any]],
        step_type: str = "infer",
        opsets: dict[str, int] | None = None,
        optimizer: Any = None,
        seed: int | None = None,
    ):
        assert step_type in ("infer", "train")
        builder = _RecordingBuilder(opsets)
        anchor_ids = init_builder(builder)
        anchors = {
            a: popart.AnchorReturnType("All")
            for a in anchor_ids
            if a not in builder._init_input_map
        }
        data_flow = popart.DataFlow(1, anchors)
        self.device = create_test_device(self.variant, self.numIPUs, self.tilesPerIPU)
        self.patterns.InPlace = self.inplacing
        if step_type == "infer":
            session = popart.InferenceSession(
                fnModel=builder.getModelProto(),
                dataFlow=data_flow,
                deviceInfo=self.device,
                patterns=self.patterns,
                userOptions=self.options,
            )
        else:
            loss = builder.aiGraphcore.identityloss([anchor_ids[0]], reduction=self.lossReduction)
            if self.options.virtualGraphMode == popart.VirtualGraphMode.Manual:
                builder.virtualGraph(loss, 0)
            session = popart.TrainingSession(
                fnModel=builder.getModelProto(),
                dataFlow=data_flow,
                loss=loss,
                optimizer=optimizer if optimizer is not None else popart.ConstSGD(0.01),
                deviceInfo=self.device,
                patterns=self.patterns,
                userOptions=self.options,
            )
        anchor_map = session.initAnchorArrays()
        session.prepareDevice()
        if seed is not None:
            session.setRandomSeed(seed)
        inputs = dict(builder._input_map)
        replicas = self.options.replicatedGraphCount
        if replicas > 1:
            # One distinct sample per replica, as the original's fixture feeds them.
            inputs = {
                k: np.stack([v + np.asarray(r).astype(v.dtype) for r in range(replicas)])
                for k, v in inputs.items()
            }
        if step_type == "train":
            session.weightsFromHost()
        session.run(popart.PyStepIO(inputs, anchor_map))
        if step_type == "train":
            session.weightsToHost()
        expected = reference(RefData(builder._outputs, anchor_map))
        for anchor, value in zip(anchor_ids, expected, strict=True):
            if value is None:
                continue
            if anchor in anchors:
                self.verifyTensor(anchor_map[anchor], value)
            elif anchor in builder._init_input_map:
                info = session.getInfo(anchor)
                weights = {anchor: np.empty(info.shape(), info.data_type_lcase())}
                session.readWeights(popart.PyWeightsIO(weights))
                self.verifyTensor(weights[anchor], value)
        return session

    def tearDown(self) -> None:  # noqa: N802
        if self.device is not None:
            self.device.detach()


@pytest.fixture
def op_tester(request):
    tester = OpTester(getattr(request.module, "DEVICE", "Cpu"))
    yield tester
    tester.tearDown()


def _grad_of(
    function: Callable[..., Any], *inputs: np.ndarray, upstream: np.ndarray
) -> list[np.ndarray]:
    """Reference gradients (vector-Jacobian products) of `function` by stock TensorFlow,
    standing in for the original's torch autograd."""
    import tensorflow as tf

    variables = [tf.Variable(x) for x in inputs]
    with tf.GradientTape() as tape:
        out = function(*variables)
    grads = tape.gradient(out, variables, output_gradients=tf.constant(upstream))
    return [g.numpy() for g in grads]


@pytest.fixture
def grad_of():
    """`grad_of(function, *inputs, upstream=dy)`: TensorFlow's gradients of `function`."""
    return _grad_of
