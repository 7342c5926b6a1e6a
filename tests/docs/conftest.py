"""Prints how many documentation examples ran, so none is skipped silently."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from .test_examples import examples_summary

    if terminalreporter.stats.get("passed") or terminalreporter.stats.get("failed"):
        terminalreporter.write_line(examples_summary())
