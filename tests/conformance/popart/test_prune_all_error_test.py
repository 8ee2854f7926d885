"""graphcore/popart tests/integration/prune_all_error_test.py: a model whose only op feeds
nothing anchored fails: everything pruned (Cpu)."""

import pytest

import popart


@pytest.mark.follows("test_prune_all_error")
def test_prune_all_error():
    builder = popart.Builder()
    in0 = builder.addInputTensor("FLOAT", [2])
    builder.aiOnnx.sqrt([in0])
    with pytest.raises(popart.popart_exception) as e_info:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            dataFlow=popart.DataFlow(1, [in0]),
        )
    assert (
        e_info.value.args[0] == "All operations in the main graph were pruned, nothing to compute"
    )
