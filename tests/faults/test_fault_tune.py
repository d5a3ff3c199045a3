"""``python -m pytest_mcpeval tune`` under faults (issue 30, items 6, 7 and 9), through its in-process pieces:
the command runs as a user runs it (``main([...])``), its evaluations are :class:`FakeEvaluator`'s, which answers
each from the overlay it is given instead of a pytest subprocess (tests/test_tune.py runs real ones), and the
proposer is the public ``ScriptedModelServer``.

- ``--out`` that cannot be written (a file, a read-only place, ``tune.md`` a directory): one line, exit 4, before
  any evaluation (it used to be a traceback, the last one after every evaluation was paid for);
- an interrupted tune writes no result to ``--out`` and leaves no ``work/`` (it said "nothing was written" while
  ``report.json`` and ``report.html`` were there);
- candidates that differ only in whitespace are evaluated once;
- 2,000 candidates: it says what it will do and shows each evaluation (it was silent for minutes);
- a held-out part too small for any significant gain stops before any evaluation (issue 31: a newcomer waited
  four minutes for "0 of 5 accepted"); a tool too few held-out cases can move is named up front and its
  candidates skipped (``too_few_held_out``) without an evaluation;
- a proposer: its HTML error page, a 6 MB reply, a reply of no descriptions are one line each and never a
  candidate; one that never answers is bounded by ``--proposer-timeout`` and named so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from pytest_mcpeval.__main__ import main
from pytest_mcpeval.testing import ScriptedModelServer
from pytest_mcpeval.tune import command
from pytest_mcpeval.tune.evaluate import Evaluator

FILE = "b.mcpeval.yaml"
KEYS = [f"{FILE}::s{i}" for i in range(12)] + [f"{FILE}::l{i}" for i in range(12)]
DESCRIPTIONS = {"search": "Search things.", "listing": "List things."}


class FakeEvaluator(Evaluator):
    """An evaluation without pytest: a ``search`` case is answered right when the overlaid description of
    ``search`` holds "kilo" (else ``listing`` is called), a ``listing`` case always; it writes the report (and the
    page) where pytest would.  ``interrupt_at``: the evaluation that Ctrl-C stops, after pytest wrote its files."""

    runs: ClassVar[list[str]] = []
    interrupt_at: ClassVar[str | None] = None

    def manifest(self) -> dict[str, Any]:
        return {"rootdir": str(self.work), "cases": {
            key: {"expected": ["search" if "::s" in key else "listing"], "text": f"request {key[-3:]}"}
            for key in KEYS}}

    def evaluate(self, extra: list[str], name: str, report_path: Path) -> dict[str, Any]:
        self.runs.append(name)
        given = dict(arg[2:].split("=", 1) for arg in extra if "=" in arg)
        overlay = yaml.safe_load(Path(given["mcp-overlay"]).read_text())["tools"] if "mcp-overlay" in given else {}
        texts = {tool: overlay.get(tool, {}).get("description", text) for tool, text in DESCRIPTIONS.items()}
        chosen = KEYS
        if "mcpeval-tune-select" in given:
            chosen = ["::".join(pair) for pair in json.loads(Path(given["mcpeval-tune-select"]).read_text())]
        cases = []
        for key in chosen:
            expected = "search" if "::s" in key else "listing"
            called = expected if expected == "listing" or "kilo" in texts["search"] else "listing"
            cases.append({"file": FILE, "id": key.split("::")[1], "repeat": 0, "expected_label": expected,
                          "called_label": called, "correct": called == expected, "usage": {"cached": True}})
        report = {"cases": cases, "catalogs": {"d1": {"tokens": 100, "tools": {
            tool: {"description": text, "tokens": 10} for tool, text in texts.items()}}}}
        report_path.write_text(json.dumps(report))
        if "mcp-html" in given:
            Path(given["mcp-html"]).write_text("<html></html>")
        if name == self.interrupt_at:
            raise KeyboardInterrupt
        return report


@pytest.fixture(autouse=True)
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeEvaluator]]:
    monkeypatch.setattr(command, "Evaluator", FakeEvaluator)
    FakeEvaluator.runs = []
    FakeEvaluator.interrupt_at = None
    yield FakeEvaluator


def candidates(path: Path, texts: list[str]) -> Path:
    path.write_text(yaml.safe_dump({"version": 1, "candidates": {"search": texts}}))
    return path


def tune(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[str]]:
    """The exit status and the lines of stderr, then stdout."""
    code = main(["tune", FILE, "--model", "fake", *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, err.splitlines() + out.splitlines()


@pytest.mark.parametrize("place", ["a file", "read-only", "under a file", "tune.md a directory",
                                   "work a file"])
def test_an_unusable_out_is_one_line_before_any_evaluation(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           place: str) -> None:
    out = tmp_path / "out"
    problem = {"a file": "is a file, not a directory",
               "read-only": "cannot be written (Operation not permitted)",
               "under a file": f"cannot create a directory under {out}: it is a file",
               "tune.md a directory": f"{out / 'tune.md'} is a directory, not a file",
               "work a file": f"{out / 'work'} is a file, not a directory"}[place]
    if place in ("a file", "under a file"):
        out.write_text("")
    if place == "under a file":
        out = out / "tune"
    if place == "read-only":  # the tests run as root: a read-only file system refuses even root
        out = Path("/sys/mcpeval-tune-out")
    if place == "tune.md a directory":
        (out / "tune.md").mkdir(parents=True)
    if place == "work a file":
        out.mkdir()
        (out / "work").write_text("")
    code, err = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", ["Search things. kilo"]),
                     "--out", out)
    assert (code, err) == (4, [f"python -m pytest_mcpeval tune: --out={out}: {problem}"])
    assert FakeEvaluator.runs == []


def test_an_interrupted_tune_leaves_no_result_and_no_work_folder(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    FakeEvaluator.interrupt_at = "final"  # Ctrl-C once the final run's pytest has written its report and page
    out = tmp_path / "out"
    code, err = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", ["Search things. kilo"]),
                     "--out", out)
    assert code == 2
    assert err[-1] == f"python -m pytest_mcpeval tune: interrupted; no result was written to {out}"
    assert not out.exists()  # no report.json, report.html, work/; and not the folder the --out check made


def test_a_finished_tune_moves_the_final_report_in_and_removes_work(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, err = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", ["Search things. kilo"]),
                     "--out", out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["overlay.yaml", "report.html", "report.json", "tune.json",
                                                     "tune.md"]


def test_candidates_that_differ_only_in_whitespace_are_evaluated_once(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    texts = ["Search things. kilo", "Search  things.\nkilo", "  Search things.\tkilo  ", "Search kilo."]
    code, _ = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", texts), "--out",
                   tmp_path / "out")
    assert code == 0
    assert [r for r in FakeEvaluator.runs if r.endswith("-train")] == ["r1-search-0-train", "r1-search-1-train"]
    listed = json.loads((tmp_path / "out" / "tune.json").read_text())["candidates"]
    assert [c["description"] for c in listed] == ["Search things. kilo", "Search kilo."]


def test_two_thousand_candidates_say_what_tune_will_do_and_show_progress(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = [f"Search things, variant {i}." for i in range(2000)]
    code, err = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", texts), "--out",
                     tmp_path / "out")
    assert code == 0
    assert err[:6] == [
        f"tune: collecting the cases of {FILE}",
        "tune: 24 cases: 12 train, 12 held-out (seed 0); first the run without any change",
        "tune: evaluation 1: r1-base (every case)",
        "tune: round 1: 2,000 candidates for 1 tool: at most 2,003 more evaluations (one pytest run each)",
        "tune: evaluation 2 of at most 2,004: r1-search-0-train (12 cases, 0 model calls so far)",
        "tune: evaluation 3 of at most 2,004: r1-search-1-train (12 cases, 0 model calls so far)"]
    assert len(FakeEvaluator.runs) == 2003 and len(err) == 2007  # a line per evaluation, 3 of the plan, the result


@pytest.fixture
def proposer(tmp_path: Path) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def propose(tmp_path: Path, capsys: pytest.CaptureFixture[str], server: ScriptedModelServer,
            *args: str) -> tuple[int, list[str]]:
    params = json.dumps({"api_base": server.api_base, "api_key": "sk-test-proposer"})
    return tune(tmp_path, capsys, "--proposer", "openai/fake-proposer", "--proposer-params", params,
                "--tools", "search", "--out", tmp_path / "out", *args)


NOTHING = "tune: --proposer=openai/fake-proposer: nothing proposed for `search`: "
PAGE = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
        "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")


@pytest.mark.parametrize(("content", "why"), [
    (PAGE, "its reply is an HTML page ('502 Bad Gateway'), not descriptions: an error page of the provider or a "
           "proxy?"),
    (json.dumps({"descriptions": ["kilo " * 1_200_000]}),
     "its reply is 6,000,022 characters long, more than a reply of descriptions may be (100,000)"),
    ('{"answer": 42}', "its reply holds no description (expected {\"descriptions\": [...]}): '{\"answer\": 42}'"),
], ids=["html error page", "6 MB", "no descriptions"])
def test_a_proposer_reply_without_descriptions_is_one_line_and_no_candidate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], proposer: ScriptedModelServer, content: str,
        why: str) -> None:
    proposer.script("*", {"content": content})
    code, err = propose(tmp_path, capsys, proposer)
    assert code == 0
    assert NOTHING + why in err
    assert err[-1].startswith(f"tune: 0 of 0 candidates accepted ({NOTHING[6:]}{why});")
    assert FakeEvaluator.runs == ["r1-base", "final"]  # nothing evaluated for it
    assert not list((tmp_path / "out" / "proposer-cache").rglob("*.json"))  # and not kept: a rerun asks again


def test_a_proposer_that_never_answers_is_bounded_by_its_own_timeout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], proposer: ScriptedModelServer) -> None:
    proposer.script("*", {"hang": True})
    started = time.monotonic()
    code, err = propose(tmp_path, capsys, proposer, "--proposer-timeout", "1")
    assert time.monotonic() - started < 15  # 2 attempts of 1 s and a backoff (it was 4 x 120 s)
    assert code == 4
    assert "tune: asking the proposer openai/fake-proposer for `search` (at most 2 s: --proposer-timeout=1, one " \
           "retry)" in err
    assert err[-1] == ("python -m pytest_mcpeval tune: --proposer=openai/fake-proposer: model openai/fake-proposer "
                       "(openai/fake-proposer) after 2 attempts: Timeout: no answer within 1 s (--proposer-timeout)")


def test_tune_md_keeps_a_descriptions_lines_and_its_hyphenated_words() -> None:
    """tune.md re-wrapped a description and broke `side-effect-free` at its hyphens (issue 32 item 9)."""
    from pytest_mcpeval.tune.write import description_diff

    before = ("List the issues of a repository, open or closed, filtered by labels and a since date; read-only and "
              "side-effect-free, ordered by created.\nSecond line.")
    diff = description_diff(before, before.replace("created", "updated"))
    assert diff == ["@@ -1,3 +1,3 @@",
                    " List the issues of a repository, open or closed, filtered by labels and a since date;",
                    "-read-only and side-effect-free, ordered by created.",
                    "+read-only and side-effect-free, ordered by updated.",
                    " Second line."]


def test_a_held_out_part_too_small_for_any_gain_stops_before_any_evaluation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", ["Search kilo."]),
                     "--holdout", "0.1", "--out", tmp_path / "out")
    assert code == 4
    assert err[-1] == ("python -m pytest_mcpeval tune: nothing can be accepted: the held-out part has 2 single-call "
                       "cases and a significant gain at level 0.05 needs at least 6 of them to change; give more "
                       "cases or a larger --holdout (now 0.1); nothing was evaluated")
    assert FakeEvaluator.runs == []


def test_a_tool_too_few_held_out_cases_expect_is_named_first_and_skipped_without_an_evaluation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # level 0.01: a gain needs 8 changed cases; 6 held-out cases expect `search`, and the run without any change
    # routes none wrongly to it (the fake calls `listing` for them)
    code, err = tune(tmp_path, capsys, "--candidates", candidates(tmp_path / "c.yaml", ["Search kilo."]),
                     "--level", "0.01", "--out", tmp_path / "out")
    assert code == 0
    assert err[2] == ("tune: too few held-out cases expect 1 tool for a significant gain (8 changed cases needed at "
                      "level 0.01): search (6); their candidates are skipped (too_few_held_out) unless the run "
                      "without any change wrongly routes enough held-out cases to them")
    assert err[4] == "tune: round 1: 0 candidates for 0 tools: at most 1 more evaluation (one pytest run each)"
    assert FakeEvaluator.runs == ["r1-base", "final"]
    (trial,) = json.loads((tmp_path / "out" / "tune.json").read_text())["candidates"]
    assert (trial["verdict"], trial["reason"], trial["train"], trial["holdout"]) == ("rejected", "too_few_held_out",
                                                                                     None, None)
    assert trial["note"] == ("only 6 held-out cases can change its F1 (6 expect it, 0 wrongly routed to it): a "
                             "significant gain needs at least 8 changed at level 0.01; not evaluated")
    assert err[-1].startswith("tune: 0 of 1 candidates accepted;")
