"""python -m pytest_mcpeval tune: the split, the statistics, and the loop end to end on a description-sensitive
scripted model.

The command runs each evaluation as a pytest subprocess; here the loop's evaluations run in the test's process
(pytester, through the evaluator's ``runner`` seam: a process start and litellm's import less per evaluation, and
the demo's embedding model loaded once), and one run, the proposer test's rerun, is end to end as the command
runs it."""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run

from pytest_mcpeval.__main__ import build_parser
from pytest_mcpeval.models.local import Retriever
from pytest_mcpeval.testing import ScriptedModelServer
from pytest_mcpeval.tune import TuneError, command
from pytest_mcpeval.tune.candidates import Candidate, parse_proposals, quoted_case
from pytest_mcpeval.tune.evaluate import Evaluation, Evaluator, Outcome, Runner
from pytest_mcpeval.tune.loop import Settings, Tuner
from pytest_mcpeval.tune.split import split_cases
from pytest_mcpeval.tune.stats import accuracy, holm, tool_f1


class KeywordModel(ScriptedModelServer):
    """A description-sensitive stand-in: it calls the first tool (in catalog order) whose description holds the
    first word of the request, and no tool when none does; a proposer's request gets ``proposals``."""

    proposals: dict[str, list[str]]

    def reply_for(self, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            body = next(b for b in reversed(self.requests) if b.get("messages") is messages)
        text = str(messages[-1]["content"])
        if model.endswith("proposer"):
            tool = text.split("\n", 1)[0].removeprefix("Tool: ")
            return {"content": json.dumps({"descriptions": self.proposals.get(tool, [])})}
        word = text.split()[0]
        for entry in body.get("tools", []):
            if word in str(entry["function"]["description"]).split():
                return {"tool_calls": [{"name": entry["function"]["name"], "arguments": {}}]}
        return {"content": "I do not know which tool."}


TOOLS = [  # catalog order decides ties: `remove` comes before `fetch`, so a `remove` that says gamma steals it
    {"name": "search", "description": "Search things."},
    {"name": "listing", "description": "List things. alpha"},
    {"name": "remove", "description": "Remove a thing."},
    {"name": "fetch", "description": "Fetch one thing. gamma"},
    {"name": "small", "description": "Small tool."},
    {"name": "archive", "description": "Archive things."},
]
TOPICS = {"kilo": ("search", 16), "alpha": ("listing", 16), "gamma": ("fetch", 16), "omega": ("small", 4),
          "zulu": ("remove", 32), "tango": ("archive", 16)}
FILLER = " ".join(["Archives keep every record of the thing with its whole history and all its fields."] * 30)
CANDIDATES = {
    "search": ["Search things. kilo", "Search things, quickly."],  # accepted; worse_than_other_candidate
    "remove": ["Remove a thing. zulu gamma"],  # wins 16 zulu cases, steals 8 gamma ones: regression
    "small": ["Small tool. omega"],  # 2 held-out cases: cannot be significant, not evaluated
    "archive": [f"Archive things. tango {FILLER}"],  # a real gain, but the catalog grows far beyond 25%
    "listing": ["List things, e.g. alpha request number 3."],  # quotes a case: not evaluated
}


def bench() -> str:
    lines = ["server: {tools_file: tools.json}", "cases:"]
    for word, (tool, count) in TOPICS.items():
        for i in range(count):
            lines += [f"  - id: {word}-{i}", f"    input: {word} request number {i}", f"    expect: [{{tool: {tool}}}]"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def keyword_model() -> Any:
    with KeywordModel() as server:
        server.proposals = {}
        yield server


def in_process(pytester: pytest.Pytester) -> Runner:
    """The evaluator's runner: each evaluation in this process (pytester, in pytester.path)."""

    def runner(arguments: list[str]) -> subprocess.CompletedProcess[str]:
        result = run(pytester, *arguments)
        return subprocess.CompletedProcess(arguments, int(result.ret), "\n".join(result.outlines),
                                           "\n".join(result.errlines))

    return runner


@pytest.fixture
def project(pytester: pytest.Pytester, keyword_model: KeywordModel, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(command, "Evaluator", functools.partial(Evaluator, runner=in_process(pytester)))
    tmp_path = pytester.path
    params = json.dumps({"api_base": keyword_model.api_base, "api_key": "none", "num_retries": 0})
    ini = f"[pytest]\nmcp_model_aliases = kw = openai/kw\nmcp_model_params = kw = {params}\n"
    (tmp_path / "pytest.ini").write_text(ini)
    schema = {"type": "object", "properties": {}}
    (tmp_path / "tools.json").write_text(json.dumps([dict(tool, inputSchema=schema) for tool in TOOLS]))
    (tmp_path / "bench.mcpeval.yaml").write_text(bench())
    (tmp_path / "candidates.yaml").write_text(json.dumps({"version": 1, "candidates": CANDIDATES}))
    return tmp_path


def tune(*argv: str) -> int:
    args: argparse.Namespace = build_parser().parse_args(["tune", *argv])
    return int(args.run(args))


def test_every_reason_and_an_acceptance(project: Path, keyword_model: KeywordModel) -> None:
    assert tune("bench.mcpeval.yaml", "--model", "kw", "--candidates", "candidates.yaml", "--out", "out") == 0
    data = json.loads((project / "out" / "tune.json").read_text())
    verdicts = {(c["tool"], c["description"][:30]): (c["verdict"], c["reason"]) for c in data["candidates"]}
    assert verdicts == {
        ("search", "Search things. kilo"): ("accepted", None),
        ("search", "Search things, quickly."): ("rejected", "worse_than_other_candidate"),
        ("remove", "Remove a thing. zulu gamma"): ("rejected", "regression"),
        ("small", "Small tool. omega"): ("rejected", "too_few_held_out"),
        ("archive", "Archive things. tango Archives"): ("rejected", "token_growth"),
        ("listing", "List things, e.g. alpha reques"): ("rejected", "quotes_a_case"),
    }
    quote = next(c for c in data["candidates"] if c["reason"] == "quotes_a_case")
    assert quote["train"] is None and quote["holdout"] is None and "case bench.mcpeval.yaml::alpha-3" in quote["note"]
    by_tool = {c["tool"]: c for c in data["candidates"] if c["reason"] != "worse_than_other_candidate"}
    search = by_tool["search"]["holdout"]
    assert search["f1"]["before"] == 0.0 and search["f1"]["after"] == 1.0 and search["f1"]["p"] < 0.05
    assert by_tool["search"]["train"]["f1"]["after"] == 1.0
    remove = by_tool["remove"]
    assert [r["metric"] for r in remove["regressions"]] == ["f1[fetch]"]
    assert remove["holdout"]["accuracy_affected"]["after"] > remove["holdout"]["accuracy_affected"]["before"]
    assert by_tool["small"]["note"] == ("only 2 held-out cases can change its F1 (2 expect it, 0 wrongly routed to "
                                        "it): a significant gain needs at least 6 changed at level 0.05; not evaluated")
    assert by_tool["small"]["train"] is None and by_tool["small"]["holdout"] is None
    assert by_tool["archive"]["tokens"]["growth"] > 0.25
    split = data["split"]
    assert not set(split["train"]) & set(split["holdout"]) and len(split["train"]) + len(split["holdout"]) == 100
    assert (project / "out" / "overlay.yaml").read_text() == (
        "version: 1\ntools:\n  search:\n    description: Search things. kilo\n")
    markdown = (project / "out" / "tune.md").read_text()
    assert "## `search` (file, round 1): kept" in markdown and "+Search things. kilo" in markdown
    assert "| `search` | Search things. kilo (file) | 0.000 → 1.000 |" in markdown  # the summary table, kept first
    assert ("| `listing` | List things, e.g. alpha request number 3. (file) | not judged |  | `quotes_a_case` |"
            in markdown)
    assert "dropped: `regression`" in markdown and "model call" in markdown
    report = json.loads((project / "out" / "report.json").read_text())
    assert report["run"]["overlay"]["tools"] == ["search"]
    assert (project / "out" / "report.html").is_file()
    assert data["cost"]["calls"] < data["cost"]["evaluations"] * 100  # candidates re-run only what they can affect


def test_proposer_sees_train_misses_only(project: Path, keyword_model: KeywordModel,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    keyword_model.proposals = {"search": ["Search things. kilo"]}
    params = json.dumps({"api_base": keyword_model.api_base, "api_key": "none", "num_retries": 0})
    assert tune("bench.mcpeval.yaml", "--model", "kw", "--proposer", "openai/proposer", "--proposer-params", params,
                "--tools", "search", "--out", "out") == 0
    data = json.loads((project / "out" / "tune.json").read_text())
    assert [(c["tool"], c["source"], c["verdict"]) for c in data["candidates"]] == [("search", "proposer", "accepted")]
    asked = [b for b in keyword_model.requests if b["model"] == "proposer"]
    assert len(asked) == 1
    prompt = asked[0]["messages"][-1]["content"]
    held = {key.split("::")[1] for key in data["split"]["holdout"]}
    shown = {line.split("'")[1].split()[-1] for line in prompt.splitlines() if line.startswith("- 'kilo")}
    assert shown and not any(f"kilo-{n}" in held for n in shown)  # every kilo case shown is a train case
    assert "kilo request number" in prompt and "Current description: Search things." in prompt
    # a rerun replays everything: the evaluations from the response cache, the proposer from its own cache; it runs
    # end to end as the command does, each evaluation a pytest subprocess (the one test here that does)
    monkeypatch.setattr(command, "Evaluator", Evaluator)
    requests = len(keyword_model.requests)
    assert tune("bench.mcpeval.yaml", "--model", "kw", "--proposer", "openai/proposer", "--proposer-params", params,
                "--tools", "search", "--out", "out") == 0
    again = json.loads((project / "out" / "tune.json").read_text())
    assert len(keyword_model.requests) == requests
    assert (again["cost"]["calls"], again["cost"]["proposer_calls"]) == (0, 0)
    assert [c["verdict"] for c in again["candidates"]] == ["accepted"] and again["split"] == data["split"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--candidates", "bad.yaml"], "tool `serch` is not in the catalog; did you mean `search`?"),
    (["--candidates", "broken.yaml"], "--candidates=broken.yaml:5: invalid YAML at column 5: while scanning a simple "
                                      "key: could not find expected ':'; the line reads `    by words`; a text "
                                      "holding `: ` must be quoted"),
    (["--candidates", "mapping.yaml"], "candidates.search: expected a list of non-empty descriptions (a description "
                                       "holding `: ` must be quoted)"),  # valid YAML, but a mapping, not a text
    (["--candidates", "candidates.yaml", "--holdout", "1.5"], "--holdout=1.5: the held-out share must be strictly"),
    (["--candidates", "candidates.yaml", "--tools", "nope"], "tool `nope` is not in the catalog"),
    ([], "nothing to try: give --candidates FILE and/or --proposer MODEL"),
    (["--candidates", "candidates.yaml", "--pytest-args", "'-o"], "--pytest-args=\"'-o\": No closing quotation"),
    (["--candidates", "candidates.yaml", "--max-token-growth", "nan"], "--max-token-growth=nan: expected a finite"),
    (["--candidates", "candidates.yaml", "--tool-search", "fuzzy"],
     "--tool-search: 'fuzzy' is not METHOD[:K] with METHOD one of bm25, regex, embedding, native, native-regex"),
])
def test_usage_errors(project: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "bad.yaml").write_text("version: 1\ncandidates:\n  serch: [x]\n")
    (project / "mapping.yaml").write_text("version: 1\ncandidates:\n  search:\n  - Search: find things\n")
    (project / "broken.yaml").write_text("version: 1\ncandidates:\n  search:\n  - Search: find things\n    by words\n")
    assert tune("bench.mcpeval.yaml", "--model", "kw", "--out", "out", *argv) == 4
    assert message in capsys.readouterr().err


def test_an_argument_argparse_refuses_is_a_usage_error_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        tune("x.mcpeval.yaml", "--model", "m", "--holdout", "half")
    assert exited.value.code == 4
    assert "python -m pytest_mcpeval tune: argument --holdout: invalid float value: 'half'" in capsys.readouterr().err


def test_no_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert tune("x.mcpeval.yaml", "--candidates", "c.yaml") == 4
    assert "no model: give --model MODEL" in capsys.readouterr().err


def test_split_is_seeded_stratified_and_disjoint() -> None:
    cases = {f"f::{tool}-{i}": [tool] for tool, n in (("a", 10), ("b", 6), ("c", 1), ("d", 1)) for i in range(n)}
    cases["f::none-0"] = []
    train, held = split_cases(cases, 0.5, 0)
    assert (train, held) == split_cases(cases, 0.5, 0)
    assert (train, held) != split_cases(cases, 0.5, 1)
    assert not set(train) & set(held) and set(train) | set(held) == set(cases)
    assert sum(k.startswith("f::a-") for k in held) == 5 and sum(k.startswith("f::b-") for k in held) == 3
    small = {k: v for k, v in cases.items() if v == ["a"]}
    assert len(split_cases(small, 0.05, 0)[1]) == 1  # a group of two or more keeps a case on each side
    with pytest.raises(TuneError, match="strictly between 0 and 1"):
        split_cases(cases, 1.0, 0)
    with pytest.raises(TuneError, match=r"leaves the (train|held-out) part empty"):
        split_cases({"f::only": ["a"]}, 0.5, 0)


def outcome(key: str, expected: str, called: str) -> Outcome:
    return Outcome(key, expected, called, expected == called)


def test_statistics_are_the_gates_exact_tests() -> None:
    before = [outcome(f"k{i}", "search", "(none)") for i in range(6)]
    after = [outcome(f"k{i}", "search", "search") for i in range(6)]
    change = tool_f1("search", list(zip(before, after, strict=True)))
    assert (change.before, change.after, change.discordant) == (0.0, 1.0, 6)
    assert change.p == pytest.approx(2 / 2**6)
    acc = accuracy(list(zip(before, after, strict=True)))
    assert acc.p == pytest.approx(2 / 2**6)
    family = [change, acc]
    holm(family, 0.05)
    assert [c.p_adjusted for c in family] == [pytest.approx(2 * 2 / 2**6)] * 2


def test_parse_proposals() -> None:
    assert parse_proposals('{"descriptions": ["a", "b", "a"]}') == ["a", "b"]
    assert parse_proposals('```json\n["x"]\n```') == ["x"]
    assert parse_proposals("Just one description.") == ["Just one description."]
    assert parse_proposals("") == []
    # a reply cut short at the token limit, repeating itself (seen from local/qwen2.5-coder-0.5b as proposer): its
    # complete strings, each distinct one once, never the JSON text itself (the proposer keeps three of them)
    cut = '{"descriptions": ["Search issues.", "Best for \\"login fails\\".", "Search issues.", "Third", "cut sh'
    assert parse_proposals(cut) == ["Search issues.", 'Best for "login fails".', "Third"]
    # objects in the list, keys left out, an escape JSON does not know skipped (local/qwen2.5-coder-0.5b again)
    objects = '{"descriptions": [{"request": "Find a bug", "description": "Search issues by words."}]}'
    assert parse_proposals(objects) == ["Search issues by words."]
    cut = '{"descriptions": [{"request": "it\\\'s", "description": "Search issues by words."}, {"request": "x", "d'
    assert parse_proposals(cut) == ["Search issues by words."]


def test_a_candidate_that_quotes_a_case_is_found() -> None:
    requests = {"f::list": "Show me the closed issues labeled regression in sveltejs/svelte.",
                "f::short": "List open bugs now", "f::tiny": "Open bugs?"}
    assert quoted_case("Show me the closed issues labeled regression in sveltejs/svelte.", requests) == "f::list"
    assert quoted_case("Lists issues: e.g. the closed issues labeled regression in a repo.", requests) == "f::list"
    assert quoted_case("Issues. Example: list open bugs now.", requests) == "f::short"  # a whole request of 4 words
    assert quoted_case("Shows open bugs? and more", requests) is None  # two words in a row are no quote
    assert quoted_case("List the issues of a repository, filtered by labels and state.", requests) is None


class FakeEvaluator:
    """The loop's decisions on outcomes given by a rule (``call(group, overlay) -> tool called``), with no model:
    each tool's definition is 100 tokens plus its overlaid description's length, in one catalog of 300 tokens."""

    def __init__(self, groups: dict[str, str], call: Any) -> None:
        self.groups, self.call, self.runs = groups, call, []  # type: ignore[var-annotated]

    def run(self, overlay: dict[str, str], selected: Any, name: str, **_: Any) -> Evaluation:
        self.runs.append(name)
        out = {}
        for key in (self.groups if selected is None else selected):
            expected = self.groups[key][0]
            called = self.call(self.groups[key], overlay)
            out[key] = Outcome(key, expected, called, expected == called)
        sizes = {t: 100 + len(overlay.get(t, "")) for t in "ABC"}
        return Evaluation(out, sizes, [(300, frozenset("ABC"))], {t: "d" for t in "ABC"})


def fake_tuner(call: Any) -> tuple[Tuner, FakeEvaluator, Evaluation]:
    groups = {f"f::{part}{group}{i}": group for part in "th" for group, n in (("A1", 7), ("A2", 7), ("B", 8))
              for i in range(n)}
    evaluator = FakeEvaluator(groups, call)
    expected = {k: [g[0]] for k, g in groups.items()}
    train = sorted(k for k in groups if "::t" in k)
    held = sorted(k for k in groups if "::h" in k)
    tuner = Tuner(evaluator, expected, train, held, Settings())  # type: ignore[arg-type]
    return tuner, evaluator, evaluator.run({}, None, "base")


def test_changes_accepted_alone_are_rejected_together_when_one_breaks_the_other() -> None:
    """Each rewrite wins alone; together B takes A's cases (A1 right before, A2 won by A's rewrite): only the one
    with the smaller p-value is kept, the other is a regression."""
    def call(group: str, overlay: dict[str, str]) -> str:
        if group.startswith("A"):
            return "B" if "A" in overlay and "B" in overlay else "A" if "A" in overlay or group == "A1" else "C"
        return "B" if "B" in overlay else "C"

    tuner, evaluator, base = fake_tuner(call)
    trials = tuner.round(1, {}, base, [Candidate("A", "alpha", "file"), Candidate("B", "beta", "file")])
    verdicts = {t.candidate.tool: (t.verdict, t.reason) for t in trials}
    assert verdicts == {"A": ("rejected", "regression"), "B": ("accepted", None)}, [t.note for t in trials]
    a = next(t for t in trials if t.candidate.tool == "A")
    assert "combined with the other accepted changes" in a.note and "f1[A]" in a.note
    assert "r1-combined" in evaluator.runs


def test_token_growth_is_the_sum_of_the_accepted_changes() -> None:
    """Two rewrites of +20 % each pass the 25 % cap alone; together they are +40 %: one is dropped."""
    def call(group: str, overlay: dict[str, str]) -> str:
        return group[0] if group[0] in overlay else "C"

    tuner, _, base = fake_tuner(call)
    trials = tuner.round(1, {}, base, [Candidate("A", "a" * 60, "file"), Candidate("B", "b" * 60, "file")])
    assert sorted((t.verdict, t.reason) for t in trials) == [("accepted", None), ("rejected", "token_growth")]
    assert all(t.tokens == {"before": 300, "after": 360, "growth": 0.2} for t in trials)
    assert "tokens per request +40%" in next(t.note for t in trials if t.verdict == "rejected")


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_demo_keeps_one_rewrite_and_drops_the_others_on_the_examples(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       minilm: Retriever) -> None:
    """`make tune-demo` as docs/tuning.md reports it: local/minilm (descriptions change its embeddings) on the GitHub
    catalog's examples, with examples/tune/candidates.yaml: the list_issues rewrite that names the tool's filters is
    kept on held-out evidence, the other one loses on train, the search_issues one has too few changed cases."""
    # the model loaded before the in-process evaluations (the `minilm` fixture): each evaluation reuses it
    retriever = minilm
    embedded, tools_embedded = retriever.queries_embedded, retriever.tools_embedded
    monkeypatch.setattr(command, "Evaluator", functools.partial(Evaluator, runner=in_process(pytester)))
    tmp_path = pytester.path
    for name in ("github", "tune"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    assert tune("github", "tune", "--model", "local/minilm", "--candidates", "tune/candidates.yaml",
                "--out", "out") == 0
    data = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert (len(data["split"]["train"]), len(data["split"]["holdout"])) == (57, 54)
    verdicts = [(c["tool"], c["description"][:24], c["verdict"], c["reason"]) for c in data["candidates"]]
    assert verdicts == [("list_issues", "List issues: show the op", "rejected", "worse_than_other_candidate"),
                        ("list_issues", "List the issues of a rep", "accepted", None),
                        ("search_issues", "Has anyone already repor", "rejected", "no_significant_gain")]
    kept, dropped = data["candidates"][1], data["candidates"][2]
    f1 = kept["holdout"]["f1"]
    assert (f1["before"], f1["p"] < 0.05, kept["regressions"]) == (0.0, True, []) and f1["after"] > 0.7
    assert "cannot show a significant gain" in dropped["note"]
    assert yaml.safe_load((tmp_path / "out" / "overlay.yaml").read_text())["tools"] == {
        "list_issues": {"description": kept["description"]}}
    assert "## `list_issues` (file, round 1): kept" in (tmp_path / "out" / "tune.md").read_text()
    # every evaluation ranks the same requests: each is embedded once in the process, not once per evaluation
    rankings, requests = data["cost"]["calls"], len(data["split"]["train"]) + len(data["split"]["holdout"])
    assert retriever.queries_embedded - embedded <= requests < rankings, (rankings, requests)
    # and each tool text once: the catalog's, then each candidate's description (not the whole catalog per try)
    catalog = json.loads((EXAMPLES / "github" / "github-tools.json").read_text())
    assert retriever.tools_embedded - tools_embedded <= len(catalog) + len(data["candidates"])


def test_tool_search_is_passed_on_to_every_evaluation(tmp_path: Path) -> None:
    import argparse

    from pytest_mcpeval.tune.command import _check, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["x.mcpeval.yaml", "--model", "m", "--candidates", "c.yaml", "--tool-search", "bm25:3",
                              "--pytest-args=-x", "--out", str(tmp_path / "out")])
    _check(args)
    assert args.pytest_arguments == ["-x", "--mcp-tool-search=bm25:3"]
