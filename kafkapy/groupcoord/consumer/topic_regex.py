"""Topic subscription regular expressions of KIP-848 consumer groups: RE2J's syntax, linear time.

Kafka 4.0 compiles ConsumerGroupHeartbeat's SubscribedTopicRegex with Google's RE2J and
subscribes a member to every topic whose whole name matches (``pattern.matcher(name).matches()``;
internal topics are not skipped, only topics the member may not DESCRIBE). Python's ``re`` is a
different dialect and a backtracking engine (``(a|a)*b`` takes exponential time, which one
heartbeat could use to stall the coordinator), so the pattern is parsed with RE2J's rules
(``re2_syntax``) and matched by a linear-time automaton: a Thompson NFA run as a lazily built,
bounded DFA, as RE2 does. ``compile_topic_regex`` validates and also returns the equivalent
Python pattern (for callers that want an ``re.Pattern``); ``matching_topics`` never uses it.

Differences from RE2J, none of which change which topics match (legal topic names contain only
ASCII letters, digits, ``.``, ``_`` and ``-``): Unicode classes ``\\p...`` contain only their ASCII
members; case folding under ``(?i)`` uses Python's case mapping for non-ASCII characters (and
only for ranges under 5000 characters); a pattern whose automaton would exceed 10,000 states
(nested counted repetitions such as ``(a{1000}){1000}``), or with groups nested over 100 deep,
is rejected where RE2J would build it.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable

from kafkapy.metadata.topic_rules import is_internal_topic

from .re2_syntax import (
    ERR_NESTING,
    ERR_TOO_LARGE,
    Alternate,
    Assertion,
    CharSet,
    Concat,
    InvalidTopicRegex,
    Repeat,
    parse_re2,
    to_python,
)

__all__ = ["InvalidTopicRegex", "TopicRegex", "compile_topic_regex", "matching_topics", "parse_topic_regex"]

MAX_STATES = 10_000

parse_topic_regex = parse_re2


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """Check a SubscribedTopicRegex as Kafka's RE2J would and return the equivalent Python pattern.

    Raises InvalidTopicRegex. For matching topic names use ``matching_topics`` (linear time);
    the returned ``re.Pattern`` backtracks.
    """
    program = _program(pattern)
    try:
        return re.compile(to_python(program.tree))
    except re.error as exc:  # cannot happen for a tree we built; never let it escape as re.error
        raise InvalidTopicRegex(exc.msg, pattern) from None


# --- the linear-time matcher ----------------------------------------------------------------

_CHAR, _SPLIT, _ASSERT, _MATCH = 0, 1, 2, 3
# Kinds of the characters around a position, for assertions.
_K_EDGE, _K_NL, _K_WORD, _K_OTHER = 0, 1, 2, 3


def _kind(ch: str) -> int:
    if ch == "\n":
        return _K_NL
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return _K_WORD
    return _K_OTHER


_KINDS = {chr(c): _kind(chr(c)) for c in range(128)}


def _assertion_holds(kind: str, before: int, after: int) -> bool:
    if kind == "bot":
        return before == _K_EDGE
    if kind == "eot":
        return after == _K_EDGE
    if kind == "bol":
        return before in (_K_EDGE, _K_NL)
    if kind == "eol":
        return after in (_K_EDGE, _K_NL)
    boundary = (before == _K_WORD) != (after == _K_WORD)
    return boundary if kind == "wb" else not boundary


class TopicRegex:
    """A compiled RE2J pattern: ``fullmatch(name)`` in time linear in the name's length.

    A Thompson NFA, simulated as a DFA whose states (sets of NFA states) are built on demand
    and cached, as RE2 does; the cache is bounded, so memory is too.
    """

    _CACHE_LIMIT = 50_000

    def __init__(self, pattern: str, tree: object) -> None:
        self.pattern = pattern
        self.tree = tree
        self.op: list[int] = []
        self.arg: list[object] = []   # CHAR: (starts, ends); ASSERT: kind; SPLIT: list of targets
        self.out: list[int] = []
        self.has_assertions = False
        match = self._new(_MATCH, None, -1)
        self.start = self._build(tree, match)
        self._reset_cache()

    # construction: each node is built in front of its continuation, back to front
    def _new(self, op: int, arg: object, out: int) -> int:
        if len(self.op) >= MAX_STATES:
            raise InvalidTopicRegex(ERR_TOO_LARGE, self.pattern)
        self.op.append(op)
        self.arg.append(arg)
        self.out.append(out)
        return len(self.op) - 1

    def _build(self, node: object, nxt: int) -> int:
        if isinstance(node, CharSet):
            starts = tuple(lo for lo, _ in node.ranges)
            ends = tuple(hi for _, hi in node.ranges)
            return self._new(_CHAR, (starts, ends), nxt)
        if isinstance(node, Assertion):
            self.has_assertions = True
            return self._new(_ASSERT, node.kind, nxt)
        if isinstance(node, Concat):
            for item in reversed(node.items):
                nxt = self._build(item, nxt)
            return nxt
        if isinstance(node, Alternate):
            targets = [self._build(b, nxt) for b in node.branches]
            return self._new(_SPLIT, targets, -1)
        assert isinstance(node, Repeat)
        if node.max is None:
            loop = self._new(_SPLIT, None, -1)
            body = self._build(node.item, loop)
            self.arg[loop] = [body, nxt]
            cur = loop
            mandatory = node.min
        else:
            # x{2,4} = x x (x (x)?)?, built back to front.
            cur = nxt
            for _ in range(node.max - node.min):
                cur = self._new(_SPLIT, [self._build(node.item, cur), nxt], -1)
            mandatory = node.min
        for _ in range(mandatory):
            cur = self._build(node.item, cur)
        return cur

    # simulation: DFA states are interned sets of NFA states (those reached by a character)
    def _closure(self, states: frozenset[int], before: int, after: int) -> tuple[list[int], bool]:
        """The CHAR states reachable without consuming a character, and whether MATCH is."""
        op, arg, out = self.op, self.arg, self.out
        seen: set[int] = set()
        stack = list(states)
        chars: list[int] = []
        matched = False
        while stack:
            st = stack.pop()
            if st in seen:
                continue
            seen.add(st)
            kind = op[st]
            if kind == _CHAR:
                chars.append(st)
            elif kind == _SPLIT:
                stack.extend(arg[st])  # type: ignore[arg-type]
            elif kind == _ASSERT:
                if _assertion_holds(arg[st], before, after):  # type: ignore[arg-type]
                    stack.append(out[st])
            else:
                matched = True
        return chars, matched

    def _miss(self, sid: int, before: int, ch: str) -> int:
        """Compute, cache and return the DFA state after ``ch`` (the cache may start over)."""
        chars, _ = self._closure(self._sets[sid], before, _kind(ch))
        cp = ord(ch)
        arg, out = self.arg, self.out
        nxt = set()
        for st in chars:
            starts, ends = arg[st]  # type: ignore[misc]
            k = bisect.bisect_right(starts, cp) - 1
            if k >= 0 and cp <= ends[k]:
                nxt.add(out[st])
        if self._size > self._CACHE_LIMIT:
            # Bounded memory, as RE2: start the cache over (state ids change; callers re-read).
            self._reset_cache()
            return self._intern(frozenset(nxt))
        nid = self._intern(frozenset(nxt))
        if self.has_assertions:
            self._steps.setdefault(sid * 4 + before, {})[ch] = nid
        else:
            self._rows[sid][ch] = nid
        self._size += 1
        return nid

    def _reset_cache(self) -> None:
        self._ids: dict[frozenset[int], int] = {}
        self._sets: list[frozenset[int]] = []
        self._rows: list[dict[str, int]] = []   # without assertions: state -> char -> state
        self._steps: dict[int, dict[str, int]] = {}   # with assertions: state * 4 + before -> ...
        self._accepts: dict[tuple[int, int], bool] = {}
        self._size = 0  # transitions plus NFA states held by DFA states
        self._dead = self._intern(frozenset())
        self._start = self._intern(frozenset((self.start,)))

    def _intern(self, states: frozenset[int]) -> int:
        sid = self._ids.get(states)
        if sid is None:
            sid = len(self._sets)
            self._ids[states] = sid
            self._sets.append(states)
            self._rows.append({})
            self._size += len(states)
        return sid

    def _accepting(self, sid: int, before: int) -> bool:
        accepted = self._accepts.get((sid, before))
        if accepted is None:
            accepted = self._accepts[(sid, before)] = self._closure(self._sets[sid], before, _K_EDGE)[1]
        return accepted

    def fullmatch(self, text: str) -> bool:
        """Whether the whole of ``text`` matches (RE2J ``Matcher.matches()``)."""
        sid = self._start
        dead = self._dead  # the dead and start states keep their ids when the cache starts over
        if not self.has_assertions:
            rows = self._rows
            for ch in text:
                nxt = rows[sid].get(ch)
                if nxt is None:
                    nxt = self._miss(sid, _K_EDGE, ch)
                    rows = self._rows
                if nxt == dead:
                    return False
                sid = nxt
            return self._accepting(sid, _K_EDGE)
        # With assertions the next state also depends on the kind of the previous character.
        before = _K_EDGE
        steps = self._steps
        kinds = _KINDS
        for ch in text:
            row = steps.get(sid * 4 + before)
            nxt = None if row is None else row.get(ch)
            if nxt is None:
                nxt = self._miss(sid, before, ch)
                steps = self._steps
            if nxt == dead:
                return False
            sid = nxt
            before = kinds.get(ch) or _kind(ch)
        return self._accepting(sid, before)


@functools.lru_cache(maxsize=64)
def _program(pattern: str) -> TopicRegex:
    try:
        return TopicRegex(pattern, parse_re2(pattern))
    except RecursionError:
        raise InvalidTopicRegex(ERR_NESTING, pattern) from None


def matching_topics(pattern: str | re.Pattern[str], topic_names: Iterable[str], *,
                    exclude_internal: bool = False) -> set[str]:
    """The topics whose whole name matches ``pattern`` (RE2J ``matches()``).

    ``pattern`` is the RE2J source (matched in linear time), or an ``re.Pattern`` used as is.
    Internal topics are candidates like any other, as in Kafka 4.0 (its coordinator matches every
    topic of the metadata image and filters only by DESCRIBE ACLs); ``exclude_internal`` leaves
    them out.
    """
    if isinstance(pattern, str):
        fullmatch = _program(pattern).fullmatch
    else:
        def fullmatch(name: str) -> bool:
            return pattern.fullmatch(name) is not None
    if exclude_internal:
        return {name for name in topic_names if not is_internal_topic(name) and fullmatch(name)}
    return {name for name in topic_names if fullmatch(name)}
