"""AdamIpuOptimizer against a numpy Algorithm-1 reference."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from optimizer_steps import GRADIENTS, INITIAL_VALUES, run_numpy, run_tf, tiny_data

from openipu._src.addons.keras.optimizers.adam import AdamIpuOptimizer


class NumpyAdam:
    """Adam, Algorithm 1 of Kingma and Ba, with optional AMSGrad and state dtypes."""

    def __init__(
        self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False, debiasing=True,
        m_dtype=np.float32, v_dtype=np.float32, vhat_dtype=np.float32,
    ):  # fmt: skip
        self.lr, self.beta_1, self.beta_2, self.epsilon = lr, beta_1, beta_2, epsilon
        self.amsgrad, self.debiasing = amsgrad, debiasing
        self.dtypes = {"m": m_dtype, "v": v_dtype, "vhat": vhat_dtype}
        self.state: dict[int, dict[str, np.ndarray]] = {}
        self.step = 0

    def apply(self, variables: list[np.ndarray], grads: list[np.ndarray], lr=None) -> list:
        self.step += 1
        lr = self.lr if lr is None else lr
        out = []
        for index, (var, grad) in enumerate(zip(variables, grads, strict=True)):
            state = self.state.setdefault(
                index, {name: np.zeros_like(var, dtype) for name, dtype in self.dtypes.items()}
            )
            grad = np.asarray(grad, np.float64)
            m = self.beta_1 * state["m"].astype(np.float64) + (1 - self.beta_1) * grad
            v = self.beta_2 * state["v"].astype(np.float64) + (1 - self.beta_2) * grad**2
            if self.debiasing:
                m_hat = m / (1 - self.beta_1**self.step)
                v_hat = v / (1 - self.beta_2**self.step)
            else:
                m_hat, v_hat = m, v
            state["m"] = m.astype(self.dtypes["m"])
            state["v"] = v.astype(self.dtypes["v"])
            if self.amsgrad:
                v_hat = np.maximum(state["vhat"].astype(np.float64), v_hat)
                state["vhat"] = v_hat.astype(self.dtypes["vhat"])
            out.append(var - (lr * m_hat / (np.sqrt(v_hat) + self.epsilon)).astype(var.dtype))
        return out


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("debiasing", [True, False])
def test_matches_algorithm_1(compiled, amsgrad, debiasing):
    settings = dict(beta_1=0.8, beta_2=0.9, epsilon=1e-3, amsgrad=amsgrad, debiasing=debiasing)
    optimizer = AdamIpuOptimizer(learning_rate=0.1, **settings)
    variables = run_tf(optimizer, compiled=compiled)
    reference = NumpyAdam(lr=0.1, **settings)
    expected = run_numpy(reference)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)
    for index, variable in enumerate(variables):
        np.testing.assert_allclose(
            optimizer.get_slot(variable, "m"), reference.state[index]["m"], rtol=1e-5
        )
        np.testing.assert_allclose(
            optimizer.get_slot(variable, "v"), reference.state[index]["v"], rtol=1e-5
        )
        if amsgrad:
            np.testing.assert_allclose(
                optimizer.get_slot(variable, "vhat"), reference.state[index]["vhat"], rtol=1e-5
            )
    assert ("vhat" in optimizer.get_slot_names()) == amsgrad
    assert int(optimizer.iterations) == len(GRADIENTS)


def test_epsilon_is_added_to_the_debiased_root_not_the_keras_form():
    # CONFLICT choice: Algorithm 1. With a large epsilon the Keras form differs visibly.
    settings = dict(learning_rate=0.1, beta_1=0.9, beta_2=0.999, epsilon=0.5)
    ours = run_tf(AdamIpuOptimizer(**settings), gradients=GRADIENTS[:1])
    keras = run_tf(tf_keras.optimizers.legacy.Adam(**settings), gradients=GRADIENTS[:1])
    g = GRADIENTS[0][0]
    algorithm_1 = INITIAL_VALUES[0] - 0.1 * g / (np.abs(g) + 0.5)
    np.testing.assert_allclose(ours[0].numpy(), algorithm_1, rtol=1e-5)
    assert not np.allclose(keras[0].numpy(), algorithm_1, rtol=1e-3)


@pytest.mark.parametrize("compiled", [False, True])
def test_fp16_state_dtypes(compiled):
    optimizer = AdamIpuOptimizer(
        0.1, amsgrad=True, m_dtype=tf.float16, v_dtype="float16", vhat_dtype=np.float16
    )
    variables = run_tf(optimizer, compiled=compiled)
    reference = NumpyAdam(
        lr=0.1, amsgrad=True, m_dtype=np.float16, v_dtype=np.float16, vhat_dtype=np.float16
    )
    expected = run_numpy(reference)
    for index, variable in enumerate(variables):
        assert variable.dtype == tf.float32
        for slot in ("m", "v", "vhat"):
            assert optimizer.get_slot(variable, slot).dtype == tf.float16
            np.testing.assert_allclose(
                optimizer.get_slot(variable, slot), reference.state[index][slot], rtol=2e-3
            )
        np.testing.assert_allclose(variable.numpy(), expected[index], rtol=2e-3, atol=1e-4)


def test_slots_default_to_variable_dtype_and_fp16_compute():
    optimizer = AdamIpuOptimizer(0.1, optimizer_compute_precisions=(tf.float16,))
    variables = run_tf(optimizer, dtype=np.float16)
    expected = run_numpy(NumpyAdam(lr=0.1), initial=[v.astype(np.float16) for v in INITIAL_VALUES])
    for variable, want in zip(variables, expected, strict=True):
        assert optimizer.get_slot(variable, "m").dtype == tf.float16
        assert optimizer.get_slot(variable, "v").dtype == tf.float16
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-2, atol=1e-2)


def test_learning_rate_schedule_decay_and_lr_alias():
    schedule = tf_keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    variables = run_tf(AdamIpuOptimizer(schedule))
    expected = run_numpy(NumpyAdam(), lrs=[0.1, 0.05, 0.025])
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)

    with pytest.warns(UserWarning, match="lr"):
        optimizer = AdamIpuOptimizer(lr=0.2, decay=0.5)
    variables = run_tf(optimizer, compiled=True)
    expected = run_numpy(NumpyAdam(), lrs=[0.2 / (1 + 0.5 * step) for step in range(3)])
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("clipping", [{"clipnorm": 0.1}, {"clipvalue": 0.15}])
def test_gradient_clipping(clipping):
    variables = run_tf(AdamIpuOptimizer(0.1, epsilon=0.01, **clipping))
    clipped = []
    for grads in GRADIENTS:
        if "clipnorm" in clipping:
            norms = [np.linalg.norm(g) for g in grads]
            clipped.append([g * min(1.0, 0.1 / n) for g, n in zip(grads, norms, strict=True)])
        else:
            clipped.append([np.clip(g, -0.15, 0.15) for g in grads])
    expected = run_numpy(NumpyAdam(lr=0.1, epsilon=0.01), gradients=clipped)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5)


def test_config_round_trip():
    schedule = tf_keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    optimizer = AdamIpuOptimizer(
        schedule, beta_1=0.8, beta_2=0.95, epsilon=1e-4, amsgrad=True, m_dtype=tf.float16,
        vhat_dtype="float16", debiasing=False, clipnorm=1.0,
        outline_apply_gradients=True, outline_apply_gradients_kwargs={"unused": 1},
    )  # fmt: skip
    config = optimizer.get_config()
    assert config["m_dtype"] == "float16" and config["v_dtype"] is None
    assert config["vhat_dtype"] == "float16" and config["debiasing"] is False
    assert config["optimizer_compute_precisions"] == ["float32"]
    assert config["outline_apply_gradients"] is True
    assert config["outline_apply_gradients_kwargs"] == {"unused": 1}
    restored = AdamIpuOptimizer.from_config(config)
    assert restored.get_config() == config
    first, second = run_tf(optimizer), run_tf(restored)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def tiny_model(seed: int = 3):
    tf_keras.utils.set_random_seed(seed)
    model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=(3,))])
    return model


def replay(initial, x, y, reference, steps):
    """The same full-batch steps with gradients from TF and updates from numpy."""
    weights = [w.copy() for w in initial]
    for _ in range(steps):
        tensors = [tf.constant(w) for w in weights]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            prediction = tf.constant(x) @ tensors[0] + tensors[1]
            loss = tf.reduce_mean(tf.square(prediction - y))
        grads = [g.numpy() for g in tape.gradient(loss, tensors)]
        weights = reference.apply(weights, grads)
    return weights


def fit_and_check(model, x, y):
    initial = [w.copy() for w in model.get_weights()]
    model.compile(optimizer=AdamIpuOptimizer(0.05, amsgrad=True), loss="mse")
    history = model.fit(x, y, batch_size=8, epochs=4, shuffle=False, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    expected = replay(initial, x, y, NumpyAdam(lr=0.05, amsgrad=True), steps=4)
    for got, want in zip(model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    prediction = model.predict(x, batch_size=8, verbose=0)
    np.testing.assert_allclose(prediction, x @ expected[0] + expected[1], rtol=1e-4, atol=1e-5)


def test_model_fit_matches_numpy_replay():
    x, y = tiny_data()
    fit_and_check(tiny_model(), x, y)


def test_model_fit_under_ipu_strategy(strategy_on):
    strategy = strategy_on(1)
    x, y = tiny_data()
    with strategy.scope():
        fit_and_check(tiny_model(), x, y)


def test_slot_outside_the_variables_strategy_scope_is_an_error(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        variable = tf.Variable([1.0, 2.0])
    optimizer = AdamIpuOptimizer()
    with pytest.raises(
        ValueError, match="Trying to create optimizer slot variable under the scope"
    ):
        optimizer.apply_gradients([(tf.constant([0.1, 0.2]), variable)])


def test_sparse_gradients_are_not_supported():
    variable = tf.Variable(np.ones((4, 2), np.float32))
    sparse = tf.IndexedSlices(tf.ones((1, 2)), tf.constant([1]), tf.constant([4, 2]))
    with pytest.raises(NotImplementedError, match="sparse gradients"):
        AdamIpuOptimizer().apply_gradients([(sparse, variable)])


def test_unchecked_settings_are_used_as_the_original_uses_them():
    # The original (keras Adam underneath) checks neither the betas nor epsilon nor the flags:
    # beta_1 = 0 (no momentum), epsilon = 0 and flags given as ints train as written.
    # An epsilon of 0 means Keras's default, 1e-7 (`epsilon or backend.epsilon()`).
    settings = dict(beta_1=0.0, beta_2=0.5)
    optimizer = AdamIpuOptimizer(0.1, amsgrad=1, debiasing=0, epsilon=0.0, **settings)
    variables = run_tf(optimizer)
    reference = NumpyAdam(lr=0.1, amsgrad=True, debiasing=False, epsilon=1e-7, **settings)
    expected = run_numpy(reference)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"m_dtype": tf.int32}, ValueError, "m_dtype must be None or a floating-point dtype"),
        ({"v_dtype": "nonsense"}, TypeError, "v_dtype must be None or a floating-point dtype"),
        ({"vhat_dtype": "int8"}, ValueError, "vhat_dtype"),
        ({"optimizer_compute_precisions": ()}, ValueError, "1 dtype"),
        ({"optimizer_compute_precisions": tf.float32}, TypeError, "must be a tuple"),
        ({"optimizer_compute_precisions": (tf.int32,)}, ValueError, "floating-point"),
        ({"momentum": 0.9}, TypeError, "Unexpected keyword argument"),
        ({"clipnorm": -1.0}, ValueError, "clipnorm >= 0"),
        ({"decay": -0.5}, ValueError, "decay >= 0"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        AdamIpuOptimizer(**kwargs)


def test_compute_precision_is_honoured():
    # g**2 = 1e-8 underflows in float16, so v = 0 and the step is about m_hat / epsilon.
    grads = [[np.full(2, 1e-4)]]
    results = {}
    for precision in (tf.float32, tf.float16):
        optimizer = AdamIpuOptimizer(1e-3, optimizer_compute_precisions=(precision,))
        (variable,) = run_tf(optimizer, gradients=grads, initial=[np.zeros(2, np.float32)])
        results[precision] = variable.numpy()
    np.testing.assert_allclose(results[tf.float32], -1e-3, rtol=1e-3)
    assert np.all(results[tf.float16] < -0.1)


def test_checkpoint_restore_keeps_slot_dtypes_and_values(tmp_path):
    variable = tf.Variable([1.0, 2.0], name="restored")
    optimizer = AdamIpuOptimizer(0.1, m_dtype=tf.float16)
    optimizer.apply_gradients([(tf.constant([0.3, 0.1]), variable)])
    path = tf.train.Checkpoint(var=variable, opt=optimizer).save(str(tmp_path / "ckpt"))

    # Restored before its slots exist: they are created on restore, with their own dtype.
    new_variable = tf.Variable([0.0, 0.0], name="restored")
    new_optimizer = AdamIpuOptimizer(0.1, m_dtype=tf.float16)
    tf.train.Checkpoint(var=new_variable, opt=new_optimizer).restore(path)
    new_optimizer.apply_gradients([(tf.constant([0.2, -0.1]), new_variable)])
    optimizer.apply_gradients([(tf.constant([0.2, -0.1]), variable)])
    assert new_optimizer.get_slot(new_variable, "m").dtype == tf.float16
    assert int(new_optimizer.iterations) == 2
    np.testing.assert_array_equal(new_variable.numpy(), variable.numpy())
    np.testing.assert_array_equal(
        new_optimizer.get_slot(new_variable, "m"), optimizer.get_slot(variable, "m")
    )


def test_mixed_precision_model_keeps_float32_state():
    x, y = tiny_data()
    tf_keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = tiny_model()
        model.compile(optimizer=AdamIpuOptimizer(0.05), loss="mse")
        losses = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    finally:
        tf_keras.mixed_precision.set_global_policy(None)  # back to the default (floatx) policy
    assert losses.history["loss"][-1] < losses.history["loss"][0]
    slots = [w for w in model.optimizer.weights if w.dtype != tf.int64]
    assert len(slots) == 4 and all(w.dtype == tf.float32 for w in slots)
