"""The package's surface: every re-exported name resolves to its module, and the torch-free parts stay torch-free."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import workers.decoding as decoding

ROOT = Path(__file__).resolve().parents[3]


def test_every_exported_name_resolves_to_the_module_that_defines_it():
    for name in decoding.__all__:
        value = getattr(decoding, name)
        module = getattr(value, "__module__", None)
        if module is not None and callable(value):  # classes and functions: defined where the package says
            assert module == f"workers.decoding.{decoding._EXPORTS[name]}", name
    assert "speculative_generate" in dir(decoding)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'generate_cached'"):
        decoding.generate_cached  # noqa: B018 (one of the old per-regime loops: gone)


def test_the_cost_curves_and_the_stop_rule_import_without_torch():
    """The storage and the dashboard read round-cost tables and curves; they must not pay for torch."""
    code = (
        "import sys, workers.decoding.costmodel, workers.decoding.costcurve, workers.decoding.adaptive, workers.decoding; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
