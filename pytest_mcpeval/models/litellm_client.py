"""The litellm path: one chat completion with the full tool list, with retries and a timeout.

Imported only when a case actually runs (litellm costs seconds to import).  Before the import the
offline switches are set (unless the user set them), so litellm reads its bundled cost map and fetches
nothing on its own.  litellm's own environment variables (``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY``,
...) work as documented by litellm.

Messages are sent as given, in the OpenAI chat format, which litellm translates for other providers; a
flow's conversation holds assistant messages with ``tool_calls`` (``id``, ``type: function``, ``function``
with ``name`` and ``arguments`` text) and ``tool`` messages (``tool_call_id``, ``content``).  litellm gets a
copy (the caller hashes the conversation into cache keys).  Each call's ``id`` is kept on the reply (``""``
when the provider gave none: :func:`_call_id`).

Parameters (:func:`request_params`): the user's (``mcp_model_params``) are sent as given; each plugin
default (``temperature: 0``) is sent only if litellm says the model accepts it, so gpt-5 and the
o-series, which take no temperature but 1, are called without it, and not where the vendor asks for another
value (:data:`pytest_mcpeval.models.config.DEFAULT_WITHHELD`: with thinking asked for, for Gemini 3).  A 400
that names a default which was sent says so, and how to set it.

Retries are ours, not litellm's (its ``num_retries`` is forced to 0), and only for errors that may pass
(:func:`classify`): rate limits (429), timeouts, connection errors (refused, reset, closed) and 5xx
answers, with exponential backoff and full jitter, honouring a ``Retry-After`` header (seconds or an
HTTP date, capped at :data:`RETRY_AFTER_CAP`) or, without one, a ``RetryInfo.retryDelay`` in the body
(Gemini's only way to say it; capped at the timeout too).  Errors that cannot pass by waiting fail at once with
one line saying what to change: no API key, rejected key, no permission, unknown model, bad request,
unsupported parameter, context window exceeded, a response that cannot be decoded (not UTF-8, not
JSON: the same bytes come back next time), a completion without choices.  litellm's classes and status
codes alone do not tell these apart (a missing OpenAI key, a refused connection and a body that is not
UTF-8 are all an ``InternalServerError`` with status 500), so the chain of causes and the message text
are read too.

``timeout`` (``--mcp-timeout``) is a deadline for each attempt as a whole: connecting, the headers and the
whole body (:func:`_attempt`).  litellm hands it to httpx, which applies it to each read on its own, so a
provider that sends a byte every few seconds kept a call going for minutes.

A reply keeps its finish reason: litellm's normalised one and the provider's own where litellm keeps it
(:func:`_finish_reasons`).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import copy
import gc
import json
import math
import os
import random
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx  # litellm's HTTP client: imported with litellm anyway

from pytest_mcpeval.defaults import DEFAULT_RETRIES, DEFAULT_TIMEOUT
from pytest_mcpeval.models import OFFLINE_ENV, ModelCallError
from pytest_mcpeval.models.config import ModelSpec, withheld, without_secrets
from pytest_mcpeval.models.cost import read_usage, response_cost, with_cache_breakpoints
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.text import canonical_json

for _name, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_name, _value)

# litellm's import builds a few hundred thousand objects (its types, openai's, pydantic's), and the collection
# the interpreter runs as it exits traverses them all: 0.9 s of every run that made its calls in this process
# (measured: `import litellm` then exit, 3.26 s; with them frozen first, 2.35 s).  Frozen at exit, after the
# atexit handlers registered later (litellm's) ran: nothing of the run is left to collect by then.
atexit.register(gc.freeze)

_litellm: Any = None  # the module, once load_litellm imported it
_load_lock = threading.Lock()
_load_started = False  # load_litellm began its import (litellm is in sys.modules from that moment, half made)
_found_imported = False  # ... and litellm was in sys.modules already then: something else had imported it


def imported_elsewhere() -> bool:
    """Whether litellm is in this process because something other than :func:`load_litellm` imported it (a
    ``conftest.py``, a plugin, the tests): not while, nor after, the plugin's own import runs, unless litellm was
    there before it (used by :func:`pytest_mcpeval.models.processes.litellm_set_up_here`)."""
    if "litellm" not in sys.modules:
        return False
    return _found_imported if _load_started else True


def load_litellm() -> Any:
    """litellm, imported once per process with the garbage collector off, its objects then frozen.

    The import builds a few hundred thousand long-lived objects, and each of the collector's full passes
    during it traversed all those made so far: measured here, ``import litellm`` 2.23-2.35 s, 1.54-1.69 s with
    the collector off.  Frozen after (``gc.freeze``), they are not traversed again by any later pass, nor copied
    by a worker forked from the fork server that loaded them (:data:`pytest_mcpeval.models.processes.PRELOAD`).
    Any thread may call this; the ones that come while another imports wait for it."""
    global _litellm, _load_started, _found_imported
    if _litellm is None:
        with _load_lock:
            if _litellm is None:
                if not _load_started:
                    _found_imported = "litellm" in sys.modules
                    _load_started = True  # before the import puts litellm in sys.modules
                enabled = gc.isenabled()
                gc.disable()
                try:
                    import litellm
                finally:
                    if enabled:
                        gc.enable()
                gc.freeze()
                _litellm = litellm
    return _litellm

BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0  # seconds: a longer Retry-After (a daily quota) is waited this long, then retried
DETAIL_CAP = 300  # characters of the provider's message kept in an error line
# ours, never passed on to litellm
CONTROL_PARAMS = frozenset({"num_retries"})
# user parameters that can change whether a default is accepted (gpt-5.1 takes temperature 0 only with
# reasoning_effort "none"); transport, secrets and the request body itself are left out of that check
NOT_CHECKED = frozenset({"api_base", "api_version", "api_key", "base_url", "default_headers", "extra_headers",
                         "timeout", "request_timeout", "max_retries", "deployment_id", "organization", "tools",
                         "tool_choice", "functions", "function_call", "stream", "stream_options", "user"})
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
# the ids litellm gives a tool call the provider sent without one: str(uuid.uuid4()) (Ollama, and others),
# f"call_{uuid.uuid4()}", f"call_{uuid.uuid4().hex[:28]}" (Gemini), f"call_{uuid.uuid4().hex}" (Bedrock), ...
LITELLM_MADE_ID = re.compile(
    r"(call_)?([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|[0-9a-f]{16,32})")
# litellm appends a Gemini thought signature to the call's id (litellm_core_utils/prompt_templates/factory.py
# THOUGHT_SIGNATURE_SEPARATOR) as well as putting it in the call's provider_specific_fields
THOUGHT_SEPARATOR = "__thought__"
# litellm's wrapping of a body it could not parse: "error - <the cause>, Received response - <APIResponse ...>"
_LITELLM_DECODE = re.compile(r"^(?:error - )?(.*?)(?:, Received response - .*)?$")
# the transport's own words for a connection that failed (httpx / httpcore / the OS), by class name
CONNECTION_FAILURES = ("ConnectError", "ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError",
                       "BrokenPipeError", "ReadError", "WriteError", "RemoteProtocolError")
# "litellm.RateLimitError: RateLimitError: OpenAIException - slow down" -> "slow down"
_PREFIX = re.compile(
    r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout)(?: Error)?:\s*|\w+(?:Exception|Error)(?: \w+)? - )+"
)


# -- parameters -----------------------------------------------------------------------------------

_sent: dict[str, dict[str, Any]] = {}
_sent_lock = threading.Lock()




def _accepted(model: ModelSpec, name: str, value: Any) -> bool:
    """Whether litellm would send the default ``name=value`` to ``model`` along with the user's params."""
    litellm = load_litellm()
    from litellm.exceptions import UnsupportedParamsError
    from litellm.utils import get_optional_params

    litellm.suppress_debug_info = True  # no "Provider List: ..." banner on stdout for an unknown provider
    user = model.user_params
    try:
        base_model, provider, _, _ = litellm.get_llm_provider(
            model.target, custom_llm_provider=user.get("custom_llm_provider"), api_base=user.get("api_base")
        )
    except Exception:  # litellm cannot place the model: the call will say why, the default changes nothing
        return True
    known = set(getattr(litellm, "OPENAI_CHAT_COMPLETION_PARAMS", ())) - NOT_CHECKED
    context = {k: v for k, v in user.items() if k in known and k != name}

    def verdict(extra: dict[str, Any]) -> bool | None:
        try:
            get_optional_params(model=base_model, custom_llm_provider=provider, **extra)
        except UnsupportedParamsError:
            return False
        except Exception:  # an unexpected failure of the check: send the default, as the user declared it
            return None
        return True

    if context and verdict(context) is False:
        context = {}  # a parameter of the user's own is rejected (the call will say so): judge the default alone
    return verdict({**context, name: value}) is not False


