"""The local llama.cpp route's runtime (models/llama): the GGUF header, the context that follows the catalog, a user's
own GGUF file, and a server that dies while starting.

The runs here need the pinned runtime (``xllamacpp``, extra ``[chat]``, which ``make test`` installs) but no real
weights: a GGUF file of a few hundred bytes carries the header the route reads, and a server that dies is a fake
``xllamacpp`` on the server process's ``PYTHONPATH`` killing itself with SIGILL, as the prebuilt llama-server this
route used to run did on a processor without AMX.
"""

from __future__ import annotations

import json
import platform
import signal
import struct
from pathlib import Path

import pytest
from conftest import read_report, run

from pytest_mcpeval.models.llama import LlamaError, route_of, served_target
from pytest_mcpeval.models.llama import weights as weights_mod
from pytest_mcpeval.models.llama.gguf import ModelShape, metadata, shape
from pytest_mcpeval.models.llama.server import exit_reason
from pytest_mcpeval.models.llama.sizing import MIN_CONTEXT, context, wanted

TEMPLATE_WITH_TOOLS = "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}{{ messages }}"


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, context_length: int = 32768, template: str | None = TEMPLATE_WITH_TOOLS,
               block_count: int = 24, heads: int = 14, kv_heads: int = 2, embedding: int = 896) -> Path:
    """A GGUF header as llama.cpp writes it (version 3), with the values the route reads, a vocabulary array it
    must skip, and no tensors."""
    pairs: list[bytes] = [
        _string("general.architecture") + struct.pack("<I", 8) + _string("qwen2"),
        _string("qwen2.context_length") + struct.pack("<II", 4, context_length),
        _string("qwen2.block_count") + struct.pack("<II", 4, block_count),
        _string("qwen2.embedding_length") + struct.pack("<II", 4, embedding),
        _string("qwen2.attention.head_count") + struct.pack("<II", 4, heads),
        _string("qwen2.attention.head_count_kv") + struct.pack("<II", 4, kv_heads),
        _string("qwen2.rope.freq_base") + struct.pack("<If", 6, 1e6),
        _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + b"".join(map(_string, ["a", "b", "<|x|>"])),
        _string("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, 3) + struct.pack("<3i", 1, 1, 3),
    ]
    if template is not None:
        pairs.append(_string("tokenizer.chat_template") + struct.pack("<I", 8) + _string(template))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + b"".join(pairs))
    return path


# -- the GGUF header ----------------------------------------------------------------------------------------------

def test_the_header_gives_the_context_and_the_bytes_a_token_costs(tmp_path: Path) -> None:
    found = shape(write_gguf(tmp_path / "m.gguf"))
    # Qwen2.5-Coder-0.5B's shape: 24 blocks x 2 KV heads x (64 + 64) dims (896 / 14) x 2 bytes (f16)
    assert found == ModelShape("qwen2", 32768, 24 * 2 * (64 + 64) * 2, True)
    assert metadata(tmp_path / "m.gguf")["tokenizer.ggml.tokens"] == 3  # an array: its length, skipped
    assert shape(write_gguf(tmp_path / "n.gguf", template="{{ messages }}")).template_has_tools is False
    assert shape(write_gguf(tmp_path / "o.gguf", template=None)).template_has_tools is None


@pytest.mark.parametrize(("data", "message"), [
    (b"PK\x03\x04", "is not a GGUF file (it does not start with GGUF)"),
    (b"GGUF\x03\x00", "the GGUF header is cut short or not one llama.cpp reads"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 5) + _string("general.architecture"),
     "the GGUF header is cut short or not one llama.cpp reads"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 60),
     "the GGUF header is cut short or not one llama.cpp reads"),  # a string length nobody could hold
])
def test_a_file_that_is_not_gguf_is_one_error(tmp_path: Path, data: bytes, message: str) -> None:
    (tmp_path / "x.gguf").write_bytes(data)
    with pytest.raises(LlamaError) as raised:
        shape(tmp_path / "x.gguf")
    assert str(raised.value) == f"{tmp_path / 'x.gguf'}: {message}" or str(raised.value).endswith(message)


