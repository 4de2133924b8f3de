"""Arithmetic for calculation questions, evaluated by walking the `ast` (never `eval`).

Only numbers, operand names, + - * / // % **, unary minus and parentheses are allowed;
anything else (calls, attributes, names not among the operands) is refused.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping

from judge.errors import JudgeError

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?|-?\d*\.\d+")
MAX_EXPONENT = 100  # 10**10**10 would hang: exponents stay small
MAX_LENGTH = 500


class CalculationError(JudgeError):
    """An expression that is not plain arithmetic over the operands, or cannot be computed."""


def evaluate(expression: str, operands: Mapping[str, float]) -> float:
    """The value of an arithmetic expression over named operands."""
    if len(expression) > MAX_LENGTH:
        raise CalculationError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.replace("×", "*").replace("÷", "/"), mode="eval")
    except SyntaxError as exc:
        raise CalculationError(f"not an arithmetic expression: {exc.msg}") from None
    try:
        value = _walk(tree.body, operands)
    except (ZeroDivisionError, OverflowError) as exc:
        raise CalculationError(f"cannot be computed: {exc}") from None
    if not math.isfinite(value):
        raise CalculationError("the value is not a finite number")
    return value


def _walk(node: ast.AST, operands: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool):
            raise CalculationError("True and False are not numbers")
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id not in operands:
            raise CalculationError(
                f"{node.id!r} is not one of the operands ({', '.join(operands)})"
            )
        return float(operands[node.id])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _walk(node.operand, operands)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left, operands), _walk(node.right, operands)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculationError(f"exponent {right:g} is too large")
        return _BINARY[type(node.op)](left, right)
    raise CalculationError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def numbers(text: str) -> list[float]:
    """The numbers written in a text (thousands separators understood)."""
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def matches(value: float, answer: str, rel: float = 0.005) -> bool:
    """Whether the answer states the value (within 0.5%, so rounding to 2-3 digits passes)."""
    return any(math.isclose(value, n, rel_tol=rel, abs_tol=1e-9) for n in numbers(answer))
