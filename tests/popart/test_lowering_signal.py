"""DFT against numpy's FFT (and onnx.reference), eagerly and under XLA."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import reference, run_lowered, single_node_model

RNG = np.random.default_rng(13)


def _complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def _expected(x, axis, length, inverse, onesided):
    signal = _complex(x.astype(np.float64))
    if inverse and onesided:
        return np.fft.irfft(signal, n=length, axis=axis)[..., None]
    result = (np.fft.ifft if inverse else np.fft.fft)(signal, n=length, axis=axis)
    if onesided:
        result = np.take(result, range(length // 2 + 1), axis=axis)
    return np.stack([result.real, result.imag], -1)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("components", [1, 2])
@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("length", [None, 6, 11])
@pytest.mark.parametrize("inverse, onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_dft(opset, components, axis, length, inverse, onesided):
    if inverse and onesided and components == 1:
        pytest.skip("an inverse one-sided DFT reads complex frequencies")
    x = RNG.normal(size=(2, 8, 5, components)).astype(np.float32)
    inputs = {"x": x, "dft_length": None if length is None else np.array(length, np.int64)}
    if opset >= 20:
        inputs["axis"] = np.array(axis, np.int64)
        attributes = {}
    else:
        attributes = {"axis": axis}
    model = single_node_model(
        "DFT",
        inputs,
        {"dft_length", "axis"},
        opset=opset,
        inverse=inverse,
        onesided=onesided,
        **attributes,
    )
    n = length or (2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis])
    expected = _expected(x, axis, n, inverse, onesided)
    if opset == 20:
        np.testing.assert_allclose(reference(model, {"x": x})[0], expected, rtol=1e-4, atol=1e-5)
    for compiled in (False, True):
        (actual,) = run_lowered(model, {"x": x}, compiled=compiled)
        assert actual.dtype == np.float32 and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("components", [1, 2])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_window", [False, True])
def test_stft(components, onesided, with_window):
    signal = RNG.normal(size=(2, 40, components)).astype(np.float32)
    window = np.hanning(16).astype(np.float32) if with_window else None
    inputs = {
        "signal": signal,
        "frame_step": np.array(6, np.int64),
        "window": window,
        "frame_length": None if with_window else np.array(16, np.int64),
    }
    model = single_node_model(
        "STFT", inputs, {"frame_step", "window", "frame_length"}, opset=17, onesided=onesided
    )
    # numpy: frames of 16 every 6 samples, windowed, transformed
    frames = np.stack([signal[:, start : start + 16] for start in range(0, 25, 6)], axis=1)
    windowed = _complex(frames.astype(np.float64)) * (window if with_window else 1)
    spectrum = np.fft.fft(windowed, axis=2)
    if onesided:  # complex signals too, as onnx.reference
        spectrum = spectrum[:, :, :9]
    expected = np.stack([spectrum.real, spectrum.imag], -1)
    np.testing.assert_allclose(
        reference(model, {"signal": signal})[0], expected, rtol=1e-4, atol=1e-4
    )
    for compiled in (False, True):
        (actual,) = run_lowered(model, {"signal": signal}, compiled=compiled)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
