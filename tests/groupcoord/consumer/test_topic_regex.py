"""Subscription regexes: RE2J's syntax and errors, full matching, linear time, internal topics."""

from __future__ import annotations

import random
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.consumer.topic_regex import (
    InvalidTopicRegex,
    compile_topic_regex,
    matching_topics,
    parse_topic_regex,
)


def matches(pattern: str, name: str) -> bool:
    ours = bool(matching_topics(pattern, [name]))
    # The Python pattern we hand out must agree with the automaton.
    assert ours == (compile_topic_regex(pattern).fullmatch(name) is not None), (pattern, name)
    return ours


@pytest.mark.parametrize("pattern,name,expected", [
    ("orders-.*", "orders-eu", True),
    ("orders-.*", "my-orders-eu", False),          # full match, not search
    ("orders", "orders-eu", False),
    ("a(?i)b|c", "C", True),                        # (?i) holds to the end of the group, across |
    ("a(?i)b|c", "aB", True),
    ("a(?i)b|c", "AB", False),
    ("(?i:A)b", "ab", True),
    ("(?i:A)b", "aB", False),
    (r"\Qa.b\E.*", "a.bc", True),
    (r"\Qa.b\E", "axb", False),
    (r"\Qab*", "ab*", True),                        # \Q without \E quotes to the end
    (r"\Qab\E*", "abbb", True),                     # the quantifier takes the last quoted character
    (r"\Qab\E*", "", False),
    (r"a{{", "a{{", True),
    (r"(?i)k", "\u212a", True),                     # KELVIN SIGN is in k's case orbit
    (r"(?i)\p{Ll}", "K", True),                     # RE2J's fold table for Ll adds K and S only
    (r"(?i)\p{Ll}", "A", False),
    (r"(?i)\p{Lu}", "a", True),
    (r"[[:alpha:]]+\d", "abc1", True),
    (r"[[:^digit:]]+", "a-b", True),
    (r"\pL+", "Topic", True),
    (r"\p{Lu}.*", "topic", False),
    (r"\PL+", "1.2", True),
    (r"\p{^Lu}+", "abc", True),
    (r"\p{Latin}+-\p{Common}", "abc-1", True),
    (r"\p{Greek}|x", "x", True),
    (r"(?i)\P{Lu}", "a", False),                    # RE2J folds before negating
    (r"\x41\x{62}\101", "AbA", True),
    (r"a{,3}", "a{,3}", True),                      # a literal in RE2 ({0,3} in Python)
    (r"a{01}", "a{01}", True),                      # leading zero: a literal in RE2
    (r"a{2,3}", "aaa", True),
    (r"a{2,3}", "aaaa", False),
    (r"a{2,}", "aaaaa", True),
    (r"a*{", "aa{", True),
    (r"^*a", "a", True),                            # RE2 may repeat an assertion
    (r"a(?i)*", "aaa", True),                       # the quantifier applies to the a
    (r"\d+", "\u0661", False),                      # \d is ASCII in RE2
    (r"\w+", "é", False),
    (r"x$", "x\n", False),                          # $ is the end of the text without (?m)
    (r"(?m)x$\n", "x\n", True),
    (r"\bfoo\b", "foo", True),
    (r"a\Bb", "ab", True),
    (r"(?s).", "\n", True),
    (r".", "\n", False),
    (r"(?P<name>a)(?<n2>b)", "ab", True),
    (r"(?U)a+", "aaa", True),
    (r"[]a]+", "]a", True),
    (r"[^]a]", "b", True),
    (r"[a-]+", "-a", True),
    (r"\é", "é", True),                             # escaped non-ASCII is itself in RE2J
    (r"", "", True),
    (r"a|", "", True),
    (r"()", "", True),
])
def test_matching(pattern, name, expected):
    assert matches(pattern, name) is expected


