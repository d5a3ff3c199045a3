"""What litellm imports only on its first completion, imported ahead by every test process and by the zygote.

pytester drops every module first imported inside an in-process run (it restores ``sys.modules``), so the next run
imports it again: these ~48 modules (litellm's proxy types, its logging callbacks, tiktoken's loader) were imported
again by every run that made a model call, and by every fork of the zygote (tests/preloaded_workers.py): about a
third of the CPU of the in-process tests.  tests/test_preloaded_workers.py checks that neither imports them again.

Found with litellm 1.110.2 (:data:`MEASURED_WITH`); litellm is not pinned, and another version may import other
modules on its first call or lack one of these: that costs time, not a failure (:func:`preload`, and the test
checks the whole of litellm's first-call imports only under the version they were found with).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib

MEASURED_WITH = "1.110.2"
FIRST_CALL = (
    "litellm.proxy.openai_files_endpoints.common_utils", "litellm.proxy.spend_tracking.savings",
    "litellm.llms.github_copilot.per_user_auth", "litellm.llms.openai_like.dynamic_config",
    "litellm._service_logger", "litellm.integrations.generic_api.generic_api_callback",
    "litellm.integrations.prometheus_services", "litellm.litellm_core_utils.logging_callback_manager",
    "litellm.llms.litellm_proxy.chat.transformation", "litellm.llms.openai.chat.gpt_audio_transformation",
    "tiktoken_ext.openai_public", "tiktoken.load",
)


def preload(name: str) -> None:
    """Import ``name``.  One of :data:`FIRST_CALL` that this litellm does not have (the module itself, or a package
    of its path) is left out; any other missing module (a dependency it needs) is raised."""
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if name not in FIRST_CALL or not f"{name}.".startswith(f"{exc.name}."):
            raise
