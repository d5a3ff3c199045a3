"""What may be secret in a server's configuration, learnt before it starts so that the report and the logs mask it:
a benchmark file's ``server:`` block (:func:`server_secrets`) or what an ``mcp_server`` fixture returned
(:func:`object_secrets`).  The recognisers are :mod:`pytest_mcpeval.redact`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_mcpeval.transports import expand_env

if TYPE_CHECKING:
    from pytest_mcpeval.benchmark.schema import ServerSpec


def server_secrets(spec: ServerSpec | None) -> list[str]:
    """What may be secret in a server block, as it will be used (``${VAR}`` replaced): the values of its
    secret-named ``env:`` entries and ``headers:``, what its command passes under a secret-looking flag or name,
    and the secret parts of its URL (:mod:`pytest_mcpeval.redact`).  Learnt when the file is collected."""
    from pytest_mcpeval.redact import command_secrets, environment_secrets, header_secrets, url_secrets

    if spec is None:
        return []
    found: list[str] = []
    if spec.command is not None:
        found += command_secrets([expand_env(part) for part in spec.command])
    if spec.env:
        found += environment_secrets({k: expand_env(v) for k, v in spec.env.items()})
    if spec.url is not None:
        found += url_secrets(expand_env(spec.url))
    if spec.headers:
        found += header_secrets({k: expand_env(v) for k, v in spec.headers.items()})
    return found


def object_secrets(obj: Any) -> list[str]:
    """:func:`server_secrets` of what an ``mcp_server`` fixture returned: a URL, or ``StdioServerParameters``."""
    from pytest_mcpeval.redact import command_secrets, environment_secrets, url_secrets

    if isinstance(obj, str):
        return url_secrets(obj)
    command, args, env = getattr(obj, "command", None), getattr(obj, "args", None), getattr(obj, "env", None)
    found: list[str] = []
    if isinstance(command, str) and isinstance(args, list):
        found += command_secrets([command, *map(str, args)])
    if isinstance(env, dict):
        found += environment_secrets({str(k): str(v) for k, v in env.items()})
    return found