def test_an_array_longer_than_the_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("tokenizer.ggml.tokens")
                     + struct.pack("<IIQ", 9, 8, 1 << 60))  # 2**60 strings promised, none there
    with pytest.raises(LlamaError, match=r"the GGUF header is cut short or not one llama\.cpp reads"):
        metadata(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("x") + struct.pack("<IIQ", 9, 4, 1 << 60))
    with pytest.raises(LlamaError, match="the GGUF header is cut short"):
        metadata(path)


def test_a_value_per_layer_counts_its_largest(tmp_path: Path) -> None:
    """Hybrid models give ``head_count_kv`` per layer: the largest bounds the cache (not the array's length)."""
    path = write_gguf(tmp_path / "m.gguf", block_count=4)
    data = path.read_bytes().replace(
        _string("qwen2.attention.head_count_kv") + struct.pack("<II", 4, 2),
        _string("qwen2.attention.head_count_kv") + struct.pack("<IIQ", 9, 4, 4) + struct.pack("<4I", 0, 2, 0, 2))
    path.write_bytes(data)
    assert shape(path).kv_bytes_per_token == 4 * 2 * (64 + 64) * 2


def test_a_header_without_the_attention_shape_names_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("general.architecture")
                     + struct.pack("<I", 8) + _string("mamba"))
    with pytest.raises(LlamaError, match=r"its GGUF header has no usable mamba\.attention\.head_count \(architecture"):
        shape(path)


# -- the context follows the catalog -------------------------------------------------------------------------------

QWEN_05B = ModelShape("qwen2", 32768, 12288, True)


def test_the_context_is_sized_from_the_catalog() -> None:
    # hand-worked: the 46-tool catalog of 16,658 tokens: ceil(16,658 x 1.2) = 19,990, + 3,072 + 512 = 23,574 tokens,
    # 24,576 rounded up to 1,024; 24,576 x 12,288 bytes = 288 MiB of key/value cache, well within 8 GiB / 2
    assert wanted(16_658, 512) == 23_574
    size = context(16_658, 512, QWEN_05B, slots=1, memory=8 << 30)
    assert (size.per_slot, size.limit) == (24_576, 32_768)
    # a small catalog still gets MIN_CONTEXT: a flow's turns need room
    assert context(300, 512, QWEN_05B, slots=1, memory=8 << 30).per_slot == MIN_CONTEXT == 8192


def test_memory_bounds_the_context() -> None:
    # 1 GiB available: half of it for 2 slots at 12,288 bytes a token = 21,845 tokens, 21,504 in steps of 1,024
    size = context(1_000, 512, QWEN_05B, slots=2, memory=1 << 30)
    assert size.limit == 21_504 and "half of the 1.0 GiB of memory available" in size.limited_by
    with pytest.raises(LlamaError, match=r"more than the 21,504 tokens a slot that half of the 1\.0 GiB.*or free "
                                         r"memory, or serve the model where there is more"):
        context(16_658, 512, QWEN_05B, slots=2, memory=1 << 30)


def test_a_catalog_nobody_could_count_gets_all_the_context_there_is() -> None:
    """An mcp_server fixture's tools are known only per item: the server is sized to its limit, not to 8,192."""
    assert context(None, 512, QWEN_05B, slots=1, memory=64 << 30).per_slot == 32_768
    assert context(None, 512, QWEN_05B, slots=2, memory=1 << 30).per_slot == 21_504


def test_a_catalog_longer_than_the_model_is_refused_with_what_to_do() -> None:
    with pytest.raises(LlamaError) as raised:
        context(30_000, 512, QWEN_05B, slots=1, memory=64 << 30)
    assert str(raised.value) == (
        "the model cannot hold the catalog: a request takes about 30,000 tokens of tools (o200k count), 39,584 with "
        "room for the conversation and 512 tokens of reply, more than the 32,768 tokens it was trained for; show the "
        "cases fewer tools (the file's `tools:` or `distractors:`), or serve a model with a longer context "
        "(docs/chat-model.md)")


