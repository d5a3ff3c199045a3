"""The built wheel works on its own: what a user gets from ``pip install`` of a git URL or a release.

The suite otherwise runs against the editable install of the checkout, where a file left out of the wheel
(package data, a subpackage ``packages.find`` misses) is still found on disk.  Here the wheel is built from a
copy of the sources (the checkout gets no ``build/`` or ``*.egg-info``), installed with ``pip --target`` into a
fresh venv made without pip (nothing downloaded), and the dependencies come from the test venv through a
folder of links that leaves out the checkout's own ``pytest_mcpeval`` and its editable finder, so the package
can only come from the wheel.  A fresh process is the point: the venv's Python, its entry points, its files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from pytest_mcpeval.testing import ScriptedModelServer

REPO = Path(__file__).resolve().parent.parent
OURS = ("pytest_mcpeval", "__editable__", "__pycache__")  # the checkout's install in the test venv: left out

BENCH = """\
version: 1
server: {tools_file: tools.json}
cases:
  - id: open-issues
    input: Show me the open issues.
    expect: [{tool: list_issues, args: {state: open}}]
  - id: search-login
    input: Find issues about the login timeout.
    expect: [{tool: search_issues, args: {query: {regex: "(?i).*login.*"}}}]
"""
TOOLS = [
    {"name": "list_issues", "description": "List issues by state.",
     "inputSchema": {"type": "object", "properties": {"state": {"type": "string"}}}},
    {"name": "search_issues", "description": "Full-text search over issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
CHECK = """\
import importlib.metadata, json, sys
import pytest_mcpeval, pytest_mcpeval.plugin
from pytest_mcpeval.results.schema import validate_report
(ep,) = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "mcpeval"]
validate_report(json.load(open(sys.argv[1])))
print(json.dumps({"package": pytest_mcpeval.__file__, "entry_point": ep.value,
                  "dist": str(ep.dist.locate_file("")), "plugin": ep.load().__file__}))
"""


def build_wheel(out: Path) -> Path:
    """``pip wheel`` of a copy of what the sdist would hold, without build isolation (no download)."""
    src = out / "src"
    shutil.copytree(REPO / "pytest_mcpeval", src / "pytest_mcpeval",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--wheel-dir", str(out / "dist"), str(src)], check=True)
    (wheel,) = (out / "dist").glob("pytest_mcpeval-*.whl")
    return wheel


def fresh_venv(root: Path, wheel: Path) -> tuple[Path, Path]:
    """A venv without pip whose ``pytest_mcpeval`` is the wheel's and whose dependencies are the test venv's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--target", str(site), str(wheel)], check=True)
    deps = root / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OURS) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    (site / "test-venv-deps.pth").write_text(f"{deps}\n")  # after site-packages on sys.path: the wheel wins
    return python, site


def test_the_built_wheel_runs_a_benchmark_in_a_fresh_venv(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "build")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pytest_mcpeval/py.typed" in names  # package data: mypy users see the types
    assert {"pytest_mcpeval/report/html_assets.py", "pytest_mcpeval/importers/atlas.py"} <= set(names)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "mcpeval = pytest_mcpeval.plugin" in zipfile.ZipFile(wheel).read(entry_points).decode()
    # every file of the package is in the wheel (a data file next to the modules would need package-data)
    shipped = {p.relative_to(REPO).as_posix() for p in (REPO / "pytest_mcpeval").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert shipped <= set(names)

    python, site = fresh_venv(tmp_path, wheel)
    project = tmp_path / "project"
    project.mkdir()
    (project / "my.mcpeval.yaml").write_text(BENCH)
    (project / "tools.json").write_text(json.dumps(TOOLS))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYTEST_")}
    with ScriptedModelServer() as model:
        model.call("Show me the open issues.", "list_issues", state="open")
        model.call("Find issues about the login timeout.", "list_issues", state="all")  # a deliberate miss
        params = json.dumps({"api_base": model.api_base, "api_key": "not-a-key", "num_retries": 0})
        ini = f"[pytest]\nmcp_model_aliases = s = openai/s\nmcp_model_params = s = {params}\n"
        (project / "pytest.ini").write_text(ini)
        done = subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "--mcp-models=s", "--mcp-record=off",
                               "--mcp-report=report.json", "--mcp-html=report.html"],
                              cwd=project, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s: 2 scored, 0 errors | accuracy 50.0%" in done.stdout
    assert "confused: expected search_issues -> called list_issues (1x)" in done.stdout

    html = (project / "report.html").read_text()
    assert "--accent:#0969da" in html and 'id="mcpeval-data"' in html  # the inline style sheet and data block
    checked = subprocess.run([python, "-c", CHECK, "report.json"], cwd=project, env=env,
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr  # the report validates against the wheel's own schema
    where = json.loads(checked.stdout)
    assert where["entry_point"] == "pytest_mcpeval.plugin"
    for key in ("package", "dist", "plugin"):  # the package, its metadata and the plugin pytest loaded
        assert Path(where[key]).resolve().is_relative_to(site.resolve()), (key, where[key])
