"""A small issue tracker as an MCP server: the example server for tracker.mcpeval.yaml.

Twelve tools over in-memory data, several of them deliberately easy to confuse (as in real trackers):
``list_issues`` (structured filters) vs ``search_issues`` (full text), ``get_issue`` vs
``list_issue_comments``, ``create_issue`` vs ``update_issue``, ``close_issue`` vs ``update_issue(state=...)``.
Every tool really works on the data, so multi-step evaluations can call them; :func:`reset` restores the
seed data.

    python server.py               # serve over stdio
    python server.py --http 8765   # serve streamable HTTP on http://127.0.0.1:8765/mcp

The benchmark imports it in-process: ``server: {python: "server:server"}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

State = Literal["open", "closed"]
Priority = Literal["low", "medium", "high", "urgent"]
CloseReason = Literal["completed", "not_planned", "duplicate"]

IssueKey = Annotated[
    str,
    Field(
        description="Issue key: project key, dash, number, e.g. `WEB-12`.",
        pattern=r"^[A-Za-z]+-\d+$",
    ),
]
ProjectKey = Annotated[str, Field(description="Project key, e.g. `WEB`, `API`, `MOBILE`, `DOCS` (see list_projects).")]
Username = Annotated[str, Field(description="Login name of a tracker user, e.g. `alice`.")]
Limit = Annotated[int, Field(ge=1, le=100, description="Maximum number of results (1-100).")]

READ = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)


# -- data -----------------------------------------------------------------------------------------

@dataclass
class Comment:
    id: int
    author: str
    body: str
    created_at: str


@dataclass
class Issue:
    key: str
    project: str
    title: str
    body: str
    author: str
    created_at: str
    state: State = "open"
    priority: Priority = "medium"
    labels: list[str] = field(default_factory=list)
    assignee: str | None = None
    updated_at: str = ""
    closed_reason: CloseReason | None = None
    comments: list[Comment] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        out["comment_count"] = len(out.pop("comments"))
        out.pop("body")
        return out

    def detail(self) -> dict[str, Any]:
        out = asdict(self)
        out["comment_count"] = len(out.pop("comments"))
        return out


PROJECTS: dict[str, dict[str, str]] = {}
USERS: dict[str, dict[str, str]] = {}
ISSUES: dict[str, Issue] = {}
_comment_ids = itertools.count(1)

# "Now" is fixed so that the data and the benchmark's relative dates stay consistent.
NOW = dt.datetime(2025, 6, 18, 9, 30, tzinfo=dt.UTC)


def _ts(text: str) -> str:
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _now() -> str:
    return NOW.isoformat().replace("+00:00", "Z")


_SEED_ISSUES: list[tuple[str, str, str, str, str, dict[str, Any]]] = [
    # key, title, body, author, created_at, extra fields
    ("WEB-3", "Add dark mode", "Users keep asking for a dark theme. Follow the OS setting by default.", "erin",
     "2025-02-11T10:00:00+00:00", {"labels": ["feature", "ux"], "priority": "low"}),
    ("WEB-12", "Checkout fails for some users", "Clicking Pay does nothing for guest users on Safari 17.",
     "carol", "2025-05-28T14:05:00+00:00", {"labels": ["bug", "checkout"], "assignee": "bob", "priority": "high"}),
    ("WEB-17", "Login times out after 30 seconds", "SSO login hangs and times out; the session cookie is never set.",
     "alice", "2025-06-02T08:40:00+00:00", {"labels": ["bug", "auth"], "assignee": "alice", "priority": "urgent"}),
    ("WEB-20", "Redesign the settings page", "The settings page mixes account and workspace options.",
     "erin", "2025-06-16T11:20:00+00:00", {"labels": ["ux"]}),
    ("API-4", "Webhook retries never stop", "Failed webhook deliveries are retried forever instead of 5 times.",
     "dave", "2025-03-03T09:00:00+00:00",
     {"labels": ["bug", "webhooks"], "state": "closed", "closed_reason": "completed"}),
    ("API-7", "Payments endpoint returns 500 on refunds", "POST /v2/refunds fails with a 500 for partial refunds.",
     "bob", "2025-05-20T16:45:00+00:00", {"labels": ["bug", "payments"], "assignee": "dave", "priority": "high"}),
    ("API-9", "Refund endpoint errors with 500", "Partial refunds crash the payments service.", "carol",
     "2025-06-10T12:00:00+00:00", {"labels": ["bug", "payments"]}),
    ("API-11", "Rate limiter too strict for batch clients", "Batch imports hit 429 after 20 requests.",
     "alice", "2025-06-12T07:15:00+00:00", {"labels": ["performance"], "priority": "medium"}),
    ("MOBILE-3", "App crashes when opening a push notification",
     "TypeError: cannot read properties of undefined (reading 'payload') on Android 14.", "dave",
     "2025-05-05T19:30:00+00:00", {"labels": ["bug", "crash", "android"], "assignee": "erin", "priority": "urgent"}),
    ("MOBILE-5", "Offline mode loses drafts", "Drafts written offline disappear after reconnecting.", "carol",
     "2025-06-03T10:10:00+00:00", {"labels": ["bug", "ios"]}),
    ("MOBILE-8", "Crash on iPad when rotating during upload", "Reproducible on iPadOS 18 with large files.", "bob",
     "2025-06-14T15:00:00+00:00", {"labels": ["crash", "ios"], "priority": "high"}),
    ("DOCS-2", "Document the webhook signature check", "Explain how to verify the X-Signature header.", "dave",
     "2025-04-22T13:00:00+00:00", {"labels": ["docs", "webhooks"], "assignee": "carol"}),
]

_SEED_COMMENTS: list[tuple[str, str, str, str]] = [
    ("WEB-12", "bob", "Reproduced on Safari 17.4; Chrome is fine.", "2025-05-29T09:00:00+00:00"),
    ("WEB-12", "carol", "Support has 14 tickets about this now.", "2025-06-03T11:30:00+00:00"),
    ("WEB-12", "bob", "Root cause: the payment iframe is blocked by ITP. Fix in review.", "2025-06-12T17:10:00+00:00"),
    ("MOBILE-3", "erin", "Only happens when the app was killed before the tap.", "2025-05-06T08:00:00+00:00"),
    ("MOBILE-3", "dave", "Fix shipped in 2.4.1, waiting for confirmation.", "2025-06-11T10:00:00+00:00"),
    ("API-7", "dave", "Partial refunds pass a negative amount to the ledger.", "2025-05-21T09:45:00+00:00"),
]


def reset() -> None:
    """Restore the seed data (for multi-step evaluations that change it)."""
    global _comment_ids
    PROJECTS.clear()
    PROJECTS.update(
        {
            "WEB": {"key": "WEB", "name": "Web app", "lead": "carol"},
            "API": {"key": "API", "name": "Public API", "lead": "dave"},
            "MOBILE": {"key": "MOBILE", "name": "Mobile apps (iOS and Android)", "lead": "erin"},
            "DOCS": {"key": "DOCS", "name": "Documentation", "lead": "carol"},
        }
    )
    USERS.clear()
    for login, name in [("alice", "Alice Nguyen"), ("bob", "Bob Okafor"), ("carol", "Carol Diaz"),
                        ("dave", "Dave Kim"), ("erin", "Erin Walsh")]:
        USERS[login] = {"username": login, "name": name, "email": f"{login}@example.com"}
    ISSUES.clear()
    for key, title, body, author, created, extra in _SEED_ISSUES:
        created = _ts(created)
        ISSUES[key] = Issue(key=key, project=key.split("-")[0], title=title, body=body, author=author,
                            created_at=created, updated_at=created, **extra)
    _comment_ids = itertools.count(1)
    for key, author, body, created in _SEED_COMMENTS:
        ISSUES[key].comments.append(Comment(next(_comment_ids), author, body, _ts(created)))
        ISSUES[key].updated_at = max(ISSUES[key].updated_at, _ts(created))


reset()


def _issue(key: str) -> Issue:
    issue = ISSUES.get(key.upper())
    if issue is None:
        raise ToolError(f"no issue {key!r}")
    return issue


def _project(key: str) -> str:
    if key.upper() not in PROJECTS:
        raise ToolError(f"no project {key!r}; known projects: {', '.join(PROJECTS)}")
    return key.upper()


def _user(name: str) -> str:
    if name not in USERS:
        raise ToolError(f"no user {name!r}; known users: {', '.join(USERS)}")
    return name


def _touch(issue: Issue) -> None:
    issue.updated_at = _now()


# -- tools ----------------------------------------------------------------------------------------

server = MCPServer(
    "tracker",
    instructions="Acme's issue tracker: projects WEB, API, MOBILE, DOCS; issues have keys like WEB-12.",
    log_level="WARNING",
)


@server.tool(annotations=READ)
def list_projects() -> list[dict[str, str]]:
    """List all projects in the tracker with their key, name and lead."""
    return list(PROJECTS.values())


@server.tool(annotations=READ)
def get_user(username: Username) -> dict[str, str]:
    """Get a user's profile: display name and email address."""
    return USERS[_user(username)]


