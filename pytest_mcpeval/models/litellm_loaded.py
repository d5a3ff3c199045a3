"""Imported by the fork server of the call processes (:data:`pytest_mcpeval.models.processes.PRELOAD`): litellm,
loaded as :func:`pytest_mcpeval.models.litellm_client.load_litellm` loads it, before the workers are forked."""

from pytest_mcpeval.models.litellm_client import load_litellm

load_litellm()
