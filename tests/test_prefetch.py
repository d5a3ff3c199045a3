"""run/prefetch.py: whether a conftest.py overrides the mcp_server fixture, asked before any item runs."""

from __future__ import annotations

import pytest

from pytest_mcpeval.run.prefetch import server_overridden


@pytest.mark.parametrize(("conftest", "expected"), [
    (None, False),
    ("import pytest\n\n@pytest.fixture(scope='session')\ndef mcp_server():\n    return None\n", True),
    ("import pytest\n\n@pytest.fixture(name='mcp_server', scope='session')\ndef srv():\n    return None\n", True),
    ("import pytest\n\n@pytest.fixture(scope='session')\ndef other_server():\n    return None\n", False),
])
def test_an_override_by_name_or_by_the_fixture_name_is_seen(pytester: pytest.Pytester, conftest: str | None,
                                                            expected: bool) -> None:
    if conftest is not None:
        pytester.makeconftest(conftest)
    config = pytester.parseconfigure(pytester.path)
    assert config.pluginmanager.get_plugin("mcpeval") is not None  # ours, with its own mcp_server: not counted
    assert server_overridden(config) is expected