def request_params(model: ModelSpec) -> dict[str, Any]:
    """The parameters :func:`complete` passes to litellm for ``model``, secrets included.

    The user's parameters as given, and each default the model accepts; never ``num_retries`` (ours).
    Memoised per model (the check asks litellm's parameter mapping, offline, a few ms the first time).
    """
    memo = canonical_json([model.target, model.params, sorted(model.defaults)])
    with _sent_lock:
        found = _sent.get(memo)
    if found is None:
        found = {
            k: v for k, v in model.params.items()
            if k not in CONTROL_PARAMS and (k not in model.defaults or (
                withheld(model.target, k, model.user_params) is None and _accepted(model, k, v)))
        }
        with _sent_lock:
            _sent[memo] = found
    return dict(found)


def params_sent(model: ModelSpec) -> dict[str, Any]:
    """What the report may show of :func:`request_params`: builtin JSON data, secrets left out."""
    data: dict[str, Any] = json.loads(json.dumps(without_secrets(request_params(model)), default=str))
    return data


# -- failures -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    """How one failed attempt is handled: retried or not, and the line that explains it."""

    retry: bool
    message: str


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
    except Exception:
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
    where = model.user_params.get("api_base")
    return f"connection error: {_one_line(exc)}" + (f" (api_base {where})" if where else "")


