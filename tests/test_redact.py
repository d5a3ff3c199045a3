"""The redactor on its own: by value (environment, parameters at any depth) and by shape (URLs, keys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mcpeval.redact import MASK, Redactor, mask_params, secret_values


def test_values_come_from_secret_names_at_any_depth() -> None:
    params = {"api_base": "http://127.0.0.1:1/v1", "api_key": "sk-live-0123456789",
              "extra_body": {"session_auth": "s3ss10n-abcdef", "tenant": "acme-corporation"},
              "extra_headers": {"X-Trace": "trace-value-123"}}
    assert sorted(secret_values(params)) == ["s3ss10n-abcdef", "sk-live-0123456789", "trace-value-123"]
    assert mask_params(params) == {"api_base": "http://127.0.0.1:1/v1", "api_key": MASK,
                                   "extra_body": {"session_auth": MASK, "tenant": "acme-corporation"},
                                   "extra_headers": MASK}


def test_environment_secrets_but_not_paths_or_short_values(tmp_path: Path) -> None:
    env = {"GITHUB_TOKEN": "ghx-9f8e7d6c5b4a", "PWD": "/work/main", "DB_PWD": "hunter2hunter2",
           "FEATURE_KEY": "on", "SSH_AUTH_SOCK": "/tmp/agent.1", "HOME": "/root", "MY_SECRET_DIR": str(tmp_path)}
    redactor = Redactor.for_run([], env)
    assert redactor.values == ["ghx-9f8e7d6c5b4a", "hunter2hunter2"]
    assert redactor.text("token ghx-9f8e7d6c5b4a in /work/main, pw hunter2hunter2, on") == \
        f"token {MASK} in /work/main, pw {MASK}, on"


@pytest.mark.parametrize(("text", "expected"), [
    ("http://alice:s3cret@host/mcp", f"http://alice:{MASK}@host/mcp"),
    ("https://host/mcp?token=abc123&team=core", f"https://host/mcp?token={MASK}&team=core"),
    ("https://host/x?team=core&api_key=k&sig=zz#frag", f"https://host/x?team=core&api_key={MASK}&sig={MASK}#frag"),
    ("Authorization: Bearer abcdefgh.ijklmnop", f"Authorization: Bearer {MASK}"),
    ("Incorrect API key provided: sk-proj-abcdefghijklmnop.", f"Incorrect API key provided: sk-proj-{MASK}."),
    ("ghp_0123456789abcdefghij and AKIAABCDEFGHIJKLMNOP", f"ghp_{MASK} and {MASK}"),
    ("https://host/mcp?team=core", "https://host/mcp?team=core"),
    ("list_issues lists the issues of a repository", "list_issues lists the issues of a repository"),
])
def test_shapes(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


def test_data_masks_keys_and_values_and_keeps_non_strings() -> None:
    redactor = Redactor(["verysecretvalue"])  # a model may put a secret in an argument's name
    data = {"verysecretvalue": ["a verysecretvalue b", 3, None, {"k": ("verysecretvalue",)}], 7: "x"}
    assert redactor.data(data) == {MASK: [f"a {MASK} b", 3, None, {"k": (MASK,)}], 7: "x"}


def test_a_longer_secret_containing_a_shorter_one_is_masked_whole() -> None:
    redactor = Redactor(["abcdefgh", "abcdefgh-ijklmnop"])
    assert redactor.text("x abcdefgh-ijklmnop y abcdefgh") == f"x {MASK} y {MASK}"


def test_the_quick_filter_never_skips_a_shape() -> None:
    """The pre-check that lets most strings skip the shape patterns is a superset of them: on seeded random
    texts built from every shape's pieces, masking with it equals applying every pattern."""
    import random

    from pytest_mcpeval.redact import _SHAPES

    pieces = ["https://", "http://", "user:", "pw@", "@", "?", "&", "#", ";", "token=", "api_key=", "Sig=", "x=",
              "Bearer ", "BASIC ", "token ", "sk-", "sk-ant-", "ghp_", "GHP_", "github_pat_", "xoxb-", "glpat-",
              "hf_", "AKIA", "rk_live_", "pk_test_", "abcdefghijklmnopqrstuvwxyz0123", "ABCDEFGHIJKLMNOP", " ", "/",
              ".", "-", "_", "é", "\n"]
    rng = random.Random(20261130)
    redactor = Redactor(["s3cr3t-value-1234"])
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        full = text.replace("s3cr3t-value-1234", "REDACTED")
        for pattern, replacement in _SHAPES:
            full = pattern.sub(replacement, full)
        assert redactor.text(text) == full, text
        assert redactor.text(text) == full  # and from the memo


