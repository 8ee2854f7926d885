"""The ai.onnx operator versions the original's OpManager registers (the OpCreator
registrations of willow/src/op/*.cpp), all public.

The original lists only these as supported (willow/src/opmanager.cpp,
getSupportedOperations) and every other operator of an opset as unsupported
(getUnsupportedOperations), even those it runs by rewriting the ONNX model first (Gemm,
Acos, DepthToSpace, ...: willow/src/onnxpasses/) and those ONNX has at later opsets than the
original's 6 to 11.
"""

from __future__ import annotations

ONNX_VERSIONS: dict[str, tuple[int, ...]] = {
    "Abs": (6,), "Add": (6, 7), "And": (1, 7), "ArgMax": (1, 11), "ArgMin": (1, 11), "Asin": (7,),
    "Atan": (7,), "AveragePool": (1, 7, 10, 11), "BatchNormalization": (6, 7, 9), "Cast": (6, 9),
    "Ceil": (1, 6), "Clip": (6, 11), "Concat": (1, 4, 11), "Constant": (9, 11),
    "ConstantOfShape": (9,), "Conv": (1, 11), "ConvTranspose": (1, 11), "Cos": (7,), "Cosh": (9,),
    "CumSum": (11,), "Div": (6, 7), "Dropout": (6, 7, 10), "Elu": (1, 6), "Equal": (1, 7, 11),
    "Erf": (9,), "Exp": (6,), "Expand": (8,), "Flatten": (1, 9, 11), "Floor": (1, 6),
    "GRU": (3, 7), "Gather": (1, 11), "GlobalAveragePool": (1,), "GlobalMaxPool": (1,),
    "Greater": (1, 7, 9), "HardSigmoid": (1, 6), "Identity": (1,), "If": (1, 11),
    "InstanceNormalization": (6,), "IsInf": (10,), "IsNaN": (9,), "LRN": (1,), "LSTM": (1, 7),
    "LeakyRelu": (1, 6), "Less": (7, 9), "Log": (6,), "LogSoftmax": (1, 11), "Loop": (1, 11),
    "MatMul": (1, 9), "Max": (6, 8), "MaxPool": (1, 8, 10, 11), "Mean": (6, 8), "Min": (6, 8),
    "Mul": (6, 7), "Neg": (6,), "Not": (1,), "OneHot": (9, 11), "Or": (1, 7), "PRelu": (9,),
    "Pad": (2, 11), "Pow": (1, 7), "RNN": (7,), "RandomNormal": (1,), "RandomNormalLike": (1,),
    "RandomUniform": (1,), "RandomUniformLike": (1,), "Reciprocal": (6,), "ReduceL1": (1, 11),
    "ReduceL2": (1, 11), "ReduceLogSum": (1, 11), "ReduceLogSumExp": (1, 11),
    "ReduceMax": (1, 11), "ReduceMean": (1, 11), "ReduceMin": (1, 11), "ReduceProd": (1, 11),
    "ReduceSum": (1, 11), "ReduceSumSquare": (1, 11), "Relu": (6,), "Reshape": (5,),
    "Resize": (10, 11), "RoiAlign": (10,), "Round": (11,), "Scan": (9, 11), "Scatter": (9, 11),
    "ScatterElements": (11,), "Selu": (1, 6), "Shape": (1,), "Shrink": (9,), "Sigmoid": (6,),
    "Sign": (9,), "Sin": (7,), "Sinh": (9,), "Slice": (1, 10, 11), "Softmax": (1, 11),
    "Softplus": (1,), "Softsign": (1,), "Split": (2, 11), "Sqrt": (6,), "Squeeze": (1, 11),
    "Sub": (6, 7), "Sum": (6, 8), "Tanh": (6,), "ThresholdedRelu": (10,), "Tile": (1, 6),
    "TopK": (1, 10, 11), "Transpose": (1,), "Unsqueeze": (1, 11), "Upsample": (9,), "Where": (9,),
}  # fmt: skip

GRAPHCORE_NOT_REGISTERED = frozenset({"DepthToSpace", "Remainder", "GroupedScatterReduce"})
