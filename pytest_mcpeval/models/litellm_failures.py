"""Why a litellm call failed: retried or not (:func:`classify`), the one line that says what to change, and how long
to wait before the next attempt (:func:`backoff`, a ``Retry-After`` header or Gemini's ``RetryInfo``).

Retries are ours, not litellm's (its ``num_retries`` is forced to 0), and only for errors that may pass: rate
limits (429), timeouts, connection errors (refused, reset, closed) and 5xx answers, with exponential backoff and
full jitter, honouring a ``Retry-After`` header (seconds or an HTTP date, capped at :data:`RETRY_AFTER_CAP`) or,
without one, a ``RetryInfo.retryDelay`` in the body (Gemini's only way to say it; capped at the timeout too).
Errors that cannot pass by waiting fail at once with one line saying what to change.  litellm's classes and
status codes alone do not tell these apart, so the chain of causes and the message text are read too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.litellm_load import load_litellm
from pytest_mcpeval.models.litellm_params import request_params

log = logging.getLogger(__name__)

BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0  # seconds: a longer Retry-After (a daily quota) is waited this long, then retried
DETAIL_CAP = 300  # characters of the provider's message kept in an error line
# exception classes worth a retry when they carry no HTTP status
TRANSIENT = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError",
             "APIError", "BadGatewayError")
# the key never left this machine: litellm or the provider's SDK refused to call without one
MISSING_KEY = re.compile(
    r"missing[\w ]{0,30}?(credentials|api[ _-]?key)|api_key client option must be set"
    r"|didn't provide an api key|no api[ _-]?key (is |was )?(set|provided|found)",
    re.IGNORECASE,
)
# the server answered 2xx, but with something that is not a chat completion: the same again next time
UNDECODABLE = re.compile(
    r"Received response - <APIResponse \[2\d\d|codec can't decode|Empty or invalid response from LLM endpoint"
    r"|response with no 'choices'|'choices' that is not a list|Invalid response object",
)
NO_PROVIDER = "LLM Provider NOT provided"
# litellm's wrapping of a body it could not parse: "error - <the cause>, Received response - <APIResponse ...>"
_LITELLM_DECODE = re.compile(r"^(?:error - )?(.*?)(?:, Received response - .*)?$")
# the transport's own words for a connection that failed (httpx / httpcore / the OS), by class name
CONNECTION_FAILURES = ("ConnectError", "ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError",
                       "BrokenPipeError", "ReadError", "WriteError", "RemoteProtocolError")
# "litellm.RateLimitError: RateLimitError: OpenAIException - slow down" -> "slow down"
_PREFIX = re.compile(
    r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout)(?: Error)?:\s*|\w+(?:Exception|Error)(?: \w+)? - )+"
)


# -- failures -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    """How one failed attempt is handled: retried or not, and the line that explains it."""

    retry: bool
    message: str
    key_rejected: bool = False  # no key, or the provider refused it (HTTP 401): every call of the model would be


def _cap(text: str) -> str:
    return text if len(text) <= DETAIL_CAP else text[: DETAIL_CAP - 1] + "…"


def _detail(exc: Exception, cap: bool = True) -> str:
    """The provider's message, on one line, without litellm's class-name prefixes."""
    text = " ".join(str(exc).split("\n", 1)[0].split())
    text = _PREFIX.sub("", text).strip() or type(exc).__name__
    return _cap(text) if cap else text


def _missing_keys(model: ModelSpec) -> list[str]:
    """The environment variables litellm would read the model's credentials from and finds unset."""
    litellm = load_litellm()

    user = model.user_params
    try:
        found = litellm.validate_environment(model=model.target, api_key=user.get("api_key"),
                                             api_base=user.get("api_base"), api_version=user.get("api_version"))
    except Exception as exc:  # only the wording of the error line depends on it: the generic "no API key" line
        log.debug("litellm.validate_environment failed for %s: %r", model.target, exc)
        return []
    return [str(name) for name in found.get("missing_keys") or []]


def _no_key(model: ModelSpec, detail: str) -> str:
    names = _missing_keys(model)
    if not names:
        return f"no API key: {detail} (set the provider's key variable, or api_key in mcp_model_params)"
    if len(names) == 1:
        return f"no API key: set {names[0]} (or api_key in mcp_model_params)"
    if all("API_KEY" in n for n in names):  # alternatives, such as GEMINI_API_KEY or GOOGLE_API_KEY
        return f"no API key: set {' or '.join(names)} (or api_key in mcp_model_params)"
    # all needed, such as Azure's key, base and version
    variables = ", ".join(names[:-1]) + " and " + names[-1]
    return f"no credentials: set {variables} (or the matching api_key, api_base, ... in mcp_model_params)"


missing_keys = _missing_keys  # for the pre-flight check (run/preflight.py): the same words as a failed call's
no_key_message = _no_key


