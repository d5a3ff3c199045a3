"""Imported by the fork server of the call processes (:data:`pytest_mcpeval.models.processes.PRELOAD`): litellm,
loaded as :func:`pytest_mcpeval.models.litellm_load.load_litellm` loads it, before the workers are forked."""

from pytest_mcpeval.models.litellm_load import load_litellm

load_litellm()