# -- exit statuses -------------------------------------------------------------------------------------------------

def test_a_signal_is_named_with_what_it_means() -> None:
    needs = " (its x86-64 CPU build needs AVX2)" if platform.machine() == "x86_64" else ""
    lacks = f"this build uses CPU instructions this processor lacks{needs}"
    assert exit_reason(-signal.SIGILL) == ("died with SIGILL", lacks)
    assert exit_reason(-signal.SIGKILL)[1].startswith("the kernel's out-of-memory killer")
    assert exit_reason(-signal.SIGSEGV) == ("crashed with SIGSEGV", "")
    assert exit_reason(3) == ("exited with status 3", "")


# -- a user's own GGUF file ----------------------------------------------------------------------------------------

def test_a_users_gguf_file_is_a_route_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    target = served_target("local/gguf:models/coder.gguf")
    assert target == f"llama-server/gguf:{tmp_path / 'models' / 'coder.gguf'}"
    route = route_of(target)
    assert route.weights is None and route.path == str(tmp_path / "models" / "coder.gguf")
    assert route.name.startswith("gguf-coder-") and route.label == f"local/gguf:{route.path}"
    assert route_of(served_target("local/gguf:models/other/coder.gguf")).name != route.name  # one server per file
    assert served_target("local/gguf:") == "local/gguf:"  # no path: not this route (litellm says what it is not)


# -- runs ----------------------------------------------------------------------------------------------------------

@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own, the pinned runtime checked in it; skipped, with why, where the runtime is not
    installed.  Returns the cache directory."""
    monkeypatch.setenv("PYTEST_MCPEVAL_CHAT_DIR", str(tmp_path / "chat"))
    route = route_of(served_target("local/gguf:x.gguf"))
    try:
        weights_mod.runtime_library(route)
    except LlamaError as exc:  # make test installs [chat], so CI runs these; a bare `pip install -e .` cannot
        pytest.skip(f"the llama.cpp runtime is not installed ({exc})")
    return tmp_path / "chat"


def _catalog(pytester: pytest.Pytester, tools: int) -> None:
    listed = [{"name": f"tool_{i}", "description": f"Does thing number {i} to the issue tracker, carefully.",
               "inputSchema": {"type": "object", "properties": {"issue_key": {"type": "string"}}}}
              for i in range(tools)]
    (pytester.path / "tools.json").write_text(json.dumps(listed))
    cases = "".join(f"  - id: case-{i}\n    input: do thing {i}\n    expect: [{{tool: tool_{i}}}]\n" for i in range(3))
    (pytester.path / "bench.mcpeval.yaml").write_text(f"server: {{tools_file: tools.json}}\ncases:\n{cases}")


def test_a_catalog_that_cannot_fit_is_said_once_before_any_call(pytester: pytest.Pytester, runtime: Path) -> None:
    write_gguf(pytester.path / "small.gguf", context_length=4096)
    _catalog(pytester, 40)  # ~1,000 tokens of tools: 4,096 cannot hold them with room for the conversation
    result = run(pytester, "--mcp-models=local/gguf:small.gguf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors[0] == "ERROR: pre-flight check failed, no model was called (--mcp-no-preflight skips the check):"
    assert len(errors) == 2 and errors[1].startswith(
        "  model local/gguf:small.gguf: the model cannot hold the catalog: a request takes about ")
    assert "more than the 4,096 tokens it was trained for; show the cases fewer tools" in errors[1]
    assert (runtime / "runtime").is_dir()  # the cache the run used
    assert not list(runtime.glob("servers/*.log"))  # nothing was started


FAKE_RUNTIME = """
import os, resource, signal
with open(os.environ["MCPEVAL_TEST_STARTS"], "a") as out:
    out.write("start\\n")
