"""Hand-edited or broken files a later run reads (issue 19, items 6, 8 and 12): the baseline and the response
cache's entries.

A baseline is validated whole at configure time, like a benchmark file: whatever is wrong in it is one usage
line naming the file and the JSON path of the field, exit status 4, before any model call (the scripted
server sees no request).  A valid baseline that pairs with nothing in the run fails the drop gate instead of
passing it vacuously.  A cache entry that does not validate, or that is not a regular file, is absent: called
again and overwritten, or under ``--mcp-record=none`` an error naming the file; the summary says which.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}}]
IDS = ["a", "b", "c"]
BENCH = "server: {tools_file: tools.json}\ncases:\n" + "".join(
    f"  - id: {i}\n    input: question {i}\n    expect: [{{tool: get_me}}]\n" for i in IDS)
OK = {"tool_calls": [{"name": "get_me", "arguments": {}}]}


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", OK)
    return pytester


def baseline(model: str = "fake") -> dict[str, Any]:
    """What --mcp-save-baseline writes for this project (test_a_baseline_for_other_models_fails_the_drop_gate
    compares a real one)."""
    case = {"file": "bench.mcpeval.yaml", "model": model, "repeat": 0, "correct": True, "passed": True,
            "expected_label": "get_me", "called_label": "get_me", "error": None}
    return {
        "version": 1, "kind": "pytest-mcpeval-baseline", "plugin_version": "0",
        "models": {model: {"accuracy": 1.0, "macro_f1": 1.0, "pass_rate": 1.0, "tools": {"get_me": 1.0},
                           "flow_pass_rate": None, "coverage": None}},
        "cases": [{**case, "id": i} for i in IDS],
        "catalogs": {"d1": {"server": "tools_file: tools.json", "tokens": 38,
                            "tools": {"get_me": {"hash": "h", "description": "Who am I", "tokens": 38}}}},
    }


def compare(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0.02",
               "--mcp-report=report.json", "--mcp-markdown=pr.md", "--mcp-html=report.html",
               "--junitxml=junit.xml", *args)


def test_the_hand_written_baseline_is_valid(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """So that each variant below fails for what was changed in it, and nothing else."""
    (project.path / "base.json").write_text(json.dumps(baseline()))
    result = compare(project)
    result.stdout.fnmatch_lines(["compared with *base.json: 0 cases flipped, 0 only in the baseline, 0 only in "
                                 "this run"])
    assert result.ret == 0 and len(model_server.requests) == 3


def _data(change: Any) -> Any:
    """An edit of the baseline's text made by ``change`` on its data."""
    def edit(text: str) -> str:
        data = json.loads(text)
        change(data)
        return json.dumps(data)
    return edit


def _set(path: list[str | int], value: Any) -> Any:
    def change(data: Any) -> None:
        node = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    return _data(change)


HOSTILE_BASELINES = {
    # id: (an edit of the baseline's text; what the usage line says after "baseline PATH: ")
    "repeat-abc": (_set(["cases", 0, "repeat"], "abc"), 'cases[0].repeat: expected an integer, found "abc"'),
    "repeat-1e400": (lambda text: text.replace('"repeat": 0', '"repeat": 1e400', 1),
                     "cases[0].repeat: expected an integer, found a number out of range (inf)"),
    "accuracy-1e400": (lambda text: text.replace('"accuracy": 1.0', '"accuracy": 1e400'),
                       "models.fake.accuracy: expected a finite number, found a number out of range (inf)"),
    "catalogs-oops": (_set(["catalogs"], "oops"), 'catalogs: expected an object, found "oops"'),
    "correct-no": (_set(["cases", 2, "correct"], "no"), 'cases[2].correct: expected true or false, found "no"'),
    "no-model": (_data(lambda data: data["cases"][1].pop("model")), "cases[1].model: this field is required"),
    "models-a-string": (_set(["models"], "abc"), 'models: expected an object, found "abc"'),
    "model-a-string": (_set(["models", "fake"], "x"), 'models.fake: expected an object, found "x"'),
    "tool-f1-a-string": (_set(["models", "fake", "tools", "get_me"], "high"),
                         'models.fake.tools.get_me: expected a number, found "high"'),
    "deep": (lambda text: text[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}",
             "nested too deep (more than 32 levels)"),
}


