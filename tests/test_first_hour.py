"""What a newcomer meets in the first hour: the mistakes that pytest alone answers with a generic message."""

from __future__ import annotations

import importlib.util

import pytest


def test_dash_n_with_xdist_disabled_says_what_it_needs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: -n runs the cases in parallel processes with pytest-xdist, and "
                                 "pytest-xdist is disabled here (-p no:xdist)"])
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist", "--numprocesses=auto")
    result.stderr.fnmatch_lines(["ERROR: --numprocesses=auto runs the cases*"])


def test_dash_n_without_xdist_installed_names_the_extra(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest alone says `unrecognized arguments: -n`; the plugin names what to install."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xdist" else find_spec(name, *a))
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: -n2 runs the cases in parallel processes with pytest-xdist, and "
                                 "pytest-xdist is not installed: pip install 'pytest-mcpeval[[]xdist[]]'*"])


def test_without_dash_n_nothing_changes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    assert pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist").ret == 0
