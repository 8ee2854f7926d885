"""The operator sets a Builder exposes: ai.onnx 6-11, ai.onnx.ml 1, ai.graphcore 1."""
