"""The vertex expression language of `codelet_expression_op` (`ipu.vertex_edsl`,
tensorflow/python/ipu/vertex_edsl.py).

The original builds C++ source for a Poplar vertex from these expressions
(`lower`); that part is kept as it was. openipu's `codelet_expression_op`
calls the expression function with tensors instead, so the helpers also work on
tensors: `constant(v)` converts to a tensor, `let(tensor, f)` is `f(tensor)`,
and `condition(pred, a, b)` on tensors is `tf.where(pred, a, b)`.
"""

from __future__ import annotations

from enum import IntEnum

import tensorflow as tf


class BaseType(IntEnum):
    Unknown = 0
    Int16 = 1
    Int32 = 2
    Float16 = 3
    Float32 = 4
    Sequence = 5


class Type:
    def __init__(self, type) -> None:  # noqa: A002 - the original's parameter name
        self._type = type

    def getType(self):  # noqa: N802 - the original's names
        return self._type

    def getElementType(self):  # noqa: N802
        return self.getType()


def _type_of(base: BaseType) -> type:
    class Scalar(Type):
        def __init__(self) -> None:
            Type.__init__(self, base)

    Scalar.__name__ = Scalar.__qualname__ = base.name
    return Scalar


Unknown, Int16, Int32, Float16, Float32 = (
    _type_of(base)
    for base in (
        BaseType.Unknown,
        BaseType.Int16,
        BaseType.Int32,
        BaseType.Float16,
        BaseType.Float32,
    )
)


class Sequence(Type):
    def __init__(self, element_type) -> None:
        Type.__init__(self, BaseType.Sequence)
        self._element_type = element_type

    def getElementType(self):  # noqa: N802
        return self._element_type.getElementType()


class DefaultNameSource:
    def __init__(self) -> None:
        self._i = 0

    def GetNextName(self):  # noqa: N802
        self._i += 1
        return self._i - 1


class VertexExpression:
    """An expression of the vertex language. Combined with a tensor it gives way to the
    tensor's arithmetic (only constants convert to tensors)."""

    def __init__(self, type) -> None:  # noqa: A002
        self._type = type

    def _binary(self, op: str, other):
        if not isinstance(other, VertexExpression):
            return NotImplemented
        return BinaryExpr(op, self, other)

    def __abs__(self):
        return UnaryFunctionExpr("std::abs", self)

    def __add__(self, other):
        return self._binary("+", other)

    def __sub__(self, other):
        return self._binary("-", other)

    def __mul__(self, other):
        return self._binary("*", other)

    def __neg__(self):
        return BinaryExpr("-", ConstantVertexExpr(0), self)

    def __invert__(self):
        return self.__neg__()

    def __pos__(self):
        return self

    def getType(self):  # noqa: N802
        return self._type

    def __str__(self) -> str:
        raise NotImplementedError

    def lower(self, source):
        raise NotImplementedError


class ConstantVertexExpr(VertexExpression):
    def __init__(self, val) -> None:
        if isinstance(val, int):
            VertexExpression.__init__(self, Int32())
        elif isinstance(val, float):
            VertexExpression.__init__(self, Float32())
        else:
            raise NotImplementedError
        self._val = val

    def __str__(self) -> str:
        return str(self._val)

    def lower(self, source):
        return "(" + str(self._val) + ")"


def _constant_as_tensor(value, dtype=None, name=None, as_ref=False):
    del as_ref
    return tf.constant(value._val, dtype=dtype, name=name)  # noqa: SLF001


tf.register_tensor_conversion_function(ConstantVertexExpr, _constant_as_tensor)


def constant(value):
    return ConstantVertexExpr(value)


class PlaceholderVertexExpr(VertexExpression):
    def __init__(self, name, type=None) -> None:  # noqa: A002
        VertexExpression.__init__(self, type)
        self._name = name

    def __str__(self) -> str:
        return str(self._name)

    def lower(self, source):
        return self._name


class BinaryExpr(VertexExpression):
    def __init__(self, op, lhs, rhs) -> None:
        VertexExpression.__init__(self, lhs.getType())
        self._op, self._lhs, self._rhs = op, lhs, rhs

    def __str__(self) -> str:
        return "(" + str(self._lhs) + str(self._op) + str(self._rhs) + ")"

    def lower(self, source):
        return "(" + self._lhs.lower(source) + str(self._op) + self._rhs.lower(source) + ")"


class BinaryFunctionExpr(VertexExpression):
    def __init__(self, op, lhs, rhs) -> None:
        VertexExpression.__init__(self, lhs.getType())
        self._op, self._lhs, self._rhs = op, lhs, rhs

    def __str__(self) -> str:
        return "(" + str(self._op) + "(" + str(self._lhs) + "," + str(self._rhs) + "))"

    def lower(self, source):
        lhs, rhs = self._lhs.lower(source), self._rhs.lower(source)
        return "(" + str(self._op) + "(" + str(lhs) + "," + str(rhs) + "))"


class UnaryFunctionExpr(VertexExpression):
    def __init__(self, op, lhs) -> None:
        VertexExpression.__init__(self, lhs.getType())
        self._op, self._lhs = op, lhs

    def __str__(self) -> str:
        return "(" + str(self._op) + "(" + str(self._lhs) + ") )"

    def lower(self, source):
        return "(" + str(self._op) + "(" + str(self._lhs.lower(source)) + ") )"


class LetVertexExpr(VertexExpression):
    def __init__(self, expr, f) -> None:
        VertexExpression.__init__(self, f(expr).getType())
        self._expr, self._f = expr, f

    def __str__(self) -> str:
        var_name = "x" + str(hash(self))
        body = self._f(PlaceholderVertexExpr(var_name))
        return "(let " + var_name + "=" + str(self._expr) + " in " + str(body) + ")"

    def lower(self, source):
        var_name = "var" + str(source.GetNextName())
        body = self._f(PlaceholderVertexExpr(var_name)).lower(source)
        return "[&, " + var_name + "=" + self._expr.lower(source) + "]{return " + body + ";}()"


def let(expr, f):
    """`f` applied to `expr`, bound once: a let expression, or `f(expr)` for a tensor."""
    if isinstance(expr, VertexExpression):
        return LetVertexExpr(expr, f)
    return f(expr)


class Conditional(VertexExpression):
    def __init__(self, pred, a, b) -> None:
        VertexExpression.__init__(self, a.getType())
        # The original assigns an undefined `_pred` here (a NameError): the predicate is meant.
        self._pred, self._a, self._b = pred, a, b

    def __str__(self) -> str:
        return f"(if ({self._pred}) then ({self._a}) else ({self._b}))"

    def lower(self, source):
        return (
            "(("
            + self._pred.lower(source)
            + ") ? ("
            + self._a.lower(source)
            + ") : ("
            + self._b.lower(source)
            + "))"
        )


def condition(pred, a, b):
    """`a` where `pred` holds, else `b`: a conditional expression, or `tf.where` on tensors."""
    if any(
        isinstance(x, VertexExpression) and not isinstance(x, ConstantVertexExpr)
        for x in (pred, a, b)
    ):
        return Conditional(pred, a, b)
    return tf.where(tf.convert_to_tensor(pred), a, b)
