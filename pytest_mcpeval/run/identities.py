"""What names each selected case, carried from the xdist workers to the controller as data.

The controller of an xdist run collects nothing: it learns the selected items from the node ids each worker
sends.  A node id cannot be parsed back into a case reliably: a file may be named ``x::y.mcpeval.yaml``, a
case id or a model alias may hold ``[``, ``]`` or ``::`` (``we]ird::na[me``), and ``file::id[model]`` is then
ambiguous; a case misread there is missing from the report when the run stops before it.  So each worker
writes ``{node id: CaseIdentity}`` of its selected case items, as its collection built them, to a file the
controller named in its ``workerinput`` (:func:`prepare_node`), before it tells the controller its collection
is finished; the controller reads it when that message arrives (:func:`received`).  Every worker collects the
same items, so the first file read is the run's.

Only where no such file can be read (a worker on another machine, through ``--tx ssh=...``) does the controller
fall back to :func:`pytest_mcpeval.run.case.identity_from_nodeid`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_mcpeval.run.case import CaseIdentity

WORKERINPUT_KEY = "mcpeval_identities"  # the file a worker writes its case identities to
_DIRECTORY_KEY = pytest.StashKey[str]()  # the controller's folder of those files
_RECEIVED_KEY = pytest.StashKey["dict[str, CaseIdentity] | None"]()


def prepare_node(config: pytest.Config, node: Any) -> None:
    """On the controller, for each worker it starts: the path of the file that worker writes."""
    directory = config.stash.get(_DIRECTORY_KEY, None)
    if directory is None:
        directory = config.stash[_DIRECTORY_KEY] = tempfile.mkdtemp(prefix="mcpeval-ids-")
    node.workerinput[WORKERINPUT_KEY] = os.path.join(directory, f"{node.gateway.id}.json")


def publish(session: pytest.Session, identities: dict[str, CaseIdentity]) -> None:
    """On a worker, once its items are selected: write their identities where the controller reads them
    (atomically, as every report is: the controller never reads half a file)."""
    workerinput: dict[str, Any] | None = getattr(session.config, "workerinput", None)
    path = workerinput.get(WORKERINPUT_KEY) if workerinput else None
    if not isinstance(path, str):
        return
    from pytest_mcpeval.storage import write_json

    with contextlib.suppress(OSError):  # else the controller falls back to the node ids (a worker elsewhere)
        write_json(identities, Path(path))


def received(config: pytest.Config, node: Any, ids: list[str]) -> dict[str, CaseIdentity]:
    """On the controller: the identities of the case items among ``ids`` (the node ids a worker selected), as
    the worker wrote them; read once per run (every worker collects the same items).  Parsed from the node
    ids only when the worker's file cannot be read."""
    found = config.stash.get(_RECEIVED_KEY, None)
    if found is None:
        found = config.stash[_RECEIVED_KEY] = _read(config, node)
    if found is not None:
        return found
    from pytest_mcpeval.run.case import identity_from_nodeid

    parsed = {nodeid: identity_from_nodeid(nodeid) for nodeid in ids}
    return {nodeid: identity for nodeid, identity in parsed.items() if identity is not None}


def _read(config: pytest.Config, node: Any) -> dict[str, CaseIdentity] | None:
    path = getattr(node, "workerinput", {}).get(WORKERINPUT_KEY)
    if not isinstance(path, str) or not path.startswith(config.stash.get(_DIRECTORY_KEY, "\0")):
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return data


def clean_up(config: pytest.Config) -> None:
    """On the controller, at the end: remove the folder of the workers' files."""
    directory = config.stash.get(_DIRECTORY_KEY, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)

