"""Expected-argument matchers: BFCL-style literal normalisation, matcher dicts and compile errors."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mcpeval.benchmark.matchers import (
    MatcherError,
    bfcl_normalise,
    check_object,
    compile_args,
    compile_value,
    values_equal,
)

Z = "2025-04-01T00:00:00Z"

LITERALS: list[tuple[Any, Any, bool]] = [
    # numbers
    (1, 1, True),
    (1, 1.0, True),
    (1.0, 1, True),
    (0.5, 0.5, True),
    (1, 2, False),
    (1.5, 1.4999, False),
    # bool is not int
    (True, True, True),
    (False, False, True),
    (True, 1, False),
    (1, True, False),
    (False, 0, False),
    (0.0, False, False),
    (True, False, False),
    # numbers vs strings
    ("123", 123, False),
    (123, "123", False),
    ("1.0", 1.0, False),
    # strings are exact otherwise
    ("abc", "abc", True),
    ("abc", "ABC", False),
    ("abc", "abc ", False),
    ("", "", True),
    # None
    (None, None, True),
    (None, "", False),
    (None, 0, False),
    (None, False, False),
    ("", None, False),
    (0, None, False),
    # lists / tuples
    ([1, 2], [1, 2], True),
    ([1, 2], (1, 2), True),
    ((1, 2), [1.0, 2.0], True),
    ([1, 2], [2, 1], False),
    ([1, 2], [1, 2, 3], False),
    ([], [], True),
    ([1], 1, False),
    ([True], [1], False),
    # mappings: key order irrelevant, same keys required
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
    ({"a": 1}, {"a": 1, "b": 2}, False),
    ({"a": 1, "b": 2}, {"a": 1}, False),
    ({"a": [1, {"x": 2}]}, {"a": [1.0, {"x": 2.0}]}, True),
    ({"a": None}, {}, False),
    ({}, {}, True),
    ({}, [], False),
    # RFC 3339 instants
    (Z, "2025-04-01T02:00:00+02:00", True),
    ("2025-04-01T02:00:00+02:00", Z, True),
    (Z, "2025-03-31T19:00:00-05:00", True),
    (Z, "2025-04-01T00:00:00+00:00", True),
    (Z, "2025-04-01T00:00:00.000Z", True),
    (Z, "2025-04-01t00:00:00z", True),
    (Z, "2025-04-01 00:00:00Z", True),
    ("2025-04-01T00:00:00.5Z", "2025-04-01T01:00:00.500+01:00", True),
    ("2025-04-01T00:00:00.5Z", "2025-04-01T00:00:00.25Z", False),
    (Z, "2025-04-01T00:00:01Z", False),
    (Z, "2025-04-01T00:00:00+01:00", False),
    (Z, "2025-04-01", False),
    ("2025-04-01", Z, False),
    ("2025-04-01", "2025-04-01", True),
    (Z, "2025-04-01T00:00:00", False),  # no offset: not an RFC 3339 date-time
    ("2025-04-01T00:00:00", "2025-04-01T00:00:00Z", False),
    (Z, "2025-04-01T00:00Z", False),
    (Z, Z + " ", False),
    ("2025-04-01T25:00:00Z", "2025-04-02T01:00:00Z", False),  # invalid hour
]


@pytest.mark.parametrize(("expected", "actual", "ok"), LITERALS)
def test_values_equal(expected: Any, actual: Any, ok: bool) -> None:
    assert values_equal(expected, actual) is ok
    assert compile_value(expected).matches(actual) is ok


def test_large_integers_are_not_rounded() -> None:
    assert not values_equal(2**53 + 1, 2**53)


def test_instants_differing_below_a_microsecond() -> None:
    assert not values_equal("2025-04-01T00:00:00.1234567Z", "2025-04-01T00:00:00.1234561Z")


MATCHERS: list[tuple[Any, Any, bool]] = [
    # any_of, including matchers inside
    ({"any_of": ["open", "closed"]}, "open", True),
    ({"any_of": ["open", "closed"]}, "all", False),
    ({"any_of": [1, "1"]}, 1.0, True),
    ({"any_of": [{"regex": "v\\d+"}, None]}, "v12", True),
    ({"any_of": [{"regex": "v\\d+"}, None]}, None, True),
    ({"any_of": [{"regex": "v\\d+"}, None]}, "v", False),
    ({"any_of": [{"approx": 1.0, "tol": 0.1}, {"text": "one"}]}, "ONE", True),
    ({"any_of": [[1, 2], [2, 1]]}, [2, 1], True),
    ({"any_of": [Z]}, "2025-04-01T02:00:00+02:00", True),
    # regex is a full match
    ({"regex": "a+"}, "aaa", True),
    ({"regex": "a+"}, "aaab", False),
    ({"regex": "a+"}, "baaa", False),
    ({"regex": "a+"}, "", False),
    ({"regex": "bug"}, "bug-report", False),
    ({"regex": "\\d+"}, "123", True),
    ({"regex": "\\d+"}, 123, False),
    ({"regex": ".*"}, None, False),
    ({"regex": "(?i)readme\\.md"}, "README.md", True),
    # approx: absolute tolerance, numbers only
    ({"approx": 1.0}, 1.0000001, True),
    ({"approx": 1.0}, 1.00001, False),
    ({"approx": 1.0, "tol": 0.1}, 1.05, True),
    ({"approx": 1.0, "tol": 0.1}, 0.95, True),
    ({"approx": 1.0, "tol": 0.1}, 1.2, False),
    ({"approx": 10, "tol": 1}, 11, True),
    ({"approx": 1.0, "tol": 0}, 1, True),
    ({"approx": 1.0, "tol": 0}, 1.0000001, False),
    ({"approx": 1.0}, "1.0", False),
    ({"approx": 1.0}, True, False),
    ({"approx": 0.0}, None, False),
    # text: BFCL normalisation
    ({"text": "Update installation guide"}, "update-installation_guide", True),
    ({"text": "Update installation guide"}, "UPDATE INSTALLATION GUIDE.", True),
    ({"text": "a,b./c-d_e*f^g"}, "abcdefg", True),
    ({"text": "it's"}, 'IT"S', True),
    ({"text": "Update installation guide"}, "Update install guide", False),
    ({"text": "abc"}, "a:b:c", False),
    ({"text": "123"}, 123, False),
    # equals: literal, also for matcher-looking objects
    ({"equals": {"regex": "x"}}, {"regex": "x"}, True),
    ({"equals": {"regex": "x"}}, "x", False),
    ({"equals": {"regex": "x"}}, {"regex": "x", "y": 1}, False),
    ({"equals": {"regex": "x"}}, {"regex": "xx"}, False),
    ({"equals": [1, 2]}, (1.0, 2.0), True),
    ({"equals": None}, None, True),
    ({"equals": None}, "None", False),
    ({"equals": True}, 1, False),
    # ignore
    ({"ignore": True}, "anything", True),
    ({"ignore": True}, None, True),
    ({"ignore": True}, {"a": [1]}, True),
    ({"optional": True}, 5, True),
    # optional does not loosen a present value
    ({"regex": "a+", "optional": True}, "aa", True),
    ({"regex": "a+", "optional": True}, "b", False),
    # nested lists and objects with matchers inside
    ([{"regex": "bug|fix"}, "docs"], ["fix", "docs"], True),
    ([{"regex": "bug|fix"}, "docs"], ["docs", "fix"], False),
    ([{"regex": "bug|fix"}, "docs"], ["fix"], False),
    ([{"regex": "bug|fix"}, "docs"], "fix", False),
    ({"labels": [{"text": "Good First Issue"}], "n": {"approx": 3, "tol": 0.5}},
     {"n": 3.2, "labels": ["good-first-issue"]}, True),
    ({"labels": [{"text": "Good First Issue"}], "n": {"approx": 3, "tol": 0.5}},
     {"n": 4, "labels": ["good-first-issue"]}, False),
    ({"a": {"b": {"c": {"any_of": [1, 2]}}}}, {"a": {"b": {"c": 2}}}, True),
    ({"a": {"b": {"c": {"any_of": [1, 2]}}}}, {"a": {"b": {"c": 3}}}, False),
    ({"a": 1, "b": {"regex": "x", "optional": True}}, {"a": 1}, True),
    ({"a": 1, "b": {"regex": "x", "optional": True}}, {"a": 1, "b": "y"}, False),
    ({"a": 1, "b": {"ignore": True}}, {"a": 1}, True),
    ({"a": 1}, {"a": 1, "extra": 2}, False),
    ({"a": 1}, {}, False),
    ({"a": 1}, [("a", 1)], False),
    ({"a": None}, {"a": None}, True),
    ({"a": None}, {}, False),  # None is not "missing"
    ({}, {}, True),
    ({}, {"a": 1}, False),
]


@pytest.mark.parametrize(("expected", "actual", "ok"), MATCHERS)
def test_matcher(expected: Any, actual: Any, ok: bool) -> None:
    assert compile_value(expected).matches(actual) is ok


def test_check_object_missing_optional_and_extras() -> None:
    m = compile_args({"a": 1, "b": {"regex": "x", "optional": True}, "c": {"ignore": True}, "d": 2})
    assert check_object(m, {"a": 1, "d": 3, "z": 0}, allow_extra=True) == ["d"]
    assert sorted(check_object(m, {"a": 1, "d": 3, "z": 0}, allow_extra=False)) == ["d", "z"]
    assert check_object(m, {"b": "y", "d": 2}, allow_extra=True) == ["b", "a"]
    assert check_object(m, {"a": 1.0, "d": 2, "b": "x"}, allow_extra=False) == []


def test_optional_flags_and_kinds() -> None:
    assert compile_value({"regex": "a", "optional": True}).optional
    assert not compile_value({"regex": "a"}).optional
    assert not compile_value({"regex": "a", "optional": False}).optional
    assert compile_value({"ignore": True}).optional
    assert compile_value({"optional": True}).kind == "ignore"
    assert compile_value({"a": 1}).kind == "object"
    assert compile_value([1]).kind == "list"
    assert compile_value("x").kind == "literal"
    assert compile_value({"approx": 2, "tol": 1}).tol == 1.0


@pytest.mark.parametrize(
    ("raw", "description"),
    [
        ("x", "x"),
        ([1, {"regex": "a"}], [1, {"regex": "a"}]),
        ({"k": {"any_of": [1, {"text": "T"}]}}, {"k": {"any_of": [1, {"text": "T"}]}}),
        ({"approx": 1, "optional": True}, {"approx": 1.0, "tol": 1e-6, "optional": True}),
        ({"equals": {"regex": "x"}}, {"equals": {"regex": "x"}}),
        ({"ignore": True}, {"ignore": True, "optional": True}),
    ],
)
def test_describe(raw: Any, description: Any) -> None:
    assert compile_value(raw).describe() == description


def test_bfcl_normalise() -> None:
    assert bfcl_normalise("Hello, World. A/B-C_D*E^F 'q'") == 'helloworldabcdef"q"'


ERRORS: list[tuple[Any, tuple[str | int, ...], str]] = [
    ({"regx": "a"}, ("q",), "unknown matcher `regx`; did you mean `regex`?"),
    ({"anyof": [1]}, ("q",), "did you mean `any_of`?"),
    ({"txt": "a"}, ("q",), "did you mean `text`?"),
    ({"any_of": []}, ("q", "any_of"), "`any_of` takes a non-empty list of accepted values"),
    ({"any_of": "a"}, ("q", "any_of"), "`any_of` takes a non-empty list"),
    ({"regex": "("}, ("q", "regex"), "invalid regular expression: missing ), unterminated subpattern"),
    ({"regex": 5}, ("q", "regex"), "`regex` takes a string"),
    ({"tol": 1, "equals": 2}, ("q", "tol"), "`tol` only goes with `approx`"),
    ({"tol": 1}, ("q", "tol"), "`tol` only goes with `approx`"),
    ({"any_of": [1], "regex": "a"}, ("q",), "a matcher takes one of equals, any_of, regex, approx, text, ignore; "
     "found any_of, regex"),
    ({"ignore": False}, ("q", "ignore"), "write `ignore: true`"),
    ({"ignore": "yes"}, ("q", "ignore"), "write `ignore: true`"),
    ({"any_of": [1], "foo": 2}, ("q", "foo"), "unknown matcher key `foo` (matcher keys: any_of, approx, equals"),
    ({"regex": "a", "optionl": True}, ("q", "optionl"), "unknown matcher key `optionl`; did you mean `optional`?"),
    ({"regex": "a", "optional": "yes"}, ("q", "optional"), "`optional` must be true or false"),
    ({"approx": "1"}, ("q", "approx"), "`approx` takes a finite number"),
    ({"approx": True}, ("q", "approx"), "`approx` takes a finite number"),
    ({"approx": 1, "tol": -1}, ("q", "tol"), "`tol` takes a non-negative number"),
    ({"approx": 1, "tol": "0.1"}, ("q", "tol"), "`tol` takes a non-negative number"),
    ({"text": 3}, ("q", "text"), "`text` takes a string"),
    ({"equals": {1, 2}}, ("q", "equals"), "`equals` takes a JSON value"),
    ({"any_of": [1, {"regex": "("}]}, ("q", "any_of", 1, "regex"), "invalid regular expression"),
    ({"f": {"labels": ["ok", {"regx": "b"}]}}, ("q", "f", "labels", 1), "did you mean `regex`?"),
    ([1, {"any_of": []}], ("q", 1, "any_of"), "non-empty list"),
    (b"bytes", ("q",), "unsupported value of type bytes"),
    ({"equals": 1, "text": "a"}, ("q",), "found equals, text"),
]


@pytest.mark.parametrize(("raw", "path", "message"), ERRORS)
def test_matcher_errors(raw: Any, path: tuple[str | int, ...], message: str) -> None:
    with pytest.raises(MatcherError) as info:
        compile_args({"q": raw})
    assert info.value.path == path
    assert message in info.value.message
    assert str(info.value) == info.value.message


def test_unknown_single_key_suggests_equals() -> None:
    with pytest.raises(MatcherError, match=r"write \{equals: \{\.\.\.\}\}"):
        compile_value({"regexp": "a"})


def test_literal_objects_with_unrelated_keys_are_not_errors() -> None:
    assert compile_value({"owner": "octo"}).matches({"owner": "octo"})
    assert compile_value({"zzz": 1, "regx": 2}).matches({"regx": 2, "zzz": 1})


def test_nan_tolerance_is_rejected() -> None:
    with pytest.raises(MatcherError):
        compile_value({"approx": 1, "tol": float("nan")})
