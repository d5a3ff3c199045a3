"""Facts of a process, said once for the run rather than with a case: the info of each catalog it listed, and
the parameters it sent each model.

A process notes them where it learns them (:meth:`ProcessFacts.note_catalog`, :meth:`ProcessFacts.note_model`,
on :func:`of` its config).  Without xdist the session reads its own process's at its end.  An xdist worker hands
what it noted to its controller in ``config.workeroutput`` (:data:`WORKEROUTPUT_KEY`, masked, at the end of its
session: plugin.py), and the controller merges them when the worker goes down (session.py).  A worker that
dies (SIGKILL, out of memory) hands nothing: a catalog only it listed is missing from the report's ``catalogs``
(the report reads it as absent), a model only it called has no ``params_sent``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:
    from pytest_mcpeval.results import CatalogInfo

WORKEROUTPUT_KEY = "mcpeval_facts"


@dataclass
class ProcessFacts:
    catalogs: dict[str, CatalogInfo] = field(default_factory=dict)  # digest -> info
    params_sent: dict[str, dict[str, Any]] = field(default_factory=dict)  # model name -> parameters sent

    def note_catalog(self, digest: str, info: CatalogInfo) -> None:
        self.catalogs.setdefault(digest, info)

    def note_model(self, name: str, params_sent: dict[str, Any]) -> None:
        self.params_sent.setdefault(name, params_sent)

    def data(self) -> dict[str, Any]:
        """Builtins only: what crosses xdist's channel."""
        return {"catalogs": dict(self.catalogs), "params_sent": dict(self.params_sent)}

    def merge(self, data: object) -> None:
        """What another process noted (:meth:`data`, from a worker's ``workeroutput``); the first said is kept."""
        if not isinstance(data, Mapping):
            return
        for key, noted in (("catalogs", self.catalogs), ("params_sent", self.params_sent)):
            found = data.get(key)
            if isinstance(found, Mapping):
                for name, value in found.items():
                    if isinstance(value, dict):
                        noted.setdefault(str(name), cast(Any, value))


_KEY = pytest.StashKey[ProcessFacts]()


def of(config: pytest.Config) -> ProcessFacts:
    """This process's facts (on the controller of an xdist run, with its workers' merged in)."""
    found = config.stash.get(_KEY, None)
    if found is None:
        found = config.stash[_KEY] = ProcessFacts()
    return found
