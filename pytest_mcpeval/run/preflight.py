"""The pre-flight check: before the first model call, every model and server the selected cases need is tried.

A run with a missing key used to find out case by case: ``--mcp-models=gpt-5,claude`` without keys printed 266
errors and 846 lines after 15 s, each message three times per case; a server command that does not exist, 21
lines.  MCP-Atlas checks its servers before it starts; so does this, once the items are selected (``-k``, ``-m``)
and before any of them runs:

* each model (a litellm model string, not ``local/...``) must resolve to a provider, and litellm's own
  environment check must find its key (``litellm.validate_environment``).  A missing key is not a failure
  when the run cannot need it: with ``--mcp-record=none`` (replay only), or when the response cache already
  holds answers of that model (a replay may cover every case; the cases it does not are errors as before);
* each server of a benchmark file (``command``, ``url``, ``python``) must start, complete the MCP handshake
  and list its tools within ``--mcp-connect-timeout``; not when a ``conftest.py`` overrides ``mcp_server`` (the
  fixture decides the server then, per item);
* a model that runs cases under native tool search (``--mcp-tool-search=native``, a ``tool_search`` key) must be one
  whose provider runs it (Anthropic's routes: :func:`pytest_mcpeval.tool_search.native_problem`);
* a local llama.cpp model (``local/qwen2.5-coder-*``, ``local/gguf:PATH``) is started, once the rest holds, with
  the context its cases' largest catalog needs (models/llama/sizing.py): a catalog that cannot fit, or a server
  that dies while starting (SIGILL on a processor the build does not suit), is its line.  The server stays up for
  the run (this process holds a lease on it until the session ends).

What fails is one line per model or server, and the run stops with a usage error (exit 4) with no model called.
``--mcp-no-preflight`` skips the check.  It costs one start of each server, all at once, before the run starts
them (the check's connections are not kept: the run's servers log under pytest's temporary directory, and each
xdist worker starts its own anyway).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.keys import SETTINGS_KEY
from pytest_mcpeval.run.prefetch import server_overridden

if TYPE_CHECKING:
    from pytest_mcpeval.benchmark.loader import Benchmark
    from pytest_mcpeval.benchmark.schema import Case
    from pytest_mcpeval.catalog import Catalog
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.run.searching import SearchConfig

_DONE_KEY = pytest.StashKey[bool]()
CATALOGS_KEY = pytest.StashKey[dict[str, "Catalog"]]()  # server_key -> the catalog listed (catalogs())


def wanted(config: pytest.Config) -> bool:
    """Whether this run checks (once): not with ``--mcp-no-preflight``, ``--collect-only``, ``--mcp-tools`` or
    ``--snapshot-update`` (which call no model)."""
    if config.stash.get(_DONE_KEY, False):
        return False
    settings = config.stash[SETTINGS_KEY]
    return not (settings.no_preflight or config.option.collectonly or settings.list_tools or settings.snapshot_update)


def check(config: pytest.Config, cases: Iterable[tuple[Benchmark, Case, ModelSpec]]) -> None:
    """Try every model and server of ``cases`` (the selected case items that will call a model); a usage error
    naming each that fails."""
    from pytest_mcpeval.run.case import needs_judge

    config.stash[_DONE_KEY] = True
    models: dict[str, ModelSpec] = {}
    servers: dict[str, tuple[Benchmark, str]] = {}
    served: list[tuple[str, Benchmark, Case, ModelSpec]] = []  # the cases of local llama.cpp models, by server key
    judged = False
    cases_list = list(cases)
    keys: dict[int, str] = {}  # by benchmark file: a file's cases share its server (a path resolved, a JSON dump)
    for bench, case, model in cases_list:
        models.setdefault(model.name, model)
        judged = judged or needs_judge(case)
        spec = bench.spec.server
        key = keys.get(id(bench), "")
        if spec is not None and not key:
            key = keys[id(bench)] = server_key(bench)
        if spec is not None and spec.tools_file is None:
            servers.setdefault(key, (bench, spec.describe()))
        if model.target.startswith("llama-server/"):
            served.append((key, bench, case, model))
    settings = config.stash[SETTINGS_KEY]
    if settings.judge_model and judged:  # only a case whose claims need the judge calls it
        judge = settings.registry.resolve(settings.judge_model)
        models.setdefault(judge.name, judge)
    problems = [line for model in models.values() if (line := _model_problem(config, model)) is not None]
    problems += _native_problems(config, cases_list)
    if servers and not server_overridden(config):
        problems += _server_problems(config, list(servers.values()))
    if served and not problems:
        problems += _llama_problems(config, served, config.stash.setdefault(CATALOGS_KEY, {}))
    if problems:
        from pytest_mcpeval.text import printable

        # a server's command, URL or stderr may carry a secret; its stderr, control characters
        lines = "\n".join(f"  {printable(settings.redactor.text(line))}" for line in problems)
        raise pytest.UsageError(f"pre-flight check failed, no model was called (--mcp-no-preflight skips the check):"
                                f"\n{lines}")


def _model_problem(config: pytest.Config, model: ModelSpec) -> str | None:
    from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX

    if model.target.startswith(LOCAL_PREFIX):
        return None  # the embedded model: no provider, no key
    if model.target.startswith("llama-server/"):  # local/qwen2.5-coder-*: its packages and weights (models/llama)
        from pytest_mcpeval.models.llama.route import problem
        return problem(model) if _calls_needed(config, model) else None
    if not _calls_needed(config, model):
        return None  # a replay: litellm is not even imported (a replay of 1000 cases takes about its import time)
    if "api_key" in model.user_params and "/" in model.target:
        return None  # a key given, a provider named: nothing litellm would add (and its import costs 1.5-2 s)
    from pytest_mcpeval.models.litellm_failures import missing_keys, no_key_message
    from pytest_mcpeval.models.litellm_load import load_litellm

    litellm = load_litellm()
    user = model.user_params
    label = f"model {model.name}" + (f" ({model.target})" if model.target != model.name else "")
    try:
        litellm.get_llm_provider(model.target, custom_llm_provider=user.get("custom_llm_provider"),
                                 api_base=user.get("api_base"))
    except litellm.exceptions.BadRequestError:  # "LLM Provider NOT provided": get_llm_provider turns every error
        # of its own into this one (litellm_core_utils/get_llm_provider_logic.py), so nothing else is caught
        return (f"{label}: litellm cannot tell its provider: write PROVIDER/MODEL (e.g. openai/gpt-5, "
                "anthropic/claude-sonnet-4-5), or map the name in mcp_model_aliases")
    if not missing_keys(model):
        return None
    return f"{label}: {no_key_message(model, 'no key found')}"


def _native_problems(config: pytest.Config, cases: list[tuple[Benchmark, Case, ModelSpec]]) -> list[str]:
    """A line for each model that would run a case under native tool search and whose provider does not run it."""
    from pytest_mcpeval.tool_search import NATIVE, native_problem

    lines: dict[str, str] = {}
    for bench, case, model in cases:
        if model.name in lines:
            continue
        search = _search_of(config, bench, case, model)
        problem = native_problem(model.name, model.target) if search is not None and search.method in NATIVE else None
        if problem is not None:
            lines[model.name] = problem
    return list(lines.values())


def _calls_needed(config: pytest.Config, model: ModelSpec) -> bool:
    """Whether the run may have to call ``model``: not in replay-only mode, nor when the cache holds answers of it
    (those are replayed without a key; a case the cache lacks is then an error of its own)."""
    from pytest_mcpeval.run.cache import model_folder

    settings = config.stash[SETTINGS_KEY]
    if settings.record == "none":
        return False
    if settings.record in ("off", "all"):  # "all" calls everything again, whatever the cache holds
        return True
    folder = model_folder(settings.cache_dir, model)
    try:
        return not any(os.scandir(folder))
    except OSError:  # no folder: nothing recorded for this model
        return True


def _llama_problems(config: pytest.Config, served: list[tuple[str, Benchmark, Case, ModelSpec]],
                    catalogs: dict[str, Catalog]) -> list[str]:
    """Start the server of each local llama.cpp model whose calls are needed, sized for the largest catalog one of
    its cases shows (the tools it exposes of those pre-flight fetched, or of a static tool list, read now); its line
    when it cannot serve."""
    from pytest_mcpeval.models.llama.route import start
    from pytest_mcpeval.models.tokens import tool_tokens
    from pytest_mcpeval.run.exposure import expose
    from pytest_mcpeval.servers import ServerError, load_tools_file

    overridden = server_overridden(config)  # an mcp_server fixture decides the tools, per item: not counted here
    largest: dict[str, tuple[ModelSpec, int | None]] = {}
    needed: dict[str, bool] = {}  # model -> whether the run may call it (its cache folder looked at once)
    counted: dict[str, dict[str, int]] = {}  # server key -> tokens per tool (the catalog counted once)
    for key, bench, case, model in served:
        if model.name not in needed:
            needed[model.name] = _calls_needed(config, model)
        if not needed[model.name]:
            continue
        spec = bench.spec.server
        if not overridden and key not in catalogs and spec is not None and spec.tools_file is not None:
            with contextlib.suppress(ServerError):  # the run reports it as the file's own error
                catalogs[key] = load_tools_file(bench.path.parent / spec.tools_file)
        tokens: int | None = None  # a catalog nobody could count: the server gets all the context it can have
        if not overridden and key in catalogs:
            if key not in counted:
                counted[key] = tool_tokens(catalogs[key])
            try:
                shown = expose(case, catalogs[key]).catalog.names
            except ValueError:  # a tool the server lacks: the case's own error
                shown = []
            search = _search_of(config, bench, case, model)
            tokens = (sum(counted[key].get(name, 0) for name in shown) if search is None
                      else _searched_tokens(search, shown, counted[key]))
        before = largest.get(model.target, (model, 0))[1]
        largest[model.target] = (model, None if tokens is None or before is None else max(before, tokens))
    return [line for model, tokens in largest.values() if (line := start(model, tokens)) is not None]


def _search_of(config: pytest.Config, bench: Benchmark, case: Case, model: ModelSpec) -> SearchConfig | None:
    """The tool search ``model`` runs ``case`` under, as the run decides it (``None``: the whole catalog)."""
    from pytest_mcpeval.run.searching import config_for

    settings = config.stash[SETTINGS_KEY]
    return config_for(model, settings.tool_search, bench.spec.tool_search, case.tool_search,
                      set(settings.models) | set(bench.spec.models))


def _searched_tokens(search: SearchConfig, shown: list[str], per_tool: dict[str, int]) -> int:
    """The most tool tokens a request of a case under client-side tool search can carry: the search tool, the tools
    kept loaded and, at most, the ``max_searches`` x ``top_k`` largest of the case's tools its searches load (the
    model is never sent the whole catalog)."""
    from pytest_mcpeval.catalog import Catalog
    from pytest_mcpeval.models.tokens import tool_tokens
    from pytest_mcpeval.tool_search import search_tool

    tool = search_tool(search.method)
    loaded = [per_tool.get(name, 0) for name in search.always_loaded]
    rest = sorted((per_tool.get(name, 0) for name in shown if name not in search.always_loaded), reverse=True)
    found = rest[: search.max_searches * search.top_k]
    own: int = tool_tokens(Catalog([tool]))[tool["name"]]
    return own + sum(loaded) + sum(found)


def _server_problems(config: pytest.Config, servers: list[tuple[Benchmark, str]],
                     keep_logs: bool = True) -> list[str]:
    """Start each server (in parallel, each in a pool of its own), list its tools (kept under
    :data:`CATALOGS_KEY`), stop it; one line for each that fails.  Their logs are kept (the lines name them) when
    one fails and ``keep_logs``, else removed."""
    from concurrent.futures import ThreadPoolExecutor

    from pytest_mcpeval.servers import ServerError, ServerPool

    settings = config.stash[SETTINGS_KEY]
    fetched = config.stash.setdefault(CATALOGS_KEY, {})
    log_root = Path(tempfile.mkdtemp(prefix="mcpeval-preflight-"))

    def attempt(index: int, bench: Benchmark, described: str) -> str | None:
        assert bench.spec.server is not None
        log_dir = log_root / str(index)
        log_dir.mkdir()
        pool = ServerPool(log_dir, settings.connect_timeout)
        try:
            catalog = pool.catalog_for_spec(bench.spec.server, bench.path.parent, config.rootpath)
        except ServerError as exc:
            shown = os.path.relpath(bench.path, config.invocation_params.dir)
            return f"server of {shown} ({described}): {exc}"
        finally:
            pool.close()
        fetched[server_key(bench)] = catalog  # for the overlay's check and the llama route's sizing: not started again
        return None

    # what an in-process server prints as it is imported goes to a log, as it does inside a case item
    with (log_root / "output.log").open("a", encoding="utf-8") as out, \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), \
            ThreadPoolExecutor(max_workers=min(8, len(servers)), thread_name_prefix="mcpeval-preflight") as threads:
        found = list(threads.map(lambda job: attempt(job[0], *job[1]), enumerate(servers)))
    problems = [line for line in found if line is not None]
    if not problems or not keep_logs:
        shutil.rmtree(log_root, ignore_errors=True)
    return problems


def server_key(bench: Benchmark) -> str:
    """What identifies the server of ``bench`` (relative paths resolve per directory), as the check keys it."""
    assert bench.spec.server is not None
    return f"{bench.path.parent.resolve()}|{bench.spec.server.model_dump_json()}"


def catalogs(config: pytest.Config, benches: Iterable[Benchmark]) -> list[Catalog]:
    """The catalogs of the servers of ``benches`` that the check started (none is started again), the others
    started now as the check starts them: all at once, each within ``--mcp-connect-timeout``.  One that fails is
    left out (the check, or the cases, say why).  Static tool lists are read, nothing started."""
    from pytest_mcpeval.servers import ServerError, load_tools_file

    fetched = config.stash.setdefault(CATALOGS_KEY, {})
    live: dict[str, Benchmark] = {}
    found: list[Catalog] = []
    for bench in benches:
        spec = bench.spec.server
        if spec is not None and spec.tools_file is not None:
            try:
                found.append(load_tools_file(bench.path.parent / spec.tools_file))
            except ServerError:
                continue  # a collection error of its own
        elif spec is not None:
            live.setdefault(server_key(bench), bench)
    missing = [(bench, bench.spec.server.describe()) for key, bench in live.items()  # type: ignore[union-attr]
               if key not in fetched]
    if missing:
        _server_problems(config, missing, keep_logs=False)
    return found + [fetched[key] for key in live if key in fetched]


def from_items(items: Iterable[pytest.Item]) -> list[tuple[Benchmark, Case, ModelSpec]]:
    """The (file, model) of each selected case item that will call a model (not skipped)."""
    from pytest_mcpeval.keys import CASE_KEY

    out: list[tuple[Benchmark, Case, ModelSpec]] = []
    for item in items:
        ref = item.stash.get(CASE_KEY, None)
        if ref is not None and ref.model is not None and item.get_closest_marker("skip") is None:
            out.append((ref.bench, ref.case, ref.model))
    return out


def from_identities(config: pytest.Config,
                    identities: Iterable[dict[str, Any]]) -> list[tuple[Benchmark, Case, ModelSpec]]:
    """The same, on the xdist controller, from the cases the workers selected (run/identities.py): the files
    are read again, as the judge check reads them."""
    from pytest_mcpeval.benchmark.loader import BenchmarkError, load

    settings = config.stash[SETTINGS_KEY]
    benches: dict[str, Benchmark | None] = {}
    out: list[tuple[Benchmark, Case, ModelSpec]] = []
    for identity in identities:
        file = identity["file"]
        if file not in benches:
            try:
                benches[file] = load(config.rootpath / file)
            except BenchmarkError:  # the worker reported it as a collection error
                benches[file] = None
            else:  # the controller masks what the file's server carries, as the workers do (collect.py)
                from pytest_mcpeval.servers import server_secrets

                settings.redactor.add(server_secrets(benches[file].spec.server))  # type: ignore[union-attr]
        bench = benches[file]
        if bench is None:
            continue
        case = next((c for c in bench.spec.cases if c.id == identity["id"]), None)
        if case is None or case.skip:
            continue
        model = next((m for m in settings.model_specs(bench.spec.models) if m.name == identity["model"]), None)
        if model is not None:
            out.append((bench, case, model))
    return out