print("AMX is not ready to be used!", flush=True)  # what the old prebuilt llama-server printed before dying
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.kill(os.getpid(), signal.SIGILL)
"""


@pytest.fixture
def dying(pytester: pytest.Pytester, runtime: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A server process that dies with SIGILL as it loads the runtime; returns the file each start writes a line to."""
    fake = pytester.path / "fake-site" / "xllamacpp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_RUNTIME)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))  # the server process imports it; this one keeps the real one
    monkeypatch.setenv("MCPEVAL_TEST_STARTS", str(pytester.path / "starts.txt"))
    write_gguf(pytester.path / "model.gguf")
    _catalog(pytester, 3)
    return pytester.path / "starts.txt"


SIGILL_LINE = (
    "model local/gguf:model.gguf: llama.cpp's server (xllamacpp 2026.10.11549) died with SIGILL while loading "
    "model.gguf: this build uses CPU instructions this processor lacks (its x86-64 CPU build needs AVX2); "
    "serve the model with a llama.cpp of your own and run against it (docs/chat-model.md, 'Your own server'); "
    "its log: ")


def test_a_server_dying_at_start_stops_the_run_in_preflight(pytester: pytest.Pytester, dying: Path) -> None:
    result = run(pytester, "--mcp-models=local/gguf:model.gguf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors[0] == "ERROR: pre-flight check failed, no model was called (--mcp-no-preflight skips the check):"
    assert len(errors) == 2 and errors[1].startswith("  " + SIGILL_LINE), errors
    assert "AMX" not in result.stderr.str()  # the dying binary's last words are not the message
    assert dying.read_text() == "start\n"


def test_without_preflight_the_server_is_started_once_and_every_case_says_why(pytester: pytest.Pytester,
                                                                              dying: Path) -> None:
    result = run(pytester, "--mcp-models=local/gguf:model.gguf", "--mcp-no-preflight", "--mcp-report=report.json")
    assert dying.read_text() == "start\n"  # one start for the run, not one per case
    report = read_report(pytester)
    assert [c["error"].startswith(SIGILL_LINE) for c in report["cases"]] == [True, True, True]
    assert all(c["passed"] is None for c in report["cases"])  # an infrastructure failure, never a model's miss
    assert result.ret != pytest.ExitCode.OK
    # the summary says it once, naming the other cases (pytest's own section of each case shows it too)
    lines = result.stdout.lines
    at = lines.index("errors, excluded from the metrics (3):")
    assert lines[at + 1].startswith("  bench.mcpeval.yaml::case-0[local/gguf:model.gguf] and 2 more (case-1[local/gguf:"
                                    "model.gguf], case-2[local/gguf:model.gguf]): " + SIGILL_LINE)
    summary = result.stdout.str().split("mcpeval summary", 1)[1].split("short test summary info", 1)[0]
    assert summary.count("died with SIGILL") == 1  # the grouped line


def test_under_tool_search_the_context_is_sized_for_what_the_searches_load(pytester: pytest.Pytester,
                                                                          dying: Path) -> None:
    write_gguf(pytester.path / "model.gguf", context_length=4096)  # too small for the 40 tools, not for a search's 2
    _catalog(pytester, 40)
    whole = run(pytester, "--mcp-models=local/gguf:model.gguf")
    assert "the model cannot hold the catalog" in whole.stderr.str()
    assert not dying.exists()  # said before any start
    # under search the model is shown the search tool and at most max_searches x top_k (3 x 2) tools, never the 40:
    # the context fits, so the pre-flight check starts the server (which dies here, as the fake runtime does)
    searched = run(pytester, "--mcp-models=local/gguf:model.gguf+search", "--mcp-tool-search=bm25:2")
    assert searched.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot hold the catalog" not in searched.stderr.str()
    assert SIGILL_LINE.replace("local/gguf:model.gguf", "local/gguf:model.gguf+search") in searched.stderr.str()
    assert dying.read_text() == "start\n"