@server.tool(annotations=READ)
def list_issues(
    project: Annotated[ProjectKey | None, Field(description="Only issues of this project.")] = None,
    state: Annotated[Literal["open", "closed", "all"], Field(description="Issue state to return.")] = "open",
    labels: Annotated[
        list[str] | None, Field(description="Only issues that carry all of these labels, e.g. [\"bug\"].")
    ] = None,
    assignee: Annotated[str | None, Field(description="Only issues assigned to this username.")] = None,
    since: Annotated[
        dt.datetime | None, Field(description="Only issues created at or after this RFC 3339 date-time.")
    ] = None,
    limit: Limit = 30,
) -> list[dict[str, Any]]:
    """List issues by structured filters (project, state, labels, assignee, creation date), newest first.

    This does not look at the text of issues; to find issues by words in their title or description use
    search_issues.
    """
    found = []
    for issue in ISSUES.values():
        if project is not None and issue.project != _project(project):
            continue
        if state != "all" and issue.state != state:
            continue
        if labels and not set(labels) <= set(issue.labels):
            continue
        if assignee is not None and issue.assignee != assignee:
            continue
        if since is not None:
            since_utc = since if since.tzinfo else since.replace(tzinfo=dt.UTC)
            if dt.datetime.fromisoformat(issue.created_at) < since_utc:
                continue
        found.append(issue)
    found.sort(key=lambda i: i.created_at, reverse=True)
    return [i.summary() for i in found[:limit]]


