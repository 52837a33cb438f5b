"""Specification: an operator's figures are made once per key, at its first use."""

from profiler.gpu.operator_figures import OperatorFigures, figures_of


def test_the_first_use_of_a_key_makes_its_figures() -> None:
    figures: dict[str, OperatorFigures] = {}
    made = figures_of(figures, "aten::mm")
    assert figures == {"aten::mm": made}
    assert made == OperatorFigures()


def test_later_uses_of_a_key_give_the_same_figures() -> None:
    figures: dict[str, OperatorFigures] = {}
    first = figures_of(figures, "aten::mm")
    first.flops += 10
    assert figures_of(figures, "aten::mm") is first
    assert figures["aten::mm"].flops == 10