@pytest.mark.parametrize("variant", list(HOSTILE_BASELINES))
def test_a_hostile_baseline_is_one_usage_line_before_any_call(project: pytest.Pytester,
                                                              model_server: ScriptedModelServer,
                                                              variant: str) -> None:
    edit, message = HOSTILE_BASELINES[variant]
    path = project.path / "base.json"
    path.write_text(edit(json.dumps(baseline())))
    result = compare(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert model_server.requests == []  # found before any model call
    lines = [line for line in result.stderr.lines + result.stdout.lines if "base.json" in line]
    assert lines == [f"ERROR: --mcp-compare: baseline {path}: {message}"], result.stderr.str()
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output and "RecursionError" not in output
    assert not (project.path / "report.html").exists() and not (project.path / "report.json").exists()


def test_a_baseline_for_other_models_fails_the_drop_gate(project: pytest.Pytester,
                                                        model_server: ScriptedModelServer) -> None:
    """A baseline saved by a real run, then its cases given to another model: valid, but no case of the run pairs
    with it.  With --mcp-fail-on-drop the gate fails saying so; without, the summary says so and the run
    passes (nothing was asked of the comparison)."""
    assert run(project, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    saved = json.loads((project.path / "base.json").read_text())
    saved["cases"] = [{**c, "model": "ghost"} for c in saved["cases"]]
    saved["models"] = {"ghost": saved["models"]["fake"]}
    (project.path / "base.json").write_text(json.dumps(saved))
    sentence = ("no case of this run pairs with the baseline (none has the same file, case id and model; "
                "the baseline's models: ghost; this run's: fake), so no drop could be measured")
    result = compare(project)
    result.stdout.fnmatch_lines([f"GATE FAILED --mcp-fail-on-drop: {sentence}"])
    assert result.ret == 1
    gate = read_report(project)["gate"]
    assert gate["passed"] is False and gate["failures"] == [f"--mcp-fail-on-drop: {sentence}"]
    result = run(project, "--mcp-models=fake", "--mcp-compare=base.json")
    result.stdout.fnmatch_lines([f"--mcp-compare={project.path / 'base.json'}: {sentence}"])
    assert result.ret == 0


def test_a_baseline_that_is_a_fifo_is_a_usage_error_not_a_hang(project: pytest.Pytester,
                                                              model_server: ScriptedModelServer) -> None:
    os.mkfifo(project.path / "base.json")  # opening it for reading would wait for a writer
    result = compare(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and model_server.requests == []
    result.stderr.fnmatch_lines([f"ERROR: --mcp-compare: baseline {project.path / 'base.json'}: not a regular file "
                                 "but a FIFO"])


# -- the response cache ----------------------------------------------------------------------------------


def entry_of(pytester: pytest.Pytester, case: str) -> Path:
    found = [p for p in sorted((pytester.path / ".mcpeval" / "cache").rglob("*.json"))
             if json.loads(p.read_text())["case"].endswith(f"::{case}[fake]")]
    assert len(found) == 1
    return found[0]


def _edit_entry(change: Any) -> Any:
    def corrupt(path: Path) -> None:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
    return corrupt


def _text(change: Any) -> Any:
    def corrupt(path: Path) -> None:
        path.write_text(change(path.read_text()))
    return corrupt


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


CORRUPT_ENTRIES = {
    # id: (what is done to the entry of case b, what the summary and the error say is wrong with it)
    "reply-null": (_edit_entry(lambda d: d.update(reply=None)), "reply: expected an object, found null"),
    "reply-empty": (_edit_entry(lambda d: d.update(reply={})), "reply.calls: this field is required"),
    "tokens-1e400": (_text(lambda t: t.replace('"prompt_tokens": ', '"prompt_tokens": 1e400, "x": ', 1)),
                     "reply.usage.prompt_tokens: expected an integer, found a number out of range (inf)"),
    "calls-not-a-list": (_edit_entry(lambda d: d["reply"].update(calls="get_me")),
                         'reply.calls: expected a list, found "get_me"'),
    "truncated": (_text(lambda t: t[:40]), "not valid JSON: *"),
    "fifo": (_fifo, "not a regular file but a FIFO"),
    "dev-zero": (_dev_zero, "not a regular file but a character device"),
}


@pytest.mark.parametrize("variant", list(CORRUPT_ENTRIES))
def test_a_corrupt_cache_entry_is_absent(project: pytest.Pytester, model_server: ScriptedModelServer,
                                         variant: str) -> None:
    """Replay only: the case is an error naming the file and what is wrong, no call, and the summary does not
    say "called again".  Then a recording run calls it again, scores it right and overwrites the entry, which
    the next replay uses."""
    corrupt, problem = CORRUPT_ENTRIES[variant]
    assert run(project, "--mcp-models=fake").ret == 0 and len(model_server.requests) == 3
    victim = entry_of(project, "b")
    corrupt(victim)

    result = run(project, "--mcp-models=fake", "--mcp-record=none", "--mcp-report=report.json")
    assert result.ret == 1 and len(model_server.requests) == 3
    cases = {c["id"]: c for c in read_report(project)["cases"]}
    assert (cases["a"]["passed"], cases["c"]["passed"]) == (True, True)
    from fnmatch import fnmatchcase

    error = cases["b"]["error"] or ""
    assert fnmatchcase(error, f"*::b[[]fake[]]: the recorded response {victim} cannot be replayed: {problem} "
                              "(--mcp-record=none replays only)*"), error
    result.stdout.fnmatch_lines(["1 cache entry could not be used, and its case is an error (--mcp-record=none "
                                 "replays only):", f"  {victim}: {problem}"])
    assert "called again" not in result.stdout.str()
    assert "internal error" not in result.stdout.str() and "Traceback" not in result.stdout.str()

    result = run(project, "--mcp-models=fake", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["1 cache entry could not be used and was called again:", f"  {victim}: {problem}",
                                 "*3 passed*"])
    assert result.ret == 0 and len(model_server.requests) == 4  # b's call, once more
    cases = {c["id"]: c for c in read_report(project)["cases"]}
    assert all(cases[i]["passed"] is True and cases[i]["error"] is None for i in IDS)  # not a miss, not an error
    assert victim.is_file() and not victim.is_symlink()
    assert json.loads(victim.read_text())["reply"]["calls"][0]["name"] == "get_me"  # overwritten with the answer

    result = run(project, "--mcp-models=fake", "--mcp-record=none")
    assert result.ret == 0 and len(model_server.requests) == 4
    assert "cache entr" not in result.stdout.str()


def test_catalog_token_counts_of_1e400_are_counted_again(project: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog's token counts kept beside the entries: a count that is not a whole number >= 0 (here
    infinity) is no count, and the tools are counted again, rather than an internal error at the next run."""
    from pytest_mcpeval.models import tokens as tokens_module

    assert run(project, "--mcp-models=fake", "--mcp-report=report.json").ret == 0
    tokens = read_report(project)["catalogs"]
    counts = sorted((project.path / ".mcpeval" / "cache" / "catalog-tokens").glob("*.tokens"))
    assert counts
    for path in counts:
        data = json.loads(path.read_text())
        data["tools"] = {key: 0 for key in data["tools"]}
        path.write_text(json.dumps(data).replace(": 0", ": 1e400"))
    # as in the next run's fresh process: nothing counted or read yet (runs of this test share one process)
    monkeypatch.setattr(tokens_module, "_known", {})
    monkeypatch.setattr(tokens_module, "_stored", {})
    result = run(project, "--mcp-models=fake", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    assert read_report(project)["catalogs"] == tokens


def test_a_corrupt_entry_read_on_an_xdist_worker_is_in_the_summary(project: pytest.Pytester,
                                                                   model_server: ScriptedModelServer) -> None:
    """What a worker found crosses to the controller (as pairs: what became of the entry, and why)."""
    assert run(project, "--mcp-models=fake").ret == 0
    victim = entry_of(project, "b")
    _edit_entry(lambda d: d.update(reply=None))(victim)
    result = run(project, "--mcp-models=fake", "-n", "1")
    result.stdout.fnmatch_lines(["1 cache entry could not be used and was called again:",
                                 f"  {victim}: reply: expected an object, found null", "*3 passed*"])
    assert result.ret == 0 and len(model_server.requests) == 4
