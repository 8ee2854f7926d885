"""graphcore/popart tests/integration/pattern_tests/test_excludes.py: `Builder.excludePatterns`
keeps the named patterns off one op (an Identity kept from PostNRepl stays, as IdentityInplace;
one kept from InPlace stays an Identity), and an unknown pattern name is refused (Cpu)."""

import numpy as np
import pytest
from popart_ir_checks import ir_of, op_types, run_inference

import popart


def _add_identities_add(excluded_identities, extra_identities):
    np.random.seed(1)
    data = np.random.rand(2, 2).astype(np.float32)
    const = np.random.rand(2, 2).astype(np.float32)
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]), "data0")
    c0 = builder.aiOnnx.constant(const)
    x = builder.aiOnnx.add([d0, c0])
    for _ in range(excluded_identities):
        x = builder.aiOnnx.identity([x])
        builder.excludePatterns(x, ["PostNRepl"])
    for _ in range(extra_identities):
        x = builder.aiOnnx.identity([x])
    x = builder.aiOnnx.add([x, c0])
    session, anchors = run_inference(builder, [x], {d0: data})
    np.testing.assert_allclose(anchors[x], data + 2 * const, rtol=1e-6)
    return ir_of(session)["maingraph"]


@pytest.mark.follows("test_name_checking")
def test_name_checking():
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]), "data0")
    x = builder.aiOnnx.identity([d0])
    builder.excludePatterns(x, ["ThisPatternDoesNotExist"])
    builder.addOutputTensor(x)
    with pytest.raises(popart.popart_exception) as e_info:
        run_inference(builder, [x], {d0: np.zeros((2, 2), np.float32)})
    assert e_info.value.args[0].startswith("Invalid pattern name 'ThisPatternDoesNotExist'")


@pytest.mark.follows("test_basic_exclusion")
def test_basic_exclusion():
    graph = _add_identities_add(excluded_identities=1, extra_identities=0)
    assert len(graph) == 3
    assert "IdentityInplace" in op_types(graph)


@pytest.mark.follows("test_remove_one_identity")
def test_remove_one_identity():
    graph = _add_identities_add(excluded_identities=1, extra_identities=1)
    assert len(graph) == 3
    assert len([t for t in op_types(graph) if t.startswith("Identity")]) == 1


@pytest.mark.follows("test_inplace_exclude")
def test_inplace_exclude():
    data = np.random.rand(2, 2).astype(np.float32)
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]), "data0")
    x = d0
    excluded = ""
    for i in range(10):
        x = builder.aiOnnx.identity([x])
        if i == 5:
            builder.excludePatterns(x, ["InPlace", "PostNRepl"])
            excluded = x
        else:
            builder.excludePatterns(x, ["PostNRepl"])
    session, anchors = run_inference(builder, [x], {d0: data})
    np.testing.assert_array_equal(anchors[x], data)
    graph = ir_of(session)["maingraph"]
    assert len(graph) == 10
    for op in graph:
        expected = "Identity" if op["outputs"][0]["name"] == excluded else "IdentityInplace"
        assert op["type"] == expected
