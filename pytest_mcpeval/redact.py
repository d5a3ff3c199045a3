"""Secrets never reach what the plugin writes or prints: masked by value, not only by key name.

A :class:`Redactor` knows the secret *values* of the run — every environment variable whose name looks
secret (``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*AUTH*``, ...) and every model parameter
whose name does (``api_key``, ``extra_headers``, ``extra_body.session_auth``, at any depth) — and the
*shapes* of secrets in text: credentials in URLs (``https://user:pass@host``), query parameters named
like a secret (``?token=...``, ``&api_key=...``, ``&sig=...``), ``Bearer`` tokens and well-known key
formats (``sk-...``, ``ghp_...``, ``github_pat_...``, ``xox?-...``, ``AKIA...``).  Each is replaced by
:data:`MASK`.  It is applied where data leaves the plugin: each case's results as its item reports them
(on the xdist worker that ran it, so no secret crosses the channel), the rest of the report at the session's
end (and so the baseline, the terminal summary, the Markdown and the HTML page), the failure text of every
case item (terminal, junit XML) and collection errors.  Values shorter than :data:`MIN_SECRET` characters
are not masked by value (``1`` or ``true`` would mask half the report); their names still mask them as
parameters.

The benchmark files add their servers' secrets as they are collected (:meth:`Redactor.add`, from
:func:`command_secrets`, :func:`url_secrets` and the servers' secret-named ``env:`` entries and ``headers:``), and
so does an ``mcp_server`` fixture's URL or command as it is connected: every process that collects or connects
learns them, and an xdist worker hands what it learnt to the controller (``workeroutput``), never to a file.
A name looks secret whatever its separators and case (:func:`secret_name`: ``x-api-key``, ``X-Auth-Token``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pytest_mcpeval.text import utf8_safe

MASK = "REDACTED"  # no Markdown or HTML meaning: it is also applied to rendered Markdown
MIN_SECRET = 8
# The one rule of secret names (secret_name), read on a name whose separators are "_" and whose camelCase words
# are split (``sharedAccessKey`` -> ``shared_Access_Key``).  A word rule ((^|_)...($|_)) where the letters occur in
# innocent words: ``pin`` (not ``pinned``, ``spinner``), ``otp`` (not ``hotpot``), ``jwt``, ``cvv``.
SECRET_NAME = re.compile(
    r"(api_?key|apikey|(^|_)key($|_)|token|secret|passw|passphrase|passcode|(^|_)pass($|_)|pwd|(^|_)auth"
    r"|authorization|credential|cookie|session|signature|(^|_)sig($|_)|private|bearer|(^|_)pat($|_)|headers?($|_)"
    r"|dsn|(^|_)pem$|(^|_)cert($|_)"
    r"|(^|_)pins?($|_)|pin_?codes?|(^|_)[th]?otps?($|_)|(^|_)(mfa|2fa|tfa|two_factor)_codes?($|_)"
    r"|(^|_)(recovery|backup)_codes?($|_)|(^|_)(jwt|hmac|csrf|xsrf)($|_)|mnemonic|seed_phrase"
    r"|(^|_)conn(ection)?_?str(ing)?($|_)|(^|_)cvc2?($|_)|(^|_)cvv2?($|_))",
    re.IGNORECASE,
)
# What a secret's name followed by one of these words names is about the secret, not the secret: how it is made
# or checked, whether one is needed, how long it lives (``signature_version: v4``, ``signature_method:
# HMAC-SHA256``, ``otp_enabled``, ``token_type: Bearer``, ``pin_length``).  Masking such a value by name would
# also teach the redactor the value, which then masks ``HMAC-SHA256`` everywhere in the report.
_ABOUT_A_SECRET = re.compile(
    r"(?i)_(version|method|type|algorithm|alg|format|enabled|required|length|len|size|count|expiry|expires"
    r"|expires_(in|at)|ttl|lifetime|name|url|uri|endpoint|path|file|location)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SHAPES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # userinfo in a URL: scheme://user:password@host (the user name alone is kept)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@'\"<>]*):[^/\s@'\"<>]+@"), rf"\1:{MASK}@"),
    # query or fragment parameters named like a secret (query_secret: the one rule, with sig and code)
    (re.compile(r"([?&#;]([\w.-]+)=)[^&#\s'\"<>]+"),
     lambda m: f"{m.group(1)}{MASK}" if query_secret(m.group(2)) else m.group(0)),
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {MASK}"),
    (re.compile(r"\b(sk-(?:proj-|ant-)?|ghp_|gho_|ghs_|ghu_|github_pat_|xox[abprs]-|glpat-|hf_)[A-Za-z0-9_-]{12,}"),
     rf"\1{MASK}"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\b([rsp]k_(?:live|test)_)[A-Za-z0-9]{8,}"), rf"\1{MASK}"),  # Stripe
    # a key as the user part of a URL (a Sentry-style DSN: https://<key>@host/1)
    (re.compile(r"(?i)\b(https?://)[A-Za-z0-9]{16,}@"), rf"\1{MASK}@"),
]
# A superset of what every pattern of _SHAPES needs in a text: a text without any of these matches none of
# them, and most strings of a report (ids, tool names, paths, short answers) have none: they cost one search.
_MAYBE_SHAPED = re.compile(r"(?i)://|[?&#;][\w.-]*=|\b(?:bearer|basic|token)\s|sk-|gh[opsu]_|github_pat_"
                           r"|xox[abprs]-|glpat-|hf_|akia|k_(?:live|test)_")
# The same superset for JSON text (Redactor.data's shortcut): JSON writes a tab or a newline as an escape, so
# "whitespace" may be one, and an escape's letter can stand before a word, so no word boundary is required.
_MAYBE_SHAPED_JSON = re.compile(_MAYBE_SHAPED.pattern.replace(r"\b(?:bearer|basic|token)\s",
                                                              r"(?:bearer|basic|token)(?:\s|\\[bfnrt]|\\u00)"))
# _MAYBE_SHAPED_JSON split for ASCII text (most JSON of a report), where a case-blind match is a match on the text in
# lower case (maybe_shaped_json): literals, and regexes that start with a literal, which re finds with a fast scan
# where an alternation is tried at every character.  On a case's 800 characters: the case-blind alternation 52 us,
# two alternations on the lower case 17 us, these 8 us
_LITERALS = ("://", "sk-", "github_pat_", "glpat-", "hf_", "akia")
_PREFIXED_SHAPES = tuple((prefix, re.compile(pattern)) for prefix, pattern in (
    ("gh", r"gh[opsu]_"), ("xox", r"xox[abprs]-"), ("k_", r"k_(?:live|test)_"),
    ("bearer", r"bearer(?:\s|\\[bfnrt]|\\u00)"), ("basic", r"basic(?:\s|\\[bfnrt]|\\u00)"),
    ("token", r"token(?:\s|\\[bfnrt]|\\u00)")))
_QUERY_PARAM = re.compile(r"[?&#;][\w.-]*=")
_CACHED = 256  # strings up to this length are remembered: a report repeats its file names, tools and models
# environment variables whose names look secret but hold none (the working directory, sockets, sessions)
NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "SESSION_MANAGER", "DBUS_SESSION_BUS_ADDRESS",
                            "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_DESKTOP",
                            "GPG_AGENT_INFO", "KRB5CCNAME"})
T = TypeVar("T")


_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_COUNT_OF_TOKENS = re.compile(r"(?i)(^|_)tokens($|_)")
# a path segment of a URL that looks like a token: 20 or more URL-safe characters, letters and digits both
_TOKEN_SEGMENT = re.compile(r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_NAME_VALUE = re.compile(r"(?s)^(-{0,2})([A-Za-z_][\w.-]*)=(.+)$")  # --api-key=VALUE, API_KEY=VALUE


def secret_name(name: str) -> bool:
    """A parameter, header, variable or flag name that looks secret, whatever its separators and case:
    ``x-api-key``, ``X-Auth-Token``, ``session.auth``, ``apiKey`` and ``sharedAccessKey`` as much as ``api_key``;
    ``passcode``, ``pin``, ``otp``, ``private_key``, ``signature`` and the other names of :data:`SECRET_NAME`.
    ``tokens`` as a word is a count, not a credential (``max_tokens``, ``thinking.budget_tokens``), and a name
    that ends in a word about a secret names no secret (``signature_version``, ``otp_enabled``:
    :data:`_ABOUT_A_SECRET`).  The one rule of the plugin: parameters, headers, environment variables, flags,
    ``env:`` entries, query parameters of a URL."""
    words = _SEPARATORS.sub("_", _CAMEL.sub("_", name)).strip("_")
    if _ABOUT_A_SECRET.search(words):
        return False
    return bool(SECRET_NAME.search(_COUNT_OF_TOKENS.sub(r"\1count\2", words)))


def query_secret(name: str) -> bool:
    """A URL's query or fragment parameter whose value is secret: a :func:`secret_name`, or one holding ``sig``
    (``X-Amz-Signature``, ``sig``) or ``code`` (an OAuth authorization code)."""
    return secret_name(name) or re.search(r"(?i)sig|code", name) is not None


def url_secrets(url: str) -> list[str]:
    """The parts of ``url`` that may be secret: the password of its user part (or a user part that looks like
    a token, a DSN's key), the values of query parameters named like a secret, and path segments that look
    like a token (:data:`_TOKEN_SEGMENT`) or, holding a digit, follow a segment named like a secret
    (``/token/t0k3n``; not ``/auth/callback``, whose word would be masked everywhere)."""
    from urllib.parse import parse_qsl, quote, unquote, urlsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # not a URL after all (an unclosed IPv6 bracket, a bad port)
        return []
    found: list[str] = []
    if password:
        found += [password, unquote(password)]
    if user and _TOKEN_SEGMENT.fullmatch(user):
        found.append(user)
    for query in (parts.query, parts.fragment):
        for name, value in parse_qsl(query):
            if query_secret(name):
                found += [value, quote(value, safe="")]  # as it was written, and decoded
    segments = [unquote(s) for s in parts.path.split("/")]
    for before, segment in zip(["", *segments], segments, strict=False):
        if _TOKEN_SEGMENT.fullmatch(segment) or (before and secret_name(before) and re.search(r"\d", segment)):
            found.append(segment)
    return found


def command_secrets(args: Iterable[str]) -> list[str]:
    """The values a command line passes under a secret-looking name: ``--api-key=VALUE`` and ``--api-key VALUE``
    (a long flag: a short one such as ``-k`` says nothing of what follows), ``API_KEY=VALUE`` (as ``env`` and
    ``docker -e`` take it), and the secret parts of every URL among them (:func:`url_secrets`)."""
    found: list[str] = []
    flag_before = False
    for arg in args:
        if flag_before and not arg.startswith("-"):
            found.append(arg)
        flag_before = False
        named = _NAME_VALUE.match(arg)
        if named and named.group(1) != "-" and secret_name(named.group(2)):
            found.append(named.group(3))
        elif arg.startswith("--") and "=" not in arg and secret_name(arg[2:]):
            flag_before = True
        for url in _URL.findall(arg):
            found += url_secrets(url)
    return found


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The values of secret-looking headers (``Authorization``, ``X-Api-Key``, ``Cookie``), whole and, after a
    scheme (``Bearer TOKEN``), the credential alone, which a message may show without its scheme."""
    found: list[str] = []
    for name, value in headers.items():
        if secret_name(name):
            found += [value, value.split()[-1]] if value.split() else [value]
    return found


def environment_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of the secret-named variables of a server's ``env:`` (``DB_PASSWORD``, ``GITHUB_TOKEN``)."""
    return [value for name, value in env.items() if secret_name(name) and name not in NOT_SECRET_ENV]


def secret_values(params: Mapping[str, Any], under_secret: bool = False) -> Iterable[str]:
    """The string values of ``params`` held under a secret-looking name, at any depth."""
    for key, value in params.items():
        secret = under_secret or secret_name(str(key))
        if isinstance(value, Mapping):
            yield from secret_values(value, secret)
        elif isinstance(value, list | tuple):
            for element in value:
                if isinstance(element, Mapping):
                    yield from secret_values(element, secret)
                elif secret and isinstance(element, str):
                    yield element
        elif secret and isinstance(value, str):
            yield value


def mask_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with every value under a secret-looking name masked (for the report's ``run.models``)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if secret_name(str(key)):
            out[key] = MASK
        elif isinstance(value, Mapping):
            out[key] = mask_params(value)
        else:
            out[key] = value
    return out


class Redactor:
    def __init__(self, values: Iterable[str] = ()) -> None:
        self.learned: list[str] = []  # what add() taught it (the servers' secrets): what a worker hands on
        self._compile({v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET})

    def _compile(self, found: set[str]) -> None:
        # longest first: a secret that contains another is masked whole
        self.values = sorted(found, key=lambda v: (-len(v), v))
        self._values = re.compile("|".join(re.escape(v) for v in self.values)) if self.values else None
        in_json = {json.dumps(v, ensure_ascii=False)[1:-1] for v in self.values} | set(self.values)
        self._values_json = re.compile("|".join(re.escape(v) for v in sorted(in_json))) if in_json else None
        self._seen: dict[str, str] = {}  # a new memo (not cleared: a thread masking now fills the old one)

    def add(self, values: Iterable[str]) -> list[str]:
        """Learn more secret values (a benchmark file's server, a fixture's URL); the new ones, in order."""
        new = sorted({v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET} - set(self.values))
        if new:
            self._compile(set(self.values) | set(new))
            self.learned += new
        return new

    @classmethod
    def for_run(cls, params: Iterable[Mapping[str, Any]] = (), environ: Mapping[str, str] | None = None) -> Redactor:
        """The secrets of this run: secret-named environment variables and model parameters.

        An environment value that is an existing path (a socket, a directory) is not taken for a secret."""
        env = os.environ if environ is None else environ
        values = [value for name, value in env.items()
                  if secret_name(name) and name not in NOT_SECRET_ENV and not os.path.exists(value)]
        for p in params:
            values.extend(secret_values(p))
        return cls(values)

    def text(self, text: str) -> str:
        short = len(text) <= _CACHED
        seen, values = self._seen, self._values  # as one: add() may replace both meanwhile (another thread)
        if short and text in seen:
            return seen[text]
        out = text
        if values is not None:
            out = values.sub(MASK, out)
        if _MAYBE_SHAPED.search(out):
            for pattern, replacement in _SHAPES:
                out = pattern.sub(replacement, out)
        if short:
            if len(seen) > 100_000:  # bounded: a run of unique short strings does not grow it for ever
                seen.clear()
            seen[text] = out
        return out

    def data(self, value: T) -> T:
        """Builtin data (dicts, lists, strings) with every string redacted, dict keys too: a copy, or ``value``
        itself when its JSON text holds nothing that could be masked (one search in C instead of a walk)."""
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return self._walk(value)  # type: ignore[no-any-return]
        return self._walk(value) if self._may_hold_secret(text) else value

    def _may_hold_secret(self, text: str) -> bool:
        """Whether a value's JSON text holds anything that could be masked (one search in C instead of a walk)."""
        return maybe_shaped_json(text) or (self._values_json is not None and self._values_json.search(text) is not None)

    def safe_data(self, value: T) -> T:
        """:meth:`data`, with every lone surrogate replaced by U+FFFD as well (:func:`~pytest_mcpeval.text.utf8_safe`):
        what a case result is made as it comes out of its strategy when no hook is to see it first (run/item.py).  One
        JSON encoding of it tells both (two, one each, cost a case 17 us more)."""
        try:
            text = json.dumps(value, ensure_ascii=False)
            if not text.isascii():
                text.encode("utf-8")  # a lone surrogate cannot be encoded
        except UnicodeEncodeError:
            return self.data(utf8_safe(value))  # type: ignore[no-any-return]
        except (TypeError, ValueError, RecursionError):
            return self._walk(utf8_safe(value))  # type: ignore[no-any-return]
        return self._walk(value) if self._may_hold_secret(text) else value

    def value_text(self, text: str) -> str:
        """``text`` with the secret values masked, and nothing else: no shape rule (see :meth:`data_by_value`)."""
        values = self._values
        return values.sub(MASK, text) if values is not None and text else text

    def data_by_value(self, value: T) -> T:
        """As :meth:`data`, masking the run's secret values only, not by shape: what the response cache stores.
        A shape rule can match ordinary text (``basic information``, ``token counting``), and a cached reply must
        replay as it was sent and scored (its arguments, a signed thinking block, the next turn's cache key)."""
        if self._values_json is None:
            return value
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return self._walk(value, self.value_text)  # type: ignore[no-any-return]
        if self._values_json.search(text) is None:
            return value
        return self._walk(value, self.value_text)  # type: ignore[no-any-return]

    def _walk(self, value: Any, mask: Callable[[str], str] | None = None) -> Any:
        """The copy :meth:`data` returns, built iteratively: a model's arguments or a server's answer may nest
        deeper than Python's stack.  Children are visited in order, so of two keys that mask to the same one
        the later wins, as in a dict display; a tuple is built as a list and frozen once its items are done."""
        mask = mask or self.text
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
        frozen: list[tuple[list[Any], Any, Any]] = []  # (items, parent, key) of every tuple, outermost first
        while stack:
            item, parent, key = stack.pop()
            if isinstance(item, str):
                parent[key] = mask(item) if item else item
            elif isinstance(item, dict):  # keys too: a model may put a secret in an argument's name
                out: dict[Any, Any] = {}
                parent[key] = out
                children = []
                for k, v in item.items():
                    new_key = mask(k) if isinstance(k, str) else k
                    out[new_key] = None
                    children.append((v, out, new_key))
                stack.extend(reversed(children))
            elif isinstance(item, list | tuple):
                items: list[Any] = [None] * len(item)
                parent[key] = items
                if isinstance(item, tuple):
                    frozen.append((items, parent, key))
                stack.extend((v, items, i) for i, v in reversed(list(enumerate(item))))
            else:
                parent[key] = item
        for items, parent, key in reversed(frozen):  # innermost first: an outer tuple holds the inner one
            parent[key] = tuple(items)
        return root[0]


def maybe_shaped_json(text: str) -> bool:
    """``_MAYBE_SHAPED_JSON.search(text)`` as a truth value, five times faster on ASCII text."""
    if not text.isascii():  # Unicode case folding (the Kelvin sign is a k) is left to the regex
        return _MAYBE_SHAPED_JSON.search(text) is not None
    low = text.lower()
    if any(literal in low for literal in _LITERALS):
        return True
    if any(prefix in low and shape.search(low) is not None for prefix, shape in _PREFIXED_SHAPES):
        return True
    return "=" in text and _QUERY_PARAM.search(text) is not None


_current = Redactor()


def use(redactor: Redactor) -> Redactor:
    """Make ``redactor`` this process's (Settings does it at configure): for code that cuts text it got
    from elsewhere (a server's stderr), which must mask before it cuts, or a cut secret escapes the mask."""
    global _current
    _current = redactor
    return redactor


def masked(text: str) -> str:
    """``text`` through this process's redactor (see :func:`use`)."""
    return _current.text(text)


def current() -> Redactor:
    """This process's redactor (see :func:`use`): for what knows no settings (the response cache, servers)."""
    return _current
