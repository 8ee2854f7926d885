"""The forms in which PopART programs give optimizer values: the original's bindings cast each
dict value to a C++ (float, bool) pair with pybind11's conversions, so ints, bools, None and
NumPy scalars work where the documentation shows floats and bools; `SGD`'s dict is the `pyd`
argument; `OptimizerValue` takes `val` and `isConst` by keyword too. Only a zero loss scaling
is refused, and clip norms and Adam's max weight norm take any value."""

from __future__ import annotations

import numpy as np
import pytest
from training_helpers import build_regression, regression_data, regression_gradients, train_session

import popart


def _defaults(value_map):
    default = value_map.getDefault()
    return default.val(), default.isConst()


@pytest.mark.parametrize(
    "given, expected",
    [
        ((0.01, 1), (0.01, True)),
        ((0.01, 0), (0.01, False)),
        ((0.01, None), (0.01, False)),
        ((1, True), (1.0, True)),
        ((np.float32(0.25), np.True_), (0.25, True)),
        ((np.int64(2), np.float64(0.0)), (2.0, False)),
        ((True, False), (1.0, False)),
    ],
)
def test_value_pairs_convert_as_the_original_bindings(given, expected):
    value, is_const = expected
    sgd = popart.SGD({"defaultLearningRate": given, "defaultMomentum": (0.5, True)})
    assert _defaults(sgd.learningRates()) == pytest.approx((value, is_const))
    adam = popart.Adam({"defaultLearningRate": given})
    assert _defaults(adam.learningRates()) == pytest.approx((value, is_const))
    adaptive = popart.Adaptive({"defaultLearningRate": given})
    assert _defaults(adaptive.learningRates()) == pytest.approx((value, is_const))
    sgd.insertSpecific("w", {"learningRate": given})
    assert sgd.learningRates().get("w").val() == pytest.approx(value)


def test_bool_switches_and_keyword_arguments_of_the_original():
    sgd = popart.SGD(
        pyd={"defaultMomentum": (0.9, True), "nesterov": (True, True)},
        accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Separate,
    )
    assert _defaults(sgd.nesterov()) == (1.0, True)
    value = popart.OptimizerValue(val=1, isConst=0)
    assert (value.val(), value.isConst()) == (1.0, False)
    assert popart.OptimizerValue((0.5, 1)).isConst() is True


@pytest.mark.parametrize(
    "given",
    [0.01, [0.01, True], ("0.01", True), (0.01, "yes"), (0.01, True, False)],
)
def test_values_the_original_cannot_cast_are_refused(given):
    # A bare float or a list is "not a py::tuple"; a string converts to neither a float nor a
    # bool; a triple is no pair.
    with pytest.raises(popart.popart_exception, match="defaultLearningRate"):
        popart.SGD({"defaultLearningRate": given})


def test_sgd_takes_its_values_as_a_dict_only():
    # The original binds SGD(pyd: dict, ...): a bare learning rate is ConstSGD's form.
    with pytest.raises(TypeError):
        popart.SGD(0.01)
    const_sgd = popart.ConstSGD(0.01)
    assert _defaults(const_sgd.learningRates()) == pytest.approx((0.01, True))


def _sgd_numpy(model, x, t, learning_rate, gradient_factor=lambda gradients: 1.0):
    params = {name: model.initial[name].astype(np.float64) for name in ("w", "b")}
    for step in range(len(x)):
        gradients = regression_gradients(params, x[step], t[step])
        factor = gradient_factor(gradients)
        for name in params:
            params[name] = params[name] - learning_rate * factor * gradients[name]
    return params


def test_a_negative_loss_scaling_trains_as_the_original_accepts_it():
    model = build_regression()
    x, t = regression_data(4)
    optimizer = popart.SGD({"defaultLearningRate": (0.1, True), "lossScaling": (-4.0, True)})
    _, weights, _ = train_session(model, optimizer, x, t, 2)
    expected = _sgd_numpy(model, x, t, 0.1)
    for name, value in expected.items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-5, atol=1e-6)
    with pytest.raises(popart.popart_exception, match="Loss scaling cannot be 0"):
        popart.SGD({"lossScaling": (0.0, True)})


def test_clip_norms_and_max_weight_norms_take_any_value():
    model = build_regression()
    x, t = regression_data(4)
    optimizer = popart.SGD(
        {"defaultLearningRate": (0.1, True)},
        clip_norm_settings=[popart.ClipNormSettings.clipAllWeights(0)],
    )
    _, weights, _ = train_session(model, optimizer, x, t, 2)
    for name in ("w", "b"):  # a zero norm clips every gradient to nothing
        np.testing.assert_array_equal(weights[name], model.initial[name])
    lamb = popart.Adam({"defaultMaxWeightNorm": (-1.0, True)}, mode=popart.AdamMode.Lamb)
    assert _defaults(lamb.maxWeightNorms()) == (-1.0, True)