@pytest.mark.parametrize("pattern,description", [
    (r"(a)\1", "invalid escape sequence"),                  # backreference
    (r"(?=a)", "invalid or unsupported Perl syntax"),       # lookahead
    (r"(?!a)", "invalid or unsupported Perl syntax"),
    (r"(?<=a)b", "invalid named capture"),                  # lookbehind (RE2J reads a name)
    (r"(?<!a)b", "invalid named capture"),
    (r"(?>a)", "invalid or unsupported Perl syntax"),       # atomic group
    (r"(?(1)a|b)", "invalid or unsupported Perl syntax"),   # conditional
    (r"(?#c)", "invalid or unsupported Perl syntax"),       # comment
    (r"(?P=n)", "invalid or unsupported Perl syntax"),
    (r"(?x)a", "invalid or unsupported Perl syntax"),       # flag RE2 does not have
    (r"(?-)", "invalid or unsupported Perl syntax"),
    (r"(?i-)", "invalid or unsupported Perl syntax"),
    (r"a*+", "invalid nested repetition operator"),         # possessive
    (r"a++", "invalid nested repetition operator"),
    (r"a**", "invalid nested repetition operator"),
    (r"a*?+", "invalid nested repetition operator"),
    (r"a{2}{3}", "invalid nested repetition operator"),
    (r"a{1001}", "invalid repeat count"),
    (r"a{3,2}", "invalid repeat count"),
    (r"*", "missing argument to repetition operator"),
    (r"(*)", "missing argument to repetition operator"),
    (r"a|*", "missing argument to repetition operator"),
    (r"\Z", "invalid escape sequence"),
    (r"\C", "invalid escape sequence"),
    (r"\e", "invalid escape sequence"),
    (r"\8", "invalid escape sequence"),
    (r"\x{110000}", "invalid escape sequence"),
    (r"\xZ1", "invalid escape sequence"),
    (r"[a-\d]", "invalid escape sequence"),
    (r"[\b]", "invalid escape sequence"),
    ("\\", "trailing backslash at end of expression"),
    (r"(", "missing closing )"),
    (r"a)", "regexp/syntax: internal error"),            # RE2J's parse stack underflows
    (r"a{+", "invalid nested repetition operator"),     # RE2J counts a literal { as a repetition
    (r"x{*", "invalid nested repetition operator"),
    (r"[a", "missing closing ]"),
    (r"[b-a]", "invalid character class range"),
    (r"\p{Foo}", "invalid character class range"),
    (r"\p", "invalid character class range"),
    (r"[[:foo:]]", "invalid character class range"),
    (r"(?P<>a)", "invalid named capture"),
    (r"(?P<a-b>a)", "invalid named capture"),
    (r"(?P<n>a)(?P<n>b)", "duplicate capture group name"),
    ("(" * 150 + ")" * 150, "expression nests too deeply"),
    (r"((a{1000}){1000})", "expression too large"),
])
def test_rejected_as_re2j_rejects(pattern, description):
    with pytest.raises(InvalidTopicRegex) as info:
        compile_topic_regex(pattern)
    assert info.value.description == description
    assert str(info.value).startswith(f"error parsing regexp: {description}: `")
    with pytest.raises(InvalidTopicRegex):
        matching_topics(pattern, ["a"])


def test_internal_topics_match_as_in_kafka_unless_excluded():
    """Kafka 4.0's coordinator matches regexes against every topic, internal ones included."""
    names = ["__consumer_offsets", "__transaction_state", "__share_group_state", "orders", "_private"]
    assert matching_topics(".*", names) == set(names)
    assert matching_topics(".*", names, exclude_internal=True) == {"orders", "_private"}
    assert matching_topics("__consumer_offsets", names, exclude_internal=True) == set()


def test_linear_time_on_backtracking_bombs():
    """Patterns that make a backtracking engine take exponential time stay fast (RE2's guarantee)."""
    names = ["a" * 249, "a" * 100 + "b", "x" * 200]
    started = time.monotonic()
    assert matching_topics("(a|a)*b", names) == {"a" * 100 + "b"}
    assert matching_topics("(a*)*c", names) == set()
    assert matching_topics("(.*)*(x.*)*y", names) == set()
    assert matching_topics("a*a*a*a*a*a*a*a*a*a*b", names) == {"a" * 100 + "b"}
    assert time.monotonic() - started < 2.0