@server.tool(annotations=READ)
def search_issues(
    query: Annotated[str, Field(description="Words to look for in issue titles, descriptions and comments.")],
    project: Annotated[ProjectKey | None, Field(description="Only search this project.")] = None,
    state: Annotated[Literal["open", "closed", "all"], Field(description="Issue state to search.")] = "all",
    limit: Limit = 20,
) -> list[dict[str, Any]]:
    """Full-text search over issue titles, descriptions and comments, best matches first."""
    words = [w for w in query.lower().split() if w]
    scored = []
    for issue in ISSUES.values():
        if project is not None and issue.project != _project(project):
            continue
        if state != "all" and issue.state != state:
            continue
        text = " ".join([issue.title, issue.body, *(c.body for c in issue.comments)]).lower()
        score = sum(text.count(w) for w in words)
        if score:
            scored.append((score, issue))
    scored.sort(key=lambda pair: (-pair[0], pair[1].key))
    return [issue.summary() for _, issue in scored[:limit]]


@server.tool(annotations=READ)
def get_issue(issue_key: IssueKey) -> dict[str, Any]:
    """Get one issue: title, description, state, priority, labels, assignee, dates and comment count."""
    return _issue(issue_key).detail()


@server.tool(annotations=READ)
def list_issue_comments(
    issue_key: IssueKey,
    limit: Annotated[int, Field(ge=1, le=100, description="Return only the most recent N comments.")] = 50,
) -> list[dict[str, Any]]:
    """List the comments (discussion) of an issue, oldest first."""
    return [asdict(c) for c in _issue(issue_key).comments[-limit:]]


