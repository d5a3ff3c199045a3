"""A pytest plugin the tune command loads in its subprocesses (``-p pytest_mcpeval.tune.select``).

``--mcpeval-tune-select=FILE`` keeps only the case items whose ``[file, id]`` (the file relative to the rootdir,
as the report writes it) the JSON list in FILE holds; every other item is deselected (the ``--mcp-overlay`` check
sees every collected file's catalog first).  ``--mcpeval-tune-manifest=
FILE`` writes, once the items are collected, the rootdir and each case's file, id, expected tools and user text
(what the proposer may be shown of a train case).  Node ids are never parsed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpeval.keys import CASE_KEY


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpeval-tune", "used by python -m pytest_mcpeval tune")
    group.addoption("--mcpeval-tune-select", dest="mcpeval_tune_select", metavar="FILE", default=None,
                    help="keep only the cases [file, id] listed in FILE (JSON)")
    group.addoption("--mcpeval-tune-manifest", dest="mcpeval_tune_manifest", metavar="FILE", default=None,
                    help="write the rootdir and the collected cases to FILE (JSON)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from pytest_mcpeval.run.case import build_messages, relative_to_root

    root = config.rootpath
    manifest = config.option.mcpeval_tune_manifest
    if manifest:
        cases: dict[str, Any] = {}
        for item in items:
            ref = item.stash.get(CASE_KEY, None)
            if ref is None or ref.model is None or ref.case.skip:
                continue
            file = relative_to_root(ref.bench.path, root)
            messages = build_messages(None, ref.case)
            cases[f"{file}::{ref.case.id}"] = {
                "file": file, "id": ref.case.id, "flow": ref.case.is_flow,
                "expected": [call.tool for call in ref.case.expect],
                "text": "\n".join(str(m["content"]) for m in messages if m["role"] == "user"),
            }
        Path(manifest).write_text(json.dumps({"rootdir": str(root), "cases": cases}), encoding="utf-8")
    chosen = config.option.mcpeval_tune_select
    if not chosen:
        return
    _check_overlay(config, items)
    wanted = {tuple(pair) for pair in json.loads(Path(chosen).read_text(encoding="utf-8"))}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        ref = item.stash.get(CASE_KEY, None)
        selected = ref is not None and (relative_to_root(ref.bench.path, root), ref.case.id) in wanted
        (keep if selected else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _check_overlay(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The overlay checked against the catalogs of every collected file, before the selection: a candidate's run
    may select no case of the server whose tool it changes (only a guard sample of the others), and the plugin's
    own check, which looks at the selected files only, would then refuse a tool that is there."""
    from pytest_mcpeval.keys import SETTINGS_KEY

    overlay = config.stash[SETTINGS_KEY].overlay
    if overlay is None or not any(item.stash.get(CASE_KEY, None) is not None for item in items):
        return
    from pytest_mcpeval.run import preflight
    from pytest_mcpeval.run.overlay_check import check

    check(config, [bench for bench, _, _ in preflight.from_items(items)], overlay)  # once: the later check is skipped
