"""What the reference servers of examples/servers work on, made fresh for every test session (and xdist worker).

* a Git repository for ``mcp-server-git``: four commits with fixed authors and dates, so that every commit hash
  is the same on every machine, a tag, a second branch, one staged and one unstaged change;
* a directory of notes and reports for ``@modelcontextprotocol/server-filesystem``;
* a knowledge graph for ``@modelcontextprotocol/server-memory`` (its JSON-lines file, ``MEMORY_FILE_PATH``).

The benchmark files find them through environment variables (``${MCPEVAL_GIT_REPO}``, ...), and find the
servers on ``PATH``: :func:`prepare` makes a ``bin`` directory holding only the five server commands, taken from
where ``make servers`` installs them (``.venv-servers`` and ``node_modules`` beside this file).  ``conftest.py``
wires this into pytest; ``tests/test_real_servers.py`` uses it directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY_BIN = HERE / ".venv-servers" / "bin"
NODE_BIN = HERE / "node_modules" / ".bin"

# benchmark file -> (server command, where `make servers` installs it, needs Node.js)
SERVERS: dict[str, tuple[str, Path, bool]] = {
    "git.mcpeval.yaml": ("mcp-server-git", PY_BIN, False),
    "time.mcpeval.yaml": ("mcp-server-time", PY_BIN, False),
    "filesystem.mcpeval.yaml": ("mcp-server-filesystem", NODE_BIN, True),
    "memory.mcpeval.yaml": ("mcp-server-memory", NODE_BIN, True),
    "everything.mcpeval.yaml": ("mcp-server-everything", NODE_BIN, True),
}

ENV_GIT_REPO = "MCPEVAL_GIT_REPO"
ENV_FILES = "MCPEVAL_FILES"
ENV_MEMORY_FILE = "MCPEVAL_MEMORY_FILE"


def missing(benchmark: str) -> str | None:
    """Why the server of ``benchmark`` (a file name of :data:`SERVERS`) cannot run here, or ``None``."""
    command, where, node = SERVERS[benchmark]
    if node and shutil.which("node") is None:
        return (f"{command} needs Node.js, and there is no `node` on PATH "
                "(install Node.js >= 20 and run `make servers`, or deselect these cases with -m 'not node')")
    if not (where / command).exists():
        return f"{command} is not installed in {where.relative_to(HERE.parent.parent)}: run `make servers`"
    if benchmark == "git.mcpeval.yaml" and shutil.which("git") is None:
        return "mcp-server-git needs git, and there is no `git` on PATH"
    return None


def prepare(root: Path) -> dict[str, str]:
    """Make every fixture under ``root`` (an empty directory) and return the environment the benchmark files read:
    the fixtures' paths and a ``PATH`` with the installed server commands first."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for command, where, _ in SERVERS.values():
        if (where / command).exists():
            (bin_dir / command).symlink_to(where / command)
    env = {
        ENV_FILES: str(make_files(root / "files")),
        ENV_MEMORY_FILE: str(make_memory(root / "memory.jsonl")),
        "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", os.defpath)]),
    }
    if shutil.which("git") is not None:
        env[ENV_GIT_REPO] = str(make_git_repo(root / "greeter"))
    return env


# ------------------------------------------------------------------------------------------------ git

GREET_V1 = '''import sys


def greet(name):
    return f"Hello, {name}!"


if __name__ == "__main__":
    print(greet(sys.argv[1]))
'''

GREET_V2 = '''import sys


def greet(name, shout=False):
    text = f"Hello, {name}!"
    return text.upper() if shout else text


if __name__ == "__main__":
    print(greet(sys.argv[1], shout="--shout" in sys.argv))
'''

GREET_FAREWELL = GREET_V2.replace('''

if __name__''', '''

def farewell(name):
    return f"Goodbye, {name}!"


if __name__''')

README_V1 = "# greeter\n\nA tiny command-line greeter.\n\nUsage: python src/greet.py NAME\n"
README_V2 = README_V1 + "\nPass --shout to greet in capitals.\n"

ALICE = ("Alice Nguyen", "alice@example.com")
BOB = ("Bob Okafor", "bob@example.com")