def _unsupported(model: ModelSpec, detail: str) -> str:
    detail = _cap(re.split(r"\.?\s+To drop ", detail, maxsplit=1)[0])  # litellm's own advice is replaced
    named = sorted(k for k in model.params if re.search(rf"\b{re.escape(k)}\b", detail))
    user = [k for k in named if k not in model.defaults]
    if user or not named:
        which = f" {', '.join(user)} (from mcp_model_params)" if user else ""
        return (f"unsupported parameter{which}: {detail}; remove it from mcp_model_params "
                'or add "drop_params": true to have litellm drop it')
    return (f"unsupported default parameter {', '.join(named)}: {detail}; set a value the model accepts "
            "in mcp_model_params")


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from (or during), outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _http_status_error(exc: BaseException) -> bool:
    """An error of the transport for an HTTP error status (httpx's, or the openai SDK's)."""
    kind = type(exc)
    return kind.__name__ == "HTTPStatusError" or (
        kind.__module__.split(".")[0] == "openai" and isinstance(getattr(exc, "status_code", None), int))


def _one_line(exc: BaseException) -> str:
    return _cap(" ".join(str(exc).split()) or type(exc).__name__)


def _undecodable(detail: str) -> Failure:
    return Failure(False, f"the response could not be decoded (not UTF-8, not JSON or not a chat completion): "
                          f"{detail}")


def _connection(exc: BaseException, model: ModelSpec) -> str:
    """The line of a failed connection.  aiohttp (litellm's async transport) says "Cannot connect to host H:P
    ssl:<object> [Connect call failed (...)]": its ``os_error`` is read, as httpx's error says it."""
    where = model.user_params.get("api_base")
    said = _one_line(exc)
    for link in _causes(exc):
        cause = getattr(link, "os_error", None)
        if isinstance(cause, OSError) and cause.errno:
            said = f"[Errno {cause.errno}] {os.strerror(cause.errno)}"
            break
    return f"connection error: {said}" + (f" (api_base {where})" if where else "")


def classify(exc: Exception, model: ModelSpec, timeout: float | None = None,
             timeout_option: str = "--mcp-timeout") -> Failure:
    """Whether a failed attempt may pass if tried again, and the line that says what happened (a timeout names
    ``timeout_option``, the option that set it)."""
    name = type(exc).__name__
    detail = _detail(exc)
    text = str(exc)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    causes = list(_causes(exc))[1:]
    # a 2xx body that is not UTF-8 or not JSON: the same bytes next time (litellm says status 500 for it); the
    # causes of an HTTP error status are left out (its body is only the error's detail)
    status_error = next((i for i, c in enumerate(causes) if _http_status_error(c)), len(causes))
    decode = next((c for c in causes[:status_error] if isinstance(c, UnicodeDecodeError | json.JSONDecodeError)),
                  None)
    if decode is not None:
        return _undecodable(_one_line(decode))
    if MISSING_KEY.search(text):
        return Failure(False, _no_key(model, detail), key_rejected=True)
    if name == "UnsupportedParamsError":
        return Failure(False, _unsupported(model, _detail(exc, cap=False)))
    if name == "ContextWindowExceededError":
        said = _provider_error(exc)[1]
        return Failure(False, f"the request does not fit the model's context window: {_cap(said or detail)}")
    if NO_PROVIDER in text:
        return Failure(False, f"litellm cannot tell the provider of {model.target!r}: write PROVIDER/MODEL "
                              "(e.g. openai/gpt-5, anthropic/claude-sonnet-4-5), or map the name in mcp_model_aliases")
    if "timed out" in text.lower():  # our own read timeout, whichever class litellm gives it (Timeout, or a 500)
        within = f" within {timeout:g} s ({timeout_option})" if timeout is not None else ""
        said = re.sub(r"\s*Error_str:.*$", "", detail).strip()
        said = "" if said.rstrip(".").lower() in ("request timed out", "timed out", "timeout", "") else f": {said}"
        return Failure(True, f"Timeout: no answer{within}{said}")
    if UNDECODABLE.search(text):
        if "Invalid response object" in text and causes:  # litellm's text is a traceback: say what it says last
            root = causes[-1]
            return _undecodable(f"not a chat completion ({type(root).__name__}: {_one_line(root)})")
        match = _LITELLM_DECODE.match(_detail(exc, cap=False))
        return _undecodable(_cap(match.group(1) if match and match.group(1) else detail))
    broken = next((c for c in causes if type(c).__name__ in CONNECTION_FAILURES), None)
    if broken is not None and status in (None, 500):  # litellm gives a failed connection status 500
        return Failure(True, _connection(broken, model))
    if status is None:
        retry = name in TRANSIENT
        return Failure(retry, f"{name}: {detail}")
    kind, message = _provider_error(exc)
    if message:
        detail = _cap(message)
    http = f"HTTP {status}" + (f" {kind}" if kind else "")
    if status == 429 or status == 408 or status >= 500:
        return Failure(True, f"{name} ({http}): {detail}")
    if status == 401:
        if _missing_keys(model):
            return Failure(False, _no_key(model, detail), key_rejected=True)
        return Failure(False, f"authentication failed ({http}): {detail}: check the API key "
                              "(the provider's key variable, or api_key in mcp_model_params)", key_rejected=True)
    if status == 403:
        return Failure(False, f"permission denied ({http}): {detail}: the key may not use this model")
    if status == 404:
        where = model.user_params.get("api_base")
        hint = f"the model name and api_base {where}" if where else "the model name"
        return Failure(False, f"model or endpoint not found ({http}): {detail}: check {hint}")
    return Failure(False, f"bad request ({http}): {detail}{_blamed_default(model, detail)}")


