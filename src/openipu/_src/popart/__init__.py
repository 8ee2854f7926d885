"""PopART on emulated IPUs: builder (ONNX), lowering (ONNX -> TensorFlow), sessions."""