# (author, date, message, files written before the commit)
COMMITS: list[tuple[tuple[str, str], str, str, dict[str, str]]] = [
    (ALICE, "2025-06-02T09:00:00+00:00", "Initial commit", {"README.md": README_V1, "src/greet.py": GREET_V1}),
    (BOB, "2025-06-05T14:30:00+00:00", "Add a --shout option", {"src/greet.py": GREET_V2}),
    (ALICE, "2025-06-09T10:15:00+00:00", "Document the --shout option in the README", {"README.md": README_V2}),
]
FAREWELL = (BOB, "2025-06-11T16:00:00+00:00", "Add a farewell message", {"src/greet.py": GREET_FAREWELL})


def make_git_repo(path: Path) -> Path:
    """The repository ``greeter`` on branch ``main``: three commits (the second tagged ``v0.1.0``), a branch
    ``feature/farewell`` one commit ahead, ``CHANGELOG.md`` staged and a change to ``README.md`` not staged."""
    path.mkdir(parents=True)
    home = str(path.parent)  # no configuration of the user's: not even from an older git that ignores GIT_CONFIG_GLOBAL
    base = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": home,
            "XDG_CONFIG_HOME": home, "LC_ALL": "C"}

    def git(*args: str, who: tuple[str, str] = ALICE, date: str = COMMITS[0][1]) -> None:
        env = {**base, "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1], "GIT_AUTHOR_DATE": date,
               "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1], "GIT_COMMITTER_DATE": date}
        subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false", *args],
                       cwd=path, env=env, check=True, capture_output=True)

    def commit(who: tuple[str, str], date: str, message: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_text(text, encoding="utf-8")
        git("add", "--", *files)
        git("commit", "-q", "-m", message, who=who, date=date)

    git("init", "-q")
    for index, (who, date, message, files) in enumerate(COMMITS):
        commit(who, date, message, files)
        if index == 1:
            git("tag", "v0.1.0")
    git("checkout", "-q", "-b", "feature/farewell")
    commit(*FAREWELL)
    git("checkout", "-q", "main")
    (path / "CHANGELOG.md").write_text("# Changelog\n\n## 0.2.0\n\n- The --shout option.\n", encoding="utf-8")
    git("add", "CHANGELOG.md")
    (path / "README.md").write_text(README_V2 + "\n## License\n\nMIT\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------- filesystem

FILES = {
    "README.md": "# Team share\n\nNotes live in notes/, quarterly sales reports in reports/.\n",
    "notes/todo.md": "# To do\n\n- [ ] Renew the TLS certificate before 30 June\n- [x] Book the team offsite\n"
                     "- [ ] Review Bob's pull request #42\n",
    "notes/meeting-2025-06-12.md": "# Team meeting, 12 June 2025\n\nPresent: Alice, Bob, Carol.\n\n"
                                   "- The release moves to 1 July.\n- Carol owns the migration guide.\n",
    "reports/sales-q1.csv": "month,revenue\nJanuary,12000\nFebruary,13500\nMarch,15250\n",
    "reports/sales-q2.csv": "month,revenue\nApril,16100\nMay,15800\nJune,17400\n",
}


def make_files(path: Path) -> Path:
    """A shared folder: a README, two notes and two quarterly sales reports."""
    for name, text in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- memory

ENTITIES = [
    ("Alice Nguyen", "person", ["Backend engineer at Acme", "Leads the payments team", "Prefers email over chat"]),
    ("Bob Okafor", "person", ["Joined Acme in March 2025", "Reviews every payments pull request"]),
    ("Acme", "organization", ["Makes issue-tracking software", "Headquartered in Lisbon"]),
    ("Payments service", "project", ["Written in Go", "Moves to the new billing API in July 2025"]),
]
RELATIONS = [
    ("Alice Nguyen", "Acme", "works_at"),
    ("Bob Okafor", "Acme", "works_at"),
    ("Alice Nguyen", "Payments service", "leads"),
    ("Bob Okafor", "Payments service", "reviews"),
]


def make_memory(path: Path) -> Path:
    """The knowledge graph, in the server's own file format (one JSON object a line)."""
    lines = [{"type": "entity", "name": n, "entityType": t, "observations": o} for n, t, o in ENTITIES]
    lines += [{"type": "relation", "from": a, "to": b, "relationType": r} for a, b, r in RELATIONS]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