def classify(exc: Exception, model: ModelSpec, timeout: float | None = None) -> Failure:
    """Whether a failed attempt may pass if tried again, and the line that says what happened."""
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
        return Failure(False, _no_key(model, detail))
    if name == "UnsupportedParamsError":
        return Failure(False, _unsupported(model, _detail(exc, cap=False)))
    if name == "ContextWindowExceededError":
        said = _provider_error(exc)[1]
        return Failure(False, f"the request does not fit the model's context window: {_cap(said or detail)}")
    if NO_PROVIDER in text:
        return Failure(False, f"litellm cannot tell the provider of {model.target!r}: write PROVIDER/MODEL "
                              "(e.g. openai/gpt-5, anthropic/claude-sonnet-4-5), or map the name in mcp_model_aliases")
    if "timed out" in text.lower():  # our own read timeout, whichever class litellm gives it (Timeout, or a 500)
        within = f" within {timeout:g} s (--mcp-timeout)" if timeout is not None else ""
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
            return Failure(False, _no_key(model, detail))
        return Failure(False, f"authentication failed ({http}): {detail}: check the API key "
                              "(the provider's key variable, or api_key in mcp_model_params)")
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
        except Exception:
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


# -- the call -------------------------------------------------------------------------------------

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


def _call_id(call: Any) -> str:
    """The provider's id of a tool call; ``""`` when it gave none.  litellm then makes one up (a random UUID, or
    ``call_<random hex>`` for Gemini, with the call's thought signature appended), which would change the next
    request of a flow (and its cache key) on every run: the flow engine gives such a call a deterministic id
    instead (the signature goes back in :func:`_call_fields`)."""
    found = str(getattr(call, "id", None) or "").split(THOUGHT_SEPARATOR, 1)[0]
    return "" if LITELLM_MADE_ID.fullmatch(found) else found


def _call_fields(call: Any) -> dict[str, Any]:
    """What litellm keeps of a tool call beyond the OpenAI format and needs back on later turns, unchanged: a
    Gemini call's ``thought_signature`` (Google: it must be returned with the call, or Gemini 3 refuses the
    request; ai.google.dev/gemini-api/docs/thought-signatures)."""
    fields = getattr(call, "provider_specific_fields", None)
    fields = dict(fields) if isinstance(fields, dict) else {}
    found = str(getattr(call, "id", None) or "")
    if THOUGHT_SEPARATOR in found and not fields.get("thought_signature"):
        fields["thought_signature"] = found.split(THOUGHT_SEPARATOR, 1)[1]
    return json.loads(json.dumps(fields, default=str)) if fields.get("thought_signature") else {}