def test_many_topics():
    names = [f"orders-{i}" for i in range(5000)] + [f"payments-{i}" for i in range(5000)]
    assert len(matching_topics(r"orders-\d+", names)) == 5000
    assert matching_topics(r"(?i)PAYMENTS-4999|orders-0", names) == {"payments-4999", "orders-0"}


def test_compile_is_cached_and_returns_re_pattern():
    compiled = compile_topic_regex("t.*")
    assert isinstance(compiled, re.Pattern)
    assert compile_topic_regex("t.*") is compiled
    assert matching_topics(compiled, ["t1", "x"]) == {"t1"}
    assert parse_topic_regex("a") is not None


# Differential test: on the syntax both dialects share, with the same meaning, our automaton
# agrees with Python's re on short names (where backtracking is cheap).
_ALPHABET = "ab.-_1"


def _atoms():
    literal = st.sampled_from(["a", "b", "1", "-", "_", r"\.", "."])
    cls = st.sampled_from(["[ab]", "[^a]", "[a-b1]", r"[\d_]", "[.-]", r"\d", r"\w", r"\W"])
    return st.one_of(literal, cls)


def _regexes():
    def extend(inner):
        group = inner.map(lambda r: f"({r})")
        ncgroup = inner.map(lambda r: f"(?:{r})")
        icase = inner.map(lambda r: f"(?i:{r})")
        concat = st.lists(inner, min_size=2, max_size=3).map("".join)
        alt = st.lists(inner, min_size=2, max_size=3).map("|".join).map(lambda r: f"({r})")
        quant = st.tuples(st.one_of(group, ncgroup, _atoms()),
                          st.sampled_from(["*", "+", "?", "{2}", "{1,2}", "{0,}", "*?", "+?"])).map("".join)
        return st.one_of(group, ncgroup, icase, concat, alt, quant)
    return st.recursive(_atoms(), extend, max_leaves=6)


@settings(max_examples=250, deadline=None)
@given(_regexes(), st.lists(st.text(_ALPHABET, max_size=6), min_size=1, max_size=8))
def test_agrees_with_python_re_on_shared_syntax(pattern, names):
    python = re.compile(pattern, re.ASCII)
    for name in names:
        assert matches(pattern, name) == (python.fullmatch(name) is not None), (pattern, name)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab()[]|*+?{}^$\\.-,:0123456789PpQEdwsiz<>=!#", max_size=12))
def test_arbitrary_input_never_crashes(pattern):
    """Any string is either a pattern (and then matching works) or an InvalidTopicRegex."""
    try:
        compile_topic_regex(pattern)
    except InvalidTopicRegex:
        return
    matching_topics(pattern, ["ab", "a.b", "", "ba-1"])


def test_bounded_cache_starts_over_without_changing_results(monkeypatch):
    """A tiny DFA cache forces restarts in the middle of names; results stay those of re."""
    from kafkapy.groupcoord.consumer import topic_regex

    monkeypatch.setattr(topic_regex.TopicRegex, "_CACHE_LIMIT", 20)
    rnd = random.Random(5)
    names = ["".join(rnd.choice("ab._-1") for _ in range(rnd.randint(0, 24))) for _ in range(400)]
    names += ["ab" * 10 + "a" * 6, "ba" * 8]
    for pattern in (r"(a|b)*a(a|b){5}", r"\b(a|b)+\b.*", r"[ab]{2,5}\.?.*1", r"(?m)^a.*$"):
        program = topic_regex.TopicRegex(pattern, topic_regex.parse_topic_regex(pattern))
        python = re.compile(topic_regex.compile_topic_regex(pattern).pattern)
        for name in names:
            assert program.fullmatch(name) == (python.fullmatch(name) is not None), (pattern, name)
