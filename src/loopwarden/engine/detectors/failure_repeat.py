"""loopwarden's ``failure_repeat``: one tool failing the same way again and again while its
arguments change, because the error text echoes them ("ls: cannot access '/srv/data-7': No
such file or directory" for ``ls /srv/data-7``, then ``/srv/data-8``...). The call's own
argument values are masked in the failure text before its identity is taken, so these
failures repeat; a different message, errno or exit code is still a different failure. On in
both presets at the warning and critical thresholds; off with ``detectors.failureRepeat``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ...fingerprint.volatile import mask_volatile
from ..history import OUTCOME_TERMINAL_EXEC_FAILURE, OUTCOME_VETO, RunView, SessionState
from .base import WAKE_TAIL, Detector, Facts, Limits, Prospect, Rule, Score
from .streaks import NO_STREAK, Streak

_MIN_TOKEN = 3  # shorter argument values ("-l", "1") would mask ordinary words and digits
_MAX_TOKENS = 64
_MAX_LEAF = 1024
_TOKEN_SPLIT = re.compile(r"[\s=,;|&<>()\[\]{}]+")
_QUOTES = "'\"`"
# OpenClaw's exec text ends with this footer when the command failed.
_EXIT_FOOTER = re.compile(r"\(Command exited with code [1-9]\d*\)\s*\Z")
_FOOTER_REACH = 64  # the footer is searched for in the text's end only
# An error that only states an exit status says nothing about which failure it was.
_STATUS_ONLY = re.compile(
    r"(?:\s|<arg>|exit code \d+|\(?command exited with code \d+\)?|error|failed|[.:#()\[\]-])*",
    re.IGNORECASE)


def _leaves(value: Any, depth: int = 0) -> Iterator[str]:
    if depth > 8:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        yield str(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item, depth + 1)


def argument_tokens(args: Any) -> list[str]:
    """The argument values a failure may echo: each string or number in ``args`` and each
    word of it (a command's paths and ids), quotes stripped, longest first."""
    tokens: set[str] = set()
    try:
        for leaf in _leaves(args):
            if len(leaf) > _MAX_LEAF:  # file contents, patches: not what an error echoes
                continue
            for token in (str(leaf), *_TOKEN_SPLIT.split(str(leaf))):
                token = token.strip(_QUOTES)
                if len(token) >= _MIN_TOKEN:
                    tokens.add(token)
            if len(tokens) > _MAX_TOKENS:
                break
    except Exception:
        # Arguments are the host's values: a mapping, string or number subclass whose methods
        # raise masks what was read before it, never fails the call.
        pass
    return sorted(tokens, key=lambda t: (-len(t), t))[:_MAX_TOKENS]


def echo_masked(text: str, args: Any) -> str:
    """``text`` with the call's own argument values masked (whole values only: a value inside a
    longer word stays), then its volatile spans (times, ids, pids)."""
    for token in argument_tokens(args):  # longest first; str.find: no regex to compile per call
        if token in text:
            text = _mask_whole(text, token)
    return mask_volatile(text)


def _is_word(char: str) -> bool:
    return char.isalnum() or char in "_-/"


def _mask_whole(text: str, token: str) -> str:
    """``text`` with each occurrence of ``token`` that is not part of a longer word masked."""
    parts: list[str] = []
    start = 0
    at = text.find(token)
    while at >= 0:
        end = at + len(token)
        before = text[at - 1] if at else ""
        after = text[end] if end < len(text) else ""
        if (not before or not (_is_word(before) or before == ".")) and not (
                after and _is_word(after)):
            parts.append(text[start:at])
            parts.append("<arg>")
            start = end
        at = text.find(token, end if start == end else at + 1)
    parts.append(text[start:])
    return "".join(parts)


def failure_text(result: Any, error: str | None, outcome_kind: str | None,
                 reported: str | None) -> str | None:
    """The text of a failed call: its error, or the error its result reports (``reported``),
    or a terminal exec failure's output; None for a call that did not fail."""
    if error is not None:
        return error
    if reported is not None:
        return reported
    if isinstance(result, str) and _EXIT_FOOTER.search(result[-_FOOTER_REACH:]) is not None:
        return result  # a shell's text output that ends by saying the command failed
    if outcome_kind == OUTCOME_TERMINAL_EXEC_FAILURE and isinstance(result, Mapping):
        details = result.get("details")
        if isinstance(details, Mapping) and isinstance(details.get("aggregated"), str):
            return str(details["aggregated"])
        content = result.get("content")
        if isinstance(content, list):
            return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return None


#: Marks the identity of a failure whose text echoed the call's own argument values.
ECHOED = "echo:"


def echo_failure_identity(text: str, args: Any, args_hash: str) -> str:
    """Which failure this was, its argument values masked (``ECHOED`` in front when the text
    echoed one); an error that only states an exit status is identified with the call's
    arguments."""
    masked = echo_masked(text, args)
    echoed = "<arg>" in masked
    if _STATUS_ONLY.fullmatch(masked):
        masked = f"{args_hash}\x00{masked}"
    digest = hashlib.sha256(masked.encode("utf-8", "replace")).hexdigest()
    return ECHOED + digest if echoed else digest


def failure_streak(state: SessionState, run: str | None, tool: str) -> Streak:
    """The newest outcomes of ``tool`` failing with one argument-masked identity, over at least
    two different argument sets (identical calls are generic repeats). Vetoes are skipped; a
    pending call, another tool's call or a success ends it."""
    count = 0
    identity: str | None = None
    variants: set[str] = set()
    for r in state.reversed_run(run):
        if r.outcome_kind == OUTCOME_VETO:
            continue
        if r.tool_name != tool or r.echo_failure_hash is None:
            break
        if identity is None:
            identity = r.echo_failure_hash
        elif r.echo_failure_hash != identity:
            break
        # A failure that echoes its arguments counts every time; one that does not counts once
        # per argument set: the same error over a few argument sets in turn ("permission
        # denied" for paths a, b, a, ...) is OpenClaw's argument churn, a warning only (spec
        # scenario 72), while fresh arguments failing alike count at each call.
        if identity.startswith(ECHOED) or r.args_hash not in variants:
            count += 1
        variants.add(r.args_hash)
    return Streak(count, identity) if count and len(variants) > 1 else NO_STREAK


class FailureRepeatDetector(Detector[Streak]):
    """``failure_repeat``: this tool failing the same way with fresh arguments."""

    __slots__ = ()
    wakes = WAKE_TAIL
    name = "failure_repeat"
    switches = ("failure_repeat",)
    empty = NO_STREAK
    reads_failure_echo = True

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """The newest record is this tool's failure, or a veto (which the streak skips)."""
        last = view.records[-1]
        return last.outcome_kind == OUTCOME_VETO or (
            last.tool_name == call.tool_name and last.echo_failure_hash is not None)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Streak:
        """This tool's streak of one failure over fresh arguments; ``early``: pacing calls are
        neutral."""
        if limits.progress and call.pacing:
            return NO_STREAK
        return failure_streak(state, run, call.tool_name)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The streak against the warning and critical thresholds."""
        count = facts[self].count
        return Score(warning=count, critical=count)


FAILURE_REPEAT = FailureRepeatDetector()


def _count(f: Facts, _: Limits) -> int:
    return f[FAILURE_REPEAT].count


def _key(f: Facts) -> str:
    return f"failure:{f.call.tool_name}:{f[FAILURE_REPEAT].latest_result_hash}"


CRITICAL = Rule(
    FAILURE_REPEAT, "failure_repeat", "critical",
    lambda f, lim: f[FAILURE_REPEAT].count >= lim.critical,
    _count,
    lambda f, n: (
        f"CRITICAL: {f.call.tool_name} failed {n} times in a row with the same error, only the "
        "arguments changing. Session execution blocked to prevent runaway loops."
    ),
    _key,
    "Critical failure repeat detected: {tool} failed {n} times with the same error",
    switch="failure_repeat",
)
WARNING = Rule(
    FAILURE_REPEAT, "failure_repeat", "warning",
    lambda f, lim: f[FAILURE_REPEAT].count >= lim.warning,
    _count,
    lambda f, n: (
        f"WARNING: {f.call.tool_name} has failed {n} times in a row with the same error, only "
        "the arguments changing. Trying more variants will not help; fix the cause or report "
        "the failure."
    ),
    _key,
    "Failure repeat warning: {tool} failed {n} times with the same error",
    switch="failure_repeat",
)
