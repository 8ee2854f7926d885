"""LAMBIpuOptimizer against a numpy reference of its two stages."""

from __future__ import annotations

import re

import numpy as np
import optimizer_steps
import pytest
import tensorflow as tf
import tf_keras
from optimizer_steps import tiny_data

from openipu._src.addons.keras.optimizers.lamb import LAMBIpuOptimizer

NAMES = ["dense/kernel", "dense/bias", "norm/gamma"]
INITIAL_VALUES = [
    np.array([[1.0, -0.25], [0.75, 0.1]], np.float32),
    np.array([0.5, -1.0, 2.0], np.float32),
    np.array([1.5, 0.5], np.float32),
]
GRADIENTS = [  # per step, per variable
    [np.array([[0.5, 0.0], [-0.4, 0.05]]), np.array([0.1, -0.2, 0.3]), np.array([0.2, -0.1])],
    [np.array([[0.2, -0.1], [0.3, 0.6]]), np.array([-0.3, 0.1, 0.2]), np.array([-0.4, 0.3])],
    [np.array([[-0.5, 0.3], [0.1, -0.2]]), np.array([0.05, 0.4, -0.2]), np.array([0.1, 0.1])],
]


class NumpyLAMB:
    """LAMB: stage 1 in `dtypes[0]`, stage 2 in `dtypes[1]`, state in `state_dtype`."""

    def __init__(
        self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-6, weight_decay_rate=0.0,
        exclude_from_weight_decay=(), exclude_from_layer_adaptation=(), debiasing=True,
        weight_norm_clip=None, dtypes=(np.float32, np.float32), state_dtype=np.float32,
    ):  # fmt: skip
        self.lr, self.beta_1, self.beta_2, self.epsilon = lr, beta_1, beta_2, epsilon
        self.weight_decay_rate, self.debiasing = weight_decay_rate, debiasing
        self.no_decay, self.no_adaptation = exclude_from_weight_decay, exclude_from_layer_adaptation
        self.weight_norm_clip, self.dtypes, self.state_dtype = weight_norm_clip, dtypes, state_dtype
        self.state: dict[int, dict[str, np.ndarray]] = {}
        self.ratios: dict[str, float] = {}
        self.step = 0

    def apply(self, variables, grads, lr=None, names=NAMES):
        self.step += 1
        c1, c2 = self.dtypes
        lr = self.lr if lr is None else lr
        out = []
        for index, (var, grad, name) in enumerate(zip(variables, grads, names, strict=True)):
            zeros = np.zeros_like(var, self.state_dtype)
            state = self.state.setdefault(index, {"m": zeros, "v": zeros.copy()})
            g, w = np.asarray(grad).astype(c1), var.astype(c1)
            b1, b2 = c1(self.beta_1), c1(self.beta_2)
            m = b1 * state["m"].astype(c1) + (c1(1) - b1) * g
            v = b2 * state["v"].astype(c1) + (c1(1) - b2) * g * g
            if self.debiasing:
                m_hat = m / (c1(1) - b1 ** c1(self.step))
                v_hat = v / (c1(1) - b2 ** c1(self.step))
            else:
                m_hat, v_hat = m, v
            state["m"], state["v"] = m.astype(self.state_dtype), v.astype(self.state_dtype)
            update = m_hat / (np.sqrt(v_hat) + c1(self.epsilon))
            if not any(re.search(p, name) for p in self.no_decay):
                update = update + c1(self.weight_decay_rate) * w
            ratio = c1(1)
            if not any(re.search(p, name) for p in self.no_adaptation):
                weight_norm = np.sqrt(np.sum(w.astype(np.float64) ** 2)).astype(c1)
                if self.weight_norm_clip is not None:
                    weight_norm = min(weight_norm, c1(self.weight_norm_clip))
                update_norm = np.sqrt(np.sum(update.astype(np.float64) ** 2)).astype(c1)
                if weight_norm > 0 and update_norm > 0:
                    ratio = weight_norm / update_norm
            self.ratios[name] = float(ratio)
            delta = c2(c1(lr) * ratio) * update.astype(c2)
            out.append(var - delta.astype(var.dtype))
        return out