def _provider_error(exc: Exception) -> tuple[str | None, str | None]:
    """The provider's error type and message, from its error body: the openai SDK's parsed ``body`` (OpenAI,
    Azure), else the JSON litellm quotes in its message (Anthropic, Gemini, Ollama, vLLM).  The shapes::

        {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}   Anthropic
        {"error": {"code": 400, "message": "...", "status": "INVALID_ARGUMENT"}}           Gemini
        {"error": {"message": "...", "type": "...", "code": ...}}                          OpenAI, Azure
        {"object": "error", "message": "...", "type": "BadRequestError", "code": 400}      vLLM
        {"error": "..."}                                                                   Ollama

    ``(None, None)`` when there is no such body (litellm's message is then shown as it is)."""
    body: Any = getattr(exc, "body", None)
    if not isinstance(body, dict):  # the response litellm kept (its Azure errors carry no body)
        try:
            body = getattr(exc, "response", None).json()  # type: ignore[union-attr]
        except Exception:  # no response, or one whose body is not JSON: the message text is read instead (below)
            body = None
    if not isinstance(body, dict):
        text = _detail(exc, cap=False)
        start = text.find("{")
        try:
            body = json.JSONDecoder().raw_decode(text[start:])[0] if start >= 0 else None
        except ValueError:
            body = None
    if not isinstance(body, dict):
        return None, None
    error = body.get("error", body)
    if isinstance(error, str):
        return None, error
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None, None
    kinds = (error.get("type"), error.get("status"), error.get("code"))
    kind = next((str(k) for k in kinds if isinstance(k, str) and k and not k.isdigit()), None)
    return kind, " ".join(str(error["message"]).split())


def _blamed_default(model: ModelSpec, detail: str) -> str:
    """What to add to a refusal that names a plugin default which was sent: that it was the default, and how to
    set it (the user never wrote it)."""
    sent = request_params(model)
    named = [k for k in model.defaults if k in sent and re.search(rf"\b{re.escape(k)}\b", detail)]
    if not named:
        return ""
    said = ", ".join(f"{k}={sent[k]!r}" for k in named)
    return (f" (the plugin's default {said} was sent, not a value of yours: set "
            f"{' and '.join(repr(k) for k in named)} in mcp_model_params to a value the model accepts)")


# -- waiting before a retry --------------------------------------------------------------------------

def _retry_after(exc: Exception, timeout: float | None = None) -> float | None:
    """Seconds the provider asked to wait before the next attempt: a ``Retry-After`` header on the error (a
    number of seconds or an HTTP date), else a ``google.rpc.RetryInfo`` ``retryDelay`` in the error body (Gemini
    sends its wait only there: :func:`_retry_info`); clamped to ``[0, RETRY_AFTER_CAP]``, and to ``timeout``
    (``--mcp-timeout``) for the body's delay; ``None`` when absent or unreadable."""
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None)
    value: Any = None
    if headers:
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except AttributeError:
            value = None
    if value is None:
        delay = _retry_info(exc)
        if delay is None:
            return None
        return min(delay, RETRY_AFTER_CAP, timeout if timeout is not None else RETRY_AFTER_CAP)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(str(value)).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError):
            return None
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")  # a google.protobuf.Duration in JSON: "12s", "0.5s"


def _retry_info(exc: Exception) -> float | None:
    """The ``retryDelay`` of a ``RetryInfo`` detail in the error's body (``{"error": {"details": [{"@type":
    "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]}}``), in seconds; ``None`` without one.

    litellm keeps a Gemini error's body only as text, in the exception's message after ``GeminiException -``
    (its ``body`` is ``None`` and its ``response`` a stand-in without the body): each JSON object of the text
    (and of a ``body`` or ``response`` that has one) is read."""
    texts: list[str] = []
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        texts.append(json.dumps(body))
    response = getattr(exc, "response", None)
    with contextlib.suppress(Exception):  # a response whose body was not read
        texts.append(str(getattr(response, "text", "") or ""))
    texts.append(str(getattr(exc, "message", "") or exc))
    decoder = json.JSONDecoder()
    for text in texts:
        start = text.find("{")
        while start >= 0:
            try:
                value, end = decoder.raw_decode(text, start)
            except ValueError:
                start = text.find("{", start + 1)
                continue
            error = value.get("error") if isinstance(value, dict) else None
            details = error.get("details") if isinstance(error, dict) else None
            for detail in details if isinstance(details, list) else []:
                if isinstance(detail, dict) and detail.get("@type") == RETRY_INFO:
                    match = _DURATION.match(str(detail.get("retryDelay", "")))
                    if match:
                        return max(float(match.group(1)), 0.0)
            start = text.find("{", end)
    return None


def backoff(attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): full jitter, or the server's wish."""
    if retry_after is not None:
        return retry_after
    return rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))