def _thinking_blocks(message: Any) -> list[dict[str, Any]] | None:
    """The reply's signed thinking blocks (Anthropic's ``thinking`` with its ``signature``, ``redacted_thinking``
    with its ``data``), as litellm gives them: a flow sends them back unchanged with the assistant turn (Anthropic
    refuses a tool-use turn without them when thinking is on).  Blocks without a signature (Gemini's thought
    summaries) are not needed back and are left out."""
    blocks = getattr(message, "thinking_blocks", None)
    if not isinstance(blocks, list):
        return None
    kept = [json.loads(json.dumps(dict(b), default=str)) for b in blocks
            if isinstance(b, dict) and (b.get("signature") or b.get("data"))]
    return kept or None


_pool_lock = threading.Lock()
_pool_checked = False


def keep_alive_pool(litellm: Any) -> None:
    """Give litellm, once per process, an HTTP client for OpenAI-compatible endpoints whose pool never closes
    a surplus idle connection, unless the user set ``litellm.client_session`` themselves.

    httpx's default pool keeps at most 20 idle connections and closes the rest; httpcore (1.0.9, and its main
    branch) can close one it has just handed to a waiting request (encode/httpcore issue 1110): the request then
    fails with "Bad file descriptor" or, worse, waits for its whole read timeout.  Measured here, 2,000 calls at
    64 in flight: a retried "Bad file descriptor" in about one run in three, a 120 s stall in about one in eight;
    with this client, none in 14 runs.  The client is built as litellm builds its own (its SSL settings, HTTP/2
    switch, redirects), with no limit on connections kept alive: the plugin's concurrency bounds them, and with
    the hooks that hold each attempt's exchange to its deadline (:func:`_attempt`)."""
    global _pool_checked
    if _pool_checked:
        return
    with _pool_lock:
        if _pool_checked:
            return
        try:
            if litellm.client_session is None:  # else the user's own
                from litellm.llms.custom_httpx.http_handler import get_ssl_configuration, http2_enabled

                for tries_left in reversed(range(3)):
                    try:
                        litellm.client_session = httpx.Client(
                            verify=get_ssl_configuration(), follow_redirects=True, http2=http2_enabled(),
                            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
                            event_hooks={"request": [_bound_request], "response": [_bound_body]})
                        break
                    except (KeyError, RuntimeError):
                        # httpx reads the proxy variables with os.environ.items(), on this call's thread: a name
                        # pytest's main thread deletes meanwhile (PYTEST_CURRENT_TEST, after every item) raises
                        if not tries_left:
                            raise
        except Exception:  # another litellm: its own clients, as before
            pass
        _pool_checked = True  # only now: the other threads' calls must not start before the client is set


# -- the deadline of an attempt ------------------------------------------------------------------------

LOCAL_ALLOWANCE = 10.0
"""Seconds an attempt may spend in this process around its HTTP exchange, before :func:`_attempt` abandons it:
litellm building the request (its first call in a process imports the provider's SDK: 0.6 s measured here) and
reading the answer (a 5 MB completion); the exchange itself gets ``timeout``."""


@dataclass
class _Exchange:
    """The deadline of one attempt's HTTP exchange, shared by the hooks of the client :func:`keep_alive_pool`
    gives litellm: set when the first request is sent (``timeout`` seconds later), in the attempt's thread."""

    timeout: float
    at: float | None = None


_exchange: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar("mcpeval_exchange", default=None)