def run_tf(optimizer, gradients=GRADIENTS, initial=INITIAL_VALUES, compiled=False):
    return optimizer_steps.run_tf(optimizer, gradients, initial, compiled, names=NAMES)


def run_numpy(reference, gradients=GRADIENTS, initial=INITIAL_VALUES, lrs=None):
    return optimizer_steps.run_numpy(reference, gradients, initial, lrs)


def assert_matches(variables, expected, rtol=1e-5, atol=1e-6):
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(variable.numpy(), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("debiasing", [True, False])
def test_plain_lamb(compiled, debiasing):
    settings = dict(beta_1=0.8, beta_2=0.9, debiasing=debiasing)
    optimizer = LAMBIpuOptimizer(0.1, **settings)
    variables = run_tf(optimizer, compiled=compiled)
    reference = NumpyLAMB(0.1, **settings)
    assert_matches(variables, run_numpy(reference))
    for index, variable in enumerate(variables):
        np.testing.assert_allclose(
            optimizer.get_slot(variable, "m"), reference.state[index]["m"], rtol=1e-5
        )
        np.testing.assert_allclose(
            optimizer.get_slot(variable, "v"), reference.state[index]["v"], rtol=1e-5
        )


def test_unchecked_settings_are_used_as_the_original_uses_them():
    # The original checks none of these: a zero norm clip makes every ratio 1 (its where()),
    # a negative decay rate and beta_1 = 0 enter the update as written, debiasing by truth.
    # An epsilon of 0 means the default, 1e-7 (`epsilon or backend_config.epsilon()`).
    settings = dict(beta_1=0.0, weight_decay_rate=-0.05, weight_norm_clip=0.0)
    variables = run_tf(LAMBIpuOptimizer(0.1, debiasing=0, epsilon=0.0, **settings))
    reference = NumpyLAMB(0.1, debiasing=False, epsilon=1e-7, **settings)
    assert_matches(variables, run_numpy(reference))
    assert set(reference.ratios.values()) == {1.0}


@pytest.mark.parametrize("compiled", [False, True])
def test_weight_decay_exclusions_and_norm_clip(compiled):
    settings = dict(
        weight_decay_rate=0.1, exclude_from_weight_decay=["bias"],
        exclude_from_layer_adaptation=["^norm/"], weight_norm_clip=1.2,
    )  # fmt: skip
    variables = run_tf(LAMBIpuOptimizer(0.1, **settings), compiled=compiled)
    reference = NumpyLAMB(0.1, **settings)
    assert_matches(variables, run_numpy(reference))
    assert reference.ratios["norm/gamma"] == 1.0
    # The kernel's norm (about 1.3) is clipped, so its ratio is 1.2 / ||u||.
    assert reference.ratios["dense/kernel"] != 1.0


def test_layer_adaptation_list_does_not_default_to_weight_decay_list():
    variables = run_tf(
        LAMBIpuOptimizer(0.1, weight_decay_rate=0.1, exclude_from_weight_decay=["bias"]),
        gradients=GRADIENTS[:1],
    )
    # bias: no decay but still layer-adapted, ratio = ||w|| / ||u|| with u = sign(g) (step 1).
    g, w = GRADIENTS[0][1], INITIAL_VALUES[1]
    update = g / (np.abs(g) + 1e-6)
    ratio = np.linalg.norm(w) / np.linalg.norm(update)
    np.testing.assert_allclose(variables[1].numpy(), w - 0.1 * ratio * update, rtol=1e-5)
    assert not np.allclose(variables[1].numpy(), w - 0.1 * update, rtol=1e-3)


def test_zero_weights_use_ratio_one():
    initial = [np.zeros_like(v) for v in INITIAL_VALUES]
    variables = run_tf(LAMBIpuOptimizer(0.1), gradients=GRADIENTS[:1], initial=initial)
    for variable, g in zip(variables, GRADIENTS[0], strict=True):
        np.testing.assert_allclose(variable.numpy(), -0.1 * g / (np.abs(g) + 1e-6), rtol=1e-5)
        assert np.all(np.isfinite(variable.numpy()))


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize(
    "precisions", [(np.float16, np.float16), (np.float32, np.float16), (np.float16, np.float32)]
)
def test_compute_precisions(compiled, precisions):
    optimizer = LAMBIpuOptimizer(
        0.1, weight_decay_rate=0.01, optimizer_compute_precisions=precisions
    )
    variables = run_tf(optimizer, compiled=compiled)
    low = run_numpy(NumpyLAMB(0.1, weight_decay_rate=0.01, dtypes=precisions))
    assert_matches(variables, low, rtol=3e-3, atol=3e-3)
    full = run_numpy(NumpyLAMB(0.1, weight_decay_rate=0.01, dtypes=(np.float64, np.float64)))
    assert_matches(variables, full, rtol=2e-2, atol=2e-2)
    assert optimizer.get_config()["optimizer_compute_precisions"] == [
        np.dtype(p).name for p in precisions
    ]


def test_fp16_state_dtypes():
    optimizer = LAMBIpuOptimizer(0.1, m_dtype=tf.float16, v_dtype="float16")
    variables = run_tf(optimizer)
    reference = NumpyLAMB(0.1, state_dtype=np.float16)
    assert_matches(variables, run_numpy(reference), rtol=1e-3, atol=1e-4)
    for index, variable in enumerate(variables):
        for slot in ("m", "v"):
            assert optimizer.get_slot(variable, slot).dtype == tf.float16
            np.testing.assert_allclose(
                optimizer.get_slot(variable, slot), reference.state[index][slot], rtol=2e-3
            )


def test_falsy_epsilon_means_1e_7():
    optimizer = LAMBIpuOptimizer(0.1, epsilon=0.0)
    assert optimizer.epsilon == 1e-7
    assert_matches(run_tf(optimizer), run_numpy(NumpyLAMB(0.1, epsilon=1e-7)))


def test_learning_rate_schedule_decay_and_clipping():
    schedule = tf_keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    variables = run_tf(LAMBIpuOptimizer(schedule))
    assert_matches(variables, run_numpy(NumpyLAMB(), lrs=[0.1, 0.05, 0.025]))

    with pytest.warns(UserWarning, match="lr"):
        optimizer = LAMBIpuOptimizer(lr=0.2, decay=0.5, clipvalue=0.15)
    variables = run_tf(optimizer, compiled=True)
    clipped = [[np.clip(g, -0.15, 0.15) for g in grads] for grads in GRADIENTS]
    lrs = [0.2 / (1 + 0.5 * step) for step in range(3)]
    assert_matches(variables, run_numpy(NumpyLAMB(), gradients=clipped, lrs=lrs))


def test_config_round_trip():
    optimizer = LAMBIpuOptimizer(
        0.01, beta_1=0.8, epsilon=1e-5, weight_decay_rate=0.05,
        exclude_from_weight_decay=["bias", "gamma"], exclude_from_layer_adaptation=["norm"],
        debiasing=False, m_dtype="float16", weight_norm_clip=2.0,
        optimizer_compute_precisions=(tf.float32, tf.float16), clipnorm=1.0,
        outline_apply_gradients=True, outline_apply_gradients_kwargs={"unused": 1},
    )  # fmt: skip
    config = optimizer.get_config()
    assert config["exclude_from_weight_decay"] == ["bias", "gamma"]
    assert config["exclude_from_layer_adaptation"] == ["norm"]
    assert config["weight_norm_clip"] == 2.0 and config["m_dtype"] == "float16"
    assert config["optimizer_compute_precisions"] == ["float32", "float16"]
    assert config["outline_apply_gradients"] is True
    restored = LAMBIpuOptimizer.from_config(config)
    assert restored.get_config() == config
    for a, b in zip(run_tf(optimizer), run_tf(restored), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def fit_and_check(x, y):
    tf_keras.utils.set_random_seed(3)
    model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=(3,), name="dense")])
    initial = [w.copy() for w in model.get_weights()]
    settings = dict(weight_decay_rate=0.01, exclude_from_weight_decay=["bias"])
    model.compile(optimizer=LAMBIpuOptimizer(0.05, **settings), loss="mse")
    losses = model.fit(x, y, batch_size=8, epochs=4, shuffle=False, verbose=0).history["loss"]
    assert losses[-1] < losses[0]
    reference = NumpyLAMB(0.05, **settings)
    weights = initial
    for _ in range(4):
        tensors = [tf.constant(w) for w in weights]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            loss = tf.reduce_mean(tf.square(tf.constant(x) @ tensors[0] + tensors[1] - y))
        grads = [g.numpy() for g in tape.gradient(loss, tensors)]
        weights = reference.apply(weights, grads, names=["dense/kernel", "dense/bias"])
    for got, want in zip(model.get_weights(), weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(
        model.predict(x, batch_size=8, verbose=0), x @ weights[0] + weights[1], rtol=1e-4, atol=1e-5
    )


def test_model_fit_matches_numpy_replay():
    fit_and_check(*tiny_data())


def test_model_fit_under_ipu_strategy(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        fit_and_check(*tiny_data())


def test_slot_outside_the_variables_strategy_scope_is_an_error(strategy_on):
    strategy = strategy_on(1)
    with strategy.scope():
        variable = tf.Variable([1.0, 2.0])
    with pytest.raises(
        ValueError, match="Trying to create optimizer slot variable under the scope"
    ):
        LAMBIpuOptimizer().apply_gradients([(tf.constant([0.1, 0.2]), variable)])


def test_sparse_gradients_are_not_supported():
    variable = tf.Variable(np.ones((4, 2), np.float32))
    sparse = tf.IndexedSlices(tf.ones((1, 2)), tf.constant([1]), tf.constant([4, 2]))
    with pytest.raises(NotImplementedError, match="sparse gradients"):
        LAMBIpuOptimizer().apply_gradients([(sparse, variable)])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"optimizer_compute_precisions": (tf.float32,)}, ValueError, "2 dtype.*got 1"),
        ({"optimizer_compute_precisions": (tf.float32,) * 3}, ValueError, "2 dtype.*got 3"),
        ({"optimizer_compute_precisions": "float32"}, TypeError, "must be a tuple"),
        ({"optimizer_compute_precisions": (tf.float32, tf.int8)}, ValueError, "floating-point"),
        ({"weight_norm_clip": "1"}, ValueError, "weight_norm_clip must be None or a number"),
        ({"m_dtype": "int32"}, ValueError, "m_dtype must be None or a floating-point dtype"),
        ({"v_dtype": object()}, TypeError, "v_dtype must be None or a floating-point dtype"),
        ({"amsgrad": True}, TypeError, "Unexpected keyword argument"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        LAMBIpuOptimizer(**kwargs)


def test_stage_precisions_are_honoured():
    no_adaptation = {"exclude_from_layer_adaptation": [""]}  # "" matches every name: ratio 1
    grads = [[np.full((2, 2), 1e-4), np.full(3, 1e-4), np.full(2, 1e-4)]]
    # Stage 1: g**2 underflows in float16, so the update is m_hat / epsilon instead of 1.
    results = {}
    for precisions in ((tf.float32, tf.float32), (tf.float16, tf.float32)):
        optimizer = LAMBIpuOptimizer(1e-3, optimizer_compute_precisions=precisions, **no_adaptation)
        results[precisions[0]] = run_tf(optimizer, gradients=grads)[1].numpy()
    np.testing.assert_allclose(results[tf.float32], INITIAL_VALUES[1] - 1e-3, rtol=1e-4)
    assert np.all(results[tf.float16] < INITIAL_VALUES[1] - 1e-2)
    # Stage 2: lr * ratio = 1e-8 is 0 in float16, so the variables stay as they are.
    for stage_2, changed in ((tf.float32, True), (tf.float16, False)):
        optimizer = LAMBIpuOptimizer(
            1e-8, optimizer_compute_precisions=(tf.float32, stage_2), **no_adaptation
        )
        bias = run_tf(optimizer, gradients=grads, initial=[v * 1e-3 for v in INITIAL_VALUES])[1]
        assert np.any(bias.numpy() != INITIAL_VALUES[1] * 1e-3) == changed