@server.tool(annotations=WRITE)
def create_issue(
    project: ProjectKey,
    title: Annotated[str, Field(min_length=1, description="Short summary of the issue.")],
    body: Annotated[str | None, Field(description="Longer description (Markdown).")] = None,
    labels: Annotated[list[str] | None, Field(description="Labels to set, e.g. [\"bug\", \"ux\"].")] = None,
    assignee: Annotated[str | None, Field(description="Username to assign the new issue to.")] = None,
    priority: Annotated[Priority, Field(description="Priority of the new issue.")] = "medium",
) -> dict[str, Any]:
    """Create a new issue in a project. Returns the new issue with its key."""
    key = _project(project)
    number = 1 + max((int(k.split("-")[1]) for k in ISSUES if k.startswith(key + "-")), default=0)
    issue = Issue(key=f"{key}-{number}", project=key, title=title, body=body or "", author="me",
                  created_at=_now(), updated_at=_now(), priority=priority, labels=list(labels or []),
                  assignee=_user(assignee) if assignee else None)
    ISSUES[issue.key] = issue
    return issue.detail()


@server.tool(annotations=WRITE)
def update_issue(
    issue_key: IssueKey,
    title: Annotated[str | None, Field(description="New title.")] = None,
    body: Annotated[str | None, Field(description="New description; replaces the old one.")] = None,
    state: Annotated[State | None, Field(description="New state; `open` reopens a closed issue.")] = None,
    priority: Annotated[Priority | None, Field(description="New priority.")] = None,
) -> dict[str, Any]:
    """Edit fields of an existing issue: title, description, state or priority. Omitted fields are kept."""
    issue = _issue(issue_key)
    if title is not None:
        issue.title = title
    if body is not None:
        issue.body = body
    if state is not None:
        issue.state = state
        issue.closed_reason = "completed" if state == "closed" else None
    if priority is not None:
        issue.priority = priority
    _touch(issue)
    return issue.detail()


@server.tool(annotations=WRITE)
def close_issue(
    issue_key: IssueKey,
    reason: Annotated[CloseReason, Field(description="Why the issue is closed.")] = "completed",
    comment: Annotated[str | None, Field(description="Optional closing comment to add.")] = None,
) -> dict[str, Any]:
    """Close an issue with a reason (completed, not planned, or duplicate), optionally with a comment."""
    issue = _issue(issue_key)
    if comment:
        issue.comments.append(Comment(next(_comment_ids), "me", comment, _now()))
    issue.state = "closed"
    issue.closed_reason = reason
    _touch(issue)
    return issue.detail()


@server.tool(annotations=WRITE)
def add_comment(
    issue_key: IssueKey,
    body: Annotated[str, Field(min_length=1, description="Comment text (Markdown).")],
) -> dict[str, Any]:
    """Add a comment to an issue."""
    issue = _issue(issue_key)
    comment = Comment(next(_comment_ids), "me", body, _now())
    issue.comments.append(comment)
    _touch(issue)
    return asdict(comment)


@server.tool(annotations=WRITE)
def assign_issue(
    issue_key: IssueKey,
    assignee: Annotated[str | None, Field(description="Username of the new assignee; null unassigns.")],
) -> dict[str, Any]:
    """Set or remove the assignee of an issue."""
    issue = _issue(issue_key)
    issue.assignee = _user(assignee) if assignee else None
    _touch(issue)
    return issue.summary()


@server.tool(annotations=WRITE)
def add_labels(
    issue_key: IssueKey,
    labels: Annotated[list[str], Field(min_length=1, description="Labels to add; existing labels are kept.")],
) -> dict[str, Any]:
    """Add labels to an issue (existing labels are kept)."""
    issue = _issue(issue_key)
    issue.labels += [label for label in labels if label not in issue.labels]
    _touch(issue)
    return issue.summary()


def main() -> None:
    parser = argparse.ArgumentParser(description="Example issue-tracker MCP server (in-memory data).")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    args = parser.parse_args()
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