class DeadlinePassed(Exception):
    """An attempt that had no answer by its deadline; :func:`classify` reads it as any timeout (retried)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"timed out after {timeout:g} s")


def _attempt(litellm: Any, kwargs: dict[str, Any], timeout: float) -> Any:
    """``litellm.completion(**kwargs)``: an answer whose HTTP exchange (connecting, the headers, the whole body)
    ended within ``timeout`` seconds, or an error once it did not, whatever the provider sends and however slowly.

    httpx, which litellm hands its timeout, applies it to each read alone: a provider that sends a byte every few
    seconds kept a call going for minutes.  The client the plugin gives litellm (:func:`keep_alive_pool`, used for
    OpenAI-compatible endpoints) bounds the exchange itself: its hooks read this attempt's :class:`_Exchange` (a
    context variable of the call's thread), bound each read, write and connect by the time left, and fail the body
    at the deadline (httpx's ``ReadTimeout``, a timeout like any other; the connection is closed).  Other
    providers' clients are litellm's own, which the plugin does not touch: for every call, the call runs on a
    daemon thread of its own and this one waits at most ``timeout`` + :data:`LOCAL_ALLOWANCE`; past it the call is
    abandoned (:class:`DeadlinePassed`), as the dispatcher's threads are after Ctrl-C, and its thread ends with
    its connection (the provider's answer or a read timeout)."""
    exchange = _Exchange(timeout)
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        _exchange.set(exchange)
        try:
            outcome.append((True, litellm.completion(**kwargs)))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append((False, exc))
        finally:
            done.set()

    context = contextvars.copy_context()  # litellm's own context variables, as in the calling thread
    threading.Thread(target=context.run, args=(run,), name="mcpeval-call", daemon=True).start()
    if not done.wait(timeout + LOCAL_ALLOWANCE):
        raise DeadlinePassed(timeout)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _bound_request(request: httpx.Request) -> None:
    """httpx request hook: the attempt's exchange starts with its first request; no read, write, connect or wait
    for a connection lasts longer than its deadline leaves."""
    exchange = _exchange.get()
    if exchange is None:  # a call not made by complete(): as litellm asked
        return
    now = time.monotonic()
    if exchange.at is None:
        exchange.at = now + exchange.timeout
    left = exchange.at - now
    if left <= 0:
        raise httpx.ConnectTimeout("timed out before the request was sent", request=request)
    timeouts = request.extensions.get("timeout")
    if isinstance(timeouts, dict):
        request.extensions["timeout"] = {k: left if v is None else min(float(v), left) for k, v in timeouts.items()}


def _bound_body(response: httpx.Response) -> None:
    """httpx response hook (the headers are in, the body not yet read): the body fails at the deadline."""
    exchange = _exchange.get()
    if exchange is not None and exchange.at is not None and isinstance(response.stream, httpx.SyncByteStream):
        response.stream = _DeadlineStream(response.stream, exchange.at, response.request)


class _DeadlineStream(httpx.SyncByteStream):
    """A response body that raises httpx's ``ReadTimeout`` once its deadline passes; closing it closes the
    connection (httpx closes a response whose read failed, and a connection not read to the end is dropped)."""

    def __init__(self, stream: httpx.SyncByteStream, deadline: float, request: httpx.Request) -> None:
        self._stream = stream
        self._deadline = deadline
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout("timed out: the body did not arrive in time", request=self._request)
            yield chunk

    def close(self) -> None:
        self._stream.close()


_deep_checked = False


def tolerate_deep_arguments() -> None:
    """Make litellm hand over a tool call whose arguments nest deeper than ``json`` can parse, once per process.

    litellm (1.110) parses every tool call's argument text to spot OpenAI's ``multi_tool_use.parallel``
    pseudo-call (``handle_invalid_parallel_tool_calls``) and keeps the calls unchanged when the text is not JSON,
    but catches only ``JSONDecodeError``: text nested past ``json``'s recursion limit (about 1,000 levels) raises
    ``RecursionError``, and litellm then rejects the whole, well-formed chat completion as "Invalid response
    object".  The model made a malformed call, which is a miss (``malformed_call``, see
    :mod:`pytest_mcpeval.bounds`), not an error of the provider: so the function is wrapped to treat
    ``RecursionError`` as it treats text that is not JSON, in its module and in those that imported it by name.
    Another litellm without the function is left alone (its reply is then an error, as before)."""
    global _deep_checked
    if _deep_checked:
        return
    with _pool_lock:
        if _deep_checked:
            return
        _deep_checked = True
        try:
            from litellm.litellm_core_utils.llm_response_utils import convert_dict_to_response as home

            original = home.handle_invalid_parallel_tool_calls
        except (ImportError, AttributeError):
            return
        if getattr(original, "_mcpeval_tolerant", False):
            return

        def handle(tool_calls: Any) -> Any:
            try:
                return original(tool_calls)
            except RecursionError:
                return tool_calls

        handle._mcpeval_tolerant = True  # type: ignore[attr-defined]
        setattr(home, "handle_invalid_parallel_tool_calls", handle)  # noqa: B010 (mypy: not in the stubs)
        for name, module in sys.modules.copy().items():  # one C-level copy: another thread may import meanwhile
            if name.startswith("litellm.") and getattr(module, "handle_invalid_parallel_tool_calls", None) is original:
                setattr(module, "handle_invalid_parallel_tool_calls", handle)  # noqa: B010


def complete(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             retries: int = DEFAULT_RETRIES, timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> ModelReply:
    """One chat completion with ``tools``; raises :class:`ModelCallError` once retries are spent."""
    if model.target.startswith("llama-server/"):  # local/qwen2.5-coder-*: the llama.cpp route (models/llama)
        from pytest_mcpeval.models.llama import route
        return route.complete(model, messages, tools, complete, ModelCallError, retries=retries, timeout=timeout,
                              seed=seed)
    litellm = load_litellm()

    litellm.suppress_debug_info = True
    keep_alive_pool(litellm)
    tolerate_deep_arguments()
    retries = int(model.params.get("num_retries", retries))
    # a copy: the caller's conversation is hashed into cache keys, and providers' adapters may edit messages
    # (Anthropic: cache_control breakpoints on the catalog and system prompt, unless --mcp-prompt-cache=off)
    messages, tools = with_cache_breakpoints(model, copy.deepcopy(messages), tools)
    kwargs: dict[str, Any] = {"model": model.target, "messages": messages, "timeout": timeout,
                              **request_params(model), "num_retries": 0}
    if tools:
        kwargs["tools"] = tools
    # the deadline of each attempt: --mcp-timeout, or a timeout in seconds the user gave in mcp_model_params
    given = kwargs.get("timeout")
    deadline = float(given) if isinstance(given, int | float) and not isinstance(given, bool) and given > 0 else timeout
    rng = random.Random(seed)  # jitter is seeded per request: runs are reproducible
    attempt = 0
    started = time.perf_counter()
    while True:
        attempt += 1
        try:
            response = _attempt(litellm, kwargs, deadline)
            break
        except Exception as exc:  # litellm maps every provider failure onto its exception classes
            failure = classify(exc, model, deadline)
            if attempt > retries or not failure.retry:
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                raise ModelCallError(f"model {model.name} ({model.target}){tries}: {failure.message}") from None
            time.sleep(backoff(attempt, rng, _retry_after(exc, timeout)))
    latency = time.perf_counter() - started
    choices = getattr(response, "choices", None)
    message_obj = getattr(choices[0], "message", None) if choices else None
    if message_obj is None:  # the provider answered, with nothing to score: an error, never a miss
        what = "no choices" if not choices else "a choice without a message"
        raise ModelCallError(f"model {model.name} ({model.target}): the response has {what}: the provider "
                             "returned an empty completion (nothing to score)")
    calls = [
        RawCall(name=str(call.function.name or ""), arguments=call.function.arguments or "", id=_call_id(call),
                fields=_call_fields(call))
        for call in (getattr(message_obj, "tool_calls", None) or [])
    ]
    hidden = getattr(response, "_hidden_params", None) or {}
    finish, native = _finish_reasons(choices[0] if choices else None, message_obj)
    return ModelReply(calls=calls, content=message_obj.content, usage=read_usage(getattr(response, "usage", None)),
                      latency_s=latency, cost_usd=response_cost(model, hidden.get("response_cost")),
                      attempts=attempt, params_sent=params_sent(model), thinking_blocks=_thinking_blocks(message_obj),
                      finish_reason=finish, provider_finish_reason=native)


def _finish_reasons(choice: Any, message: Any) -> tuple[str | None, str | None]:
    """Why the reply ended: litellm's normalised ``finish_reason`` and the provider's own reason where litellm
    keeps it, else ``None``.  litellm maps each provider's reason onto OpenAI's (Anthropic ``max_tokens`` and
    Gemini ``MAX_TOKENS`` to ``length``, Gemini ``SAFETY`` and a blocked prompt and Anthropic ``refusal`` to
    ``content_filter``) and keeps the original only in places of its own: Gemini's candidate ``finishReason``
    as the choice's ``provider_specific_fields["native_finish_reason"]`` (not for a safety stop or a blocked
    prompt, which it answers itself), Anthropic's ``refusal`` / ``pause_turn`` as the message's
    ``provider_specific_fields["stop_reason"]``.  Gemini's ``MALFORMED_FUNCTION_CALL`` is ``stop`` normalised:
    only the native reason tells it from a reply that chose to call nothing."""
    finish = getattr(choice, "finish_reason", None)
    native: Any = None
    for owner in (choice, message):
        fields = getattr(owner, "provider_specific_fields", None)
        if isinstance(fields, dict):
            native = fields.get("native_finish_reason") or fields.get("stop_reason") or native
    finish_text = str(finish) if finish else None
    native_text = str(native) if native else None
    return finish_text, native_text if native_text != finish_text else None
