"""`popart.InferenceSession`: runs an ONNX model forward on an emulated IPU."""

from __future__ import annotations

from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.session.ir import Ir
from openipu._src.popart.session.session_core import SessionCore


class InferenceSession(SessionCore):
    """`InferenceSession(fnModel, dataFlow, deviceInfo, inputShapeInfo=InputShapeInfo(),
    patterns=None, userOptions=SessionOptions(), name='inference')`.

    `fnModel` is a serialized ModelProto, a ModelProto or an ONNX file name.
    """

    _training = False
    _default_name = "inference"

    @classmethod
    def fromIr(cls, ir: Ir, deviceInfo: DeviceInfo, name: str = "fromIr") -> InferenceSession:  # noqa: N802, N803
        """A session built from another session's `getIr()`."""
        if not isinstance(ir, Ir):
            raise popart_exception(f"fromIr needs an Ir (session.getIr()), got {type(ir).__name__}")
        if deviceInfo is None:
            raise popart_exception("Must pass valid DeviceInfo to InferenceSession.fromIr")
        return cls(
            ir.model,
            ir.data_flow,
            deviceInfo,
            ir.input_shape_info,
            ir.patterns,
            ir.options,
            name,
        )
