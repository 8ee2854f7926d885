"""SGDIpuOptimizer against a numpy reference and stock `tf_keras.optimizers.legacy.SGD`."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from optimizer_steps import GRADIENTS, INITIAL_VALUES, run_numpy, run_tf, tiny_data

from openipu._src.addons.keras.optimizers.sgd import SGDIpuOptimizer


class NumpySGD:
    """Momentum SGD in the Keras form, with the accumulator stored in `accum_dtype`."""

    def __init__(self, lr=0.01, momentum=0.0, nesterov=False, accum_dtype=np.float32):
        self.lr, self.momentum, self.nesterov = lr, momentum, nesterov
        self.accum_dtype = accum_dtype
        self.accums: dict[int, np.ndarray] = {}

    def apply(self, variables, grads, lr=None):
        lr = self.lr if lr is None else lr
        out = []
        for index, (var, grad) in enumerate(zip(variables, grads, strict=True)):
            grad = np.asarray(grad, np.float64)
            if self.momentum == 0:
                out.append(var - (lr * grad).astype(var.dtype))
                continue
            accum = self.accums.get(index, np.zeros_like(var, self.accum_dtype))
            accum = self.momentum * accum.astype(np.float64) - lr * grad
            self.accums[index] = accum.astype(self.accum_dtype)
            delta = self.momentum * accum - lr * grad if self.nesterov else accum
            out.append(var + delta.astype(var.dtype))
        return out


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("momentum, nesterov", [(0.0, False), (0.9, False), (0.7, True)])
def test_matches_numpy_and_stock_sgd(compiled, momentum, nesterov):
    optimizer = SGDIpuOptimizer(0.1, momentum=momentum, nesterov=nesterov)
    variables = run_tf(optimizer, compiled=compiled)
    reference = NumpySGD(0.1, momentum, nesterov)
    expected = run_numpy(reference)
    stock = run_tf(tf_keras.optimizers.legacy.SGD(0.1, momentum=momentum, nesterov=nesterov))
    for index, variable in enumerate(variables):
        np.testing.assert_allclose(variable.numpy(), expected[index], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(variable.numpy(), stock[index].numpy(), rtol=1e-6, atol=1e-7)
        if momentum:
            accum = optimizer.get_slot(variable, "momentum")
            np.testing.assert_allclose(accum, reference.accums[index], rtol=1e-5, atol=1e-7)
    assert optimizer.get_slot_names() == (["momentum"] if momentum else [])


@pytest.mark.parametrize("compiled", [False, True])
def test_fp16_momentum_accumulator(compiled):
    optimizer = SGDIpuOptimizer(0.1, momentum=0.9, momentum_accum_dtype=tf.float16)
    variables = run_tf(optimizer, compiled=compiled)
    reference = NumpySGD(0.1, 0.9, accum_dtype=np.float16)
    expected = run_numpy(reference)
    for index, variable in enumerate(variables):
        accum = optimizer.get_slot(variable, "momentum")
        assert accum.dtype == tf.float16 and variable.dtype == tf.float32
        np.testing.assert_allclose(accum, reference.accums[index], rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(variable.numpy(), expected[index], rtol=1e-3, atol=1e-4)


def test_fp16_variables_with_fp32_compute():
    optimizer = SGDIpuOptimizer(0.1, momentum=0.5)
    variables = run_tf(optimizer, dtype=np.float16)
    expected = run_numpy(
        NumpySGD(0.1, 0.5, accum_dtype=np.float16),
        initial=[v.astype(np.float16) for v in INITIAL_VALUES],
    )
    for variable, want in zip(variables, expected, strict=True):
        assert optimizer.get_slot(variable, "momentum").dtype == tf.float16
        np.testing.assert_allclose(variable.numpy(), want, rtol=2e-3, atol=2e-3)


def test_fp16_compute_precision():
    optimizer = SGDIpuOptimizer(0.1, momentum=0.5, optimizer_compute_precisions=(tf.float16,))
    variables = run_tf(optimizer)
    expected = run_numpy(NumpySGD(0.1, 0.5))
    for variable, want in zip(variables, expected, strict=True):
        assert optimizer.get_slot(variable, "momentum").dtype == tf.float32
        np.testing.assert_allclose(variable.numpy(), want, rtol=5e-3, atol=5e-3)


def test_learning_rate_schedule_decay_and_lr_alias():
    schedule = tf_keras.optimizers.schedules.PiecewiseConstantDecay([0, 1], [0.1, 0.05, 0.02])
    variables = run_tf(SGDIpuOptimizer(schedule, momentum=0.9))
    expected = run_numpy(NumpySGD(momentum=0.9), lrs=[0.1, 0.05, 0.02])
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)

    with pytest.warns(UserWarning, match="lr"):
        optimizer = SGDIpuOptimizer(lr=0.2, decay=0.5, momentum=0.3)
    variables = run_tf(optimizer, compiled=True)
    expected = run_numpy(NumpySGD(momentum=0.3), lrs=[0.2 / (1 + 0.5 * step) for step in range(3)])
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("clipping", [{"clipnorm": 0.1}, {"clipvalue": 0.15}])
def test_gradient_clipping(clipping):
    variables = run_tf(SGDIpuOptimizer(0.5, **clipping))
    clipped = []
    for grads in GRADIENTS:
        if "clipnorm" in clipping:
            clipped.append([g * min(1.0, 0.1 / np.linalg.norm(g)) for g in grads])
        else:
            clipped.append([np.clip(g, -0.15, 0.15) for g in grads])
    expected = run_numpy(NumpySGD(0.5), gradients=clipped)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)


def test_config_round_trip():
    optimizer = SGDIpuOptimizer(
        0.3, momentum=0.8, nesterov=True, momentum_accum_dtype="float16", clipvalue=2.0,
        outline_apply_gradients=True, outline_apply_gradients_kwargs={"unused": 1},
    )  # fmt: skip
    config = optimizer.get_config()
    assert config["momentum_accum_dtype"] == "float16" and config["nesterov"] is True
    assert config["optimizer_compute_precisions"] == ["float32"]
    assert config["outline_apply_gradients"] is True
    assert config["outline_apply_gradients_kwargs"] == {"unused": 1}
    restored = SGDIpuOptimizer.from_config(config)
    assert restored.get_config() == config
    for a, b in zip(run_tf(optimizer), run_tf(restored), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def fit(optimizer, x, y):
    tf_keras.utils.set_random_seed(3)
    model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=(3,))])
    model.compile(optimizer=optimizer, loss="mse")
    history = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
    return model, history.history["loss"]


def test_model_fit_equals_stock_sgd():
    x, y = tiny_data()
    model, losses = fit(SGDIpuOptimizer(0.05, momentum=0.9, nesterov=True), x, y)
    stock, _ = fit(tf_keras.optimizers.legacy.SGD(0.05, momentum=0.9, nesterov=True), x, y)
    assert losses[-1] < losses[0]
    for got, want in zip(model.get_weights(), stock.get_weights(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        model.predict(x, batch_size=4, verbose=0), stock.predict(x, verbose=0), rtol=1e-5
    )


def test_model_fit_under_ipu_strategy(strategy_on):
    x, y = tiny_data()
    stock, _ = fit(tf_keras.optimizers.legacy.SGD(0.05, momentum=0.9), x, y)
    strategy = strategy_on(1)
    with strategy.scope():
        model, losses = fit(SGDIpuOptimizer(0.05, momentum=0.9), x, y)
        assert losses[-1] < losses[0]
        for got, want in zip(model.get_weights(), stock.get_weights(), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_slot_outside_the_variables_strategy_scope_is_an_error(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        variable = tf.Variable([1.0, 2.0])
    optimizer = SGDIpuOptimizer(momentum=0.5)
    with pytest.raises(
        ValueError, match="Trying to create optimizer slot variable under the scope"
    ):
        optimizer.apply_gradients([(tf.constant([0.1, 0.2]), variable)])


def test_sparse_gradients_are_not_supported():
    variable = tf.Variable(np.ones((4, 2), np.float32))
    sparse = tf.IndexedSlices(tf.ones((1, 2)), tf.constant([1]), tf.constant([4, 2]))
    with pytest.raises(NotImplementedError, match="sparse gradients"):
        SGDIpuOptimizer().apply_gradients([(sparse, variable)])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"momentum": 1.5}, ValueError, "`momentum` must be between \\[0, 1\\]"),
        ({"momentum": -0.1}, ValueError, "`momentum` must be between \\[0, 1\\]"),
        ({"momentum_accum_dtype": tf.int32}, ValueError, "momentum_accum_dtype must be None"),
        ({"momentum_accum_dtype": "nonsense"}, TypeError, "momentum_accum_dtype must be None"),
        ({"optimizer_compute_precisions": ()}, ValueError, "1 dtype"),
        ({"optimizer_compute_precisions": [None]}, TypeError, "floating-point dtypes"),
        ({"beta_1": 0.9}, TypeError, "Unexpected keyword argument"),
        ({"clipvalue": -1.0}, ValueError, "clipvalue >= 0"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        SGDIpuOptimizer(**kwargs)


def test_compute_precision_is_honoured():
    # lr * g = 1e-9 is 0 in float16 but moves a small float32 weight.
    results = {}
    for precision in (tf.float32, tf.float16):
        optimizer = SGDIpuOptimizer(1e-5, optimizer_compute_precisions=(precision,))
        (variable,) = run_tf(
            optimizer, gradients=[[np.full(2, 1e-4)]], initial=[np.full(2, 1e-6, np.float32)]
        )
        results[precision] = variable.numpy()
    np.testing.assert_allclose(results[tf.float32], 1e-6 - 1e-9, rtol=1e-6)
    np.testing.assert_array_equal(results[tf.float16], np.full(2, 1e-6, np.float32))


def test_model_fit_with_two_replicas_equals_stock_sgd(strategy_on):
    x, y = tiny_data()
    strategy = strategy_on(2)
    with strategy.scope():
        model, losses = fit(SGDIpuOptimizer(0.05, momentum=0.9), x, y)
        stock, _ = fit(tf_keras.optimizers.legacy.SGD(0.05, momentum=0.9), x, y)
    assert losses[-1] < losses[0]
    for got, want in zip(model.get_weights(), stock.get_weights(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