def test_the_json_shortcut_of_data_never_skips_a_secret() -> None:
    """``data`` returns its argument untouched when its JSON text matches nothing; JSON escapes whitespace,
    quotes, backslashes and control characters, so on seeded random data built from those and every
    shape's pieces (in values and keys), the shortcut equals the walk."""
    import random

    pieces = ["https://", "u:", "pw@", "?", "&", "token=", "Bearer", "basic", "token", " ", "\t", "\n", "\r",
              "\x0b", "\x1f", "\xa0", "\u2028", '"', "\\", "sk-", "ghp_", "AKIA", "rk_live_",
              "abcdefghijklmnopqrstuvwxyz0123", "ABCDEFGHIJKLMNOP", "x", "é", 'se"cr\\et\tvalue', "plainsecret9"]
    rng = random.Random(20261130)
    redactor = Redactor(['se"cr\\et\tvalue', "plainsecret9"])
    skipped = 0
    for _ in range(10_000):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))) for _ in range(3)]
        data = {"id": "c1", texts[0]: [texts[1], {"n": 1, "t": texts[2]}]}
        masked = redactor.data(data)
        assert masked == redactor._walk(data), data
        skipped += masked is data
    assert 100 < skipped < 9_900  # both paths were taken (582 skipped)


def test_the_ascii_split_of_the_json_filter_equals_the_regex() -> None:
    """maybe_shaped_json (lower case and three plain searches, for ASCII text) says what the case-blind
    regex says, on seeded random texts of every shape's pieces in mixed case, escapes and non-ASCII."""
    import random

    from pytest_mcpeval.redact import _MAYBE_SHAPED_JSON, maybe_shaped_json

    pieces = ["https://", "HTTP:/", "/", ":", "?", "&", "#", ";", "=", "to-k.en=", "Bearer", "BASIC", "ToKeN", " ",
              "\\t", "\\u00", "\\n", "\\x", "\t", "sk-", "SK-", "Gh", "p_", "GHO_", "github_PAT_", "XoXb-", "glpat-",
              "HF_", "AkIa", "rk_LIVE_", "k_test_", "abc", "Z9", "é", "\u212a_live_", "\u017fk-", "\"", "x"]
    rng = random.Random(20261130)
    found = 0
    for _ in range(30_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        expected = _MAYBE_SHAPED_JSON.search(text) is not None
        assert maybe_shaped_json(text) is expected, text
        found += expected
    assert 3_000 < found < 27_000  # both answers were seen


@pytest.mark.parametrize(("name", "secret"), [
    ("x-api-key", True), ("X-Auth-Token", True), ("session_auth", True), ("session.auth", True), ("apiKey", True),
    ("DB_PASSWORD", True), ("Authorization", True), ("tenant", False), ("X-Request-Id", False), ("monkey", False),
    ("max_tokens", False), ("thinking.budget_tokens", False), ("access_token", True),
])
def test_a_name_looks_secret_whatever_its_separators_and_case(name: str, secret: bool) -> None:
    from pytest_mcpeval.redact import secret_name

    assert secret_name(name) is secret
    assert (list(secret_values({"extra_body": {name: "value-of-it-1"}})) == ["value-of-it-1"]) is secret


def test_a_servers_secrets_come_from_its_flags_env_headers_and_url() -> None:
    from pytest_mcpeval.redact import command_secrets, environment_secrets, header_secrets, url_secrets

    assert command_secrets(["npx", "srv", "--api-key=k3y-value-1", "--token", "t0ken-value-2", "-k", "short-flag-3",
                            "--verbose", "GITHUB_TOKEN=g1thub-value-4", "--name=plain-value-5",
                            "https://host/mcp/token/p4th-value-6"]) == \
        ["k3y-value-1", "t0ken-value-2", "g1thub-value-4", "p4th-value-6"]
    assert command_secrets(["--token", "--verbose"]) == []  # a flag, not its value
    assert environment_secrets({"DB_PASSWORD": "hunter2hunter2", "LOG_LEVEL": "debug", "DATA_DIR": "/srv/data"}) \
        == ["hunter2hunter2"]
    assert header_secrets({"Authorization": "Bearer abcdefgh123", "X-Api-Key": "k3y", "Accept": "application/json"}) \
        == ["Bearer abcdefgh123", "abcdefgh123", "k3y", "k3y"]
    url = "https://bob:pa%24%24word99@host/mcp/a1B2c3D4e5F6g7H8i9J0kLmN/auth/callback?team=core&key=v4lue-12"
    assert url_secrets(url) == ["pa%24%24word99", "pa$$word99", "v4lue-12", "v4lue-12", "a1B2c3D4e5F6g7H8i9J0kLmN"]
    assert url_secrets("http://127.0.0.1:8000/mcp") == [] and url_secrets("http://[::1") == []


def test_learnt_secrets_are_masked_from_then_on_and_listed() -> None:
    redactor = Redactor(["configured-secret"])
    assert redactor.text("a learnt-secret-1") == "a learnt-secret-1"
    assert redactor.add(["learnt-secret-1", "short", "configured-secret"]) == ["learnt-secret-1"]
    assert redactor.text("a learnt-secret-1, configured-secret") == f"a {MASK}, {MASK}"
    assert redactor.learned == ["learnt-secret-1"]  # what an xdist worker hands to the controller


def test_the_cache_is_masked_by_value_only() -> None:
    """What the response cache stores: the run's secret values masked, ordinary text that has the shape of a
    credential ("basic information", "token counting") kept, so a reply replays as it was sent and scored."""
    from pytest_mcpeval.redact import Redactor

    redactor = Redactor(["s3cr3t-value-123456"])
    entry = {"reply": {"content": "basic information, token counting, s3cr3t-value-123456",
                       "thinking_blocks": [{"thinking": "Bearer abcdefghijkl"}]}}
    assert redactor.data_by_value(entry) == {
        "reply": {"content": "basic information, token counting, REDACTED",
                  "thinking_blocks": [{"thinking": "Bearer abcdefghijkl"}]}}
    assert redactor.data(entry)["reply"]["thinking_blocks"][0]["thinking"] != "Bearer abcdefghijkl"  # the report's
    untouched = {"a": ["basic information"]}
    assert redactor.data_by_value(untouched) is untouched


def test_unclosed_json_in_a_reply_is_no_call_and_no_recursion() -> None:
    from pytest_mcpeval.models.text_calls import find_text_calls

    assert find_text_calls("[" * 5000 + "1", {"get_me"}) == []
    assert find_text_calls("[" * 500 + "1," * 400_000, {"get_me"}) == []  # was quadratic: 7.5 s
    assert find_text_calls('{"name": "get_me", "arguments": {}} ' + "[" * 5000, {"get_me"})[0].name == "get_me"


def test_safe_data_masks_and_replaces_lone_surrogates_in_one_pass() -> None:
    """What a case result is made as it comes out: unchanged (the same object) when clean; a lone surrogate becomes
    U+FFFD (keys too), a secret's shape is masked, and both at once; a value that is not JSON is walked."""
    redactor = Redactor()
    clean = {"tool": "get_me", "args": {"who": "octocat", "n": 1.5}, "content": "café 😀"}
    assert redactor.safe_data(clean) is clean
    lone = "\ud83d"
    assert redactor.safe_data({f"k{lone}": [f"x{lone}", 1]}) == {"k\ufffd": ["x\ufffd", 1]}
    token = "Bearer abcdefghijklmnopqrstuvwxyz012345"
    assert redactor.safe_data({"note": token}) == {"note": f"Bearer {MASK}"}
    assert redactor.safe_data({"note": f"{token} {lone}"}) == {"note": f"Bearer {MASK} \ufffd"}
    assert redactor.safe_data({"when": Path("x"), "note": lone}) == {"when": Path("x"), "note": "\ufffd"}
