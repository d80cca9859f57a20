"""loopwarden's ``failure_repeat``: one tool failing the same way again and again while its
arguments change, because the error text echoes them ("ls: cannot access '/srv/data-7': No
such file or directory" for ``ls /srv/data-7``, then ``/srv/data-8``...). The call's own
argument values are masked in the failure text before its identity is taken, so these
failures repeat; a different message, errno or exit code is still a different failure. Values
labelled as ids (``id="a8f3c2"``, ``"messageId": "m-17"``, ``request id: 7f3a``) are masked
too, at any depth of JSON escaping, so a fresh id in an error body never makes a new failure.
On in both presets at the warning and critical thresholds; off with
``detectors.failureRepeat``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ...base.lazy_re import lazy_pattern
from ...base.text import text_id
from ...config.switches import detector_switch
from ...fingerprint.volatile import mask_volatile
from ..history import OUTCOME_TERMINAL_EXEC_FAILURE, OUTCOME_VETO, RunView, SessionState
from .base import WAKE_TAIL, Detector, Facts, Limits, Prospect, Rule, Score
from .streaks import NO_STREAK, Streak

#: ``detectors.failureRepeat``: this detector's switch.
SWITCH = detector_switch("failure_repeat")


# The patterns compile on first use (loopwarden.base.lazy_re): _EXIT_FOOTER and _ERRNO_LINE
# read text results, the other four run on failed calls only.
_MIN_TOKEN = 3  # shorter argument values ("-l", "1") would mask ordinary words and digits
_MAX_TOKENS = 64
_MAX_LEAF = 1024
_TOKEN_SPLIT = lazy_pattern(r"[\s=,;|&<>()\[\]{}]+")
_QUOTES = "'\"`"
# OpenClaw's exec text ends with this footer when the command failed.
_EXIT_FOOTER = lazy_pattern(r"\(Command exited with code [1-9]\d*\)\s*\Z")
_FOOTER_REACH = 64  # the footer is searched for in the text's end only
# An error that only states an exit status says nothing about which failure it was.
_STATUS_ONLY = lazy_pattern(
    r"(?:\s|<arg>|exit code \d+|\(?command exited with code \d+\)?|error|failed|[.:#()\[\]-])*",
    re.IGNORECASE)
# A value labelled as an id: a name that is or ends in "id" (``id``, ``messageId``,
# ``request_id``, ``message id``), ``uuid`` or ``nonce``, then ``=`` or ``:``, each side maybe
# quoted with any run of backslashes (JSON text inside JSON text); group 1 is the value.
_ID_FIELD = lazy_pattern(
    r"(?:\b(?:[A-Za-z][A-Za-z0-9]*[ _-])?(?:id|ID|Id|uuid|UUID|nonce)|[a-z0-9](?:Id|ID|Uuid))"
    r"(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?([A-Za-z0-9][A-Za-z0-9._+/-]*)")
# A text result that reads as a failure although its host gave no failure signal (Codex hands
# hooks a shell's output without its exit code): a line ending in an errno description,
# "command not found", or starting with ``error:`` / ``fatal:``, in a short output.
_ERRNO_LINE = lazy_pattern(
    r"^\S[^\n]*: (?:No such file or directory|Permission denied|Not a directory|Is a directory|"
    r"command not found|File exists|Directory not empty|Operation not permitted|"
    r"Read-only file system|No space left on device|Connection refused|Connection timed out|"
    r"Network is unreachable|No such device or address|Input/output error|Invalid argument|"
    r"Exec format error|Text file busy|Device or resource busy)\s*$"
    r"|^(?:error|fatal)(?:\[[\w-]+\])?: \S",
    re.MULTILINE)
_ERROR_TEXT_REACH = 2048  # a longer output is a listing or a log, not one failure


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
    word of it (a command's paths and ids), quotes stripped, a URL's host and path, and each
    as it reads inside JSON text (``C:\\\\work`` for ``C:\\work``); longest first."""
    tokens: set[str] = set()
    token_split = _TOKEN_SPLIT()
    try:
        for leaf in _leaves(args):
            if len(leaf) > _MAX_LEAF:  # file contents, patches: not what an error echoes
                continue
            for token in (str(leaf), *token_split.split(str(leaf))):
                token = token.strip(_QUOTES)
                if len(token) >= _MIN_TOKEN:
                    tokens.add(token)
                    tokens.update(_echo_forms(token))
            if len(tokens) > _MAX_TOKENS:
                break
    except Exception:
        # Arguments are the host's values: a mapping, string or number subclass whose methods
        # raise masks what was read before it, never fails the call.
        pass
    return sorted(tokens, key=lambda t: (-len(t), t))[:_MAX_TOKENS]


_URL = lazy_pattern(r"[a-z][a-z0-9+.-]*://([^/?#\s]+)([^?#\s]*(?:\?[^#\s]*)?)", re.IGNORECASE)


def _echo_forms(token: str) -> list[str]:
    """Other forms an error may echo ``token`` in: a URL's host, path (with its query) and
    path without its trailing slash; the JSON-escaped text of a value with quotes or
    backslashes."""
    forms: list[str] = []
    url = _URL().fullmatch(token)
    if url is not None:
        forms += [url.group(1), url.group(2), url.group(2).rstrip("/")]
    if "\\" in token or '"' in token:
        forms.append(token.replace("\\", "\\\\").replace('"', '\\"'))
    return [form for form in forms if len(form) >= _MIN_TOKEN]


def echo_masked(text: str, args: Any) -> str:
    """``text`` with the call's own argument values masked (whole values only: a value inside a
    longer word stays), then values labelled as ids, then its volatile spans (times, ids,
    pids)."""
    for token in argument_tokens(args):  # longest first; str.find: no regex to compile per call
        if token in text:
            text = _mask_whole(text, token)
    if "id" in text or "ID" in text or "Id" in text or "nonce" in text:
        text = _ID_FIELD().sub(_masked_id, text)
    return mask_volatile(text)


def _masked_id(match: re.Match[str]) -> str:
    start, end = match.span(1)
    whole = match.group(0)
    return whole[: start - match.start()] + "<id>" + whole[end - match.start():]


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
    if isinstance(result, str) and _EXIT_FOOTER().search(result[-_FOOTER_REACH:]) is not None:
        return result  # a shell's text output that ends by saying the command failed
    if isinstance(result, str) and reads_as_failure(result):
        return result  # a shell's output that is an error, its exit code not given
    if outcome_kind == OUTCOME_TERMINAL_EXEC_FAILURE and isinstance(result, Mapping):
        details = result.get("details")
        if isinstance(details, Mapping) and isinstance(details.get("aggregated"), str):
            # (A different exit code is a different failure, whatever the output says.)
            return f"{details['aggregated']}\n(exit code {text_id(details.get('exitCode'))})"
        content = result.get("content")
        if isinstance(content, list):
            return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return None


def reads_as_failure(text: str) -> bool:
    """Whether a short text output says the command failed (``ls: cannot access 'x': No such
    file or directory``, ``error: unexpected argument 'get' found``) though no exit code came
    with it."""
    return len(text) <= _ERROR_TEXT_REACH and _ERRNO_LINE().search(text) is not None


#: Marks the identity of a failure whose text echoed the call's own argument values.
ECHOED = "echo:"


def echo_failure_identity(text: str, args: Any, args_hash: str) -> str:
    """Which failure this was, its argument values masked (``ECHOED`` in front when the text
    echoed one); an error that only states an exit status is identified with the call's
    arguments."""
    masked = echo_masked(text, args)
    echoed = "<arg>" in masked
    if _STATUS_ONLY().fullmatch(masked):
        masked = f"{args_hash}\x00{masked}"
    digest = hashlib.sha256(masked.encode("utf-8", "replace")).hexdigest()
    return ECHOED + digest if echoed else digest


def failure_streak(state: SessionState, run: str | None, tool: str) -> Streak:
    """The newest outcomes of ``tool`` failing with one argument-masked identity, over at least
    two different calls or raw outcomes (the same call failing with the same text is a
    generic repeat). Vetoes are skipped; a pending call, another tool's call or a success
    ends it."""
    count = 0
    identity: str | None = None
    seen: set[tuple[str, str | None]] = set()
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
        # per argument set and raw outcome: the same error text over a few argument sets in
        # turn ("permission denied" for paths a, b, a, ...) is OpenClaw's argument churn, a
        # warning only (spec scenario 72), while fresh arguments, or a fresh id or time in
        # the error text, count at each call.
        variant = (r.args_hash, r.result_hash)
        if identity.startswith(ECHOED) or variant not in seen:
            count += 1
        seen.add(variant)
    return Streak(count, identity) if count and len(seen) > 1 else NO_STREAK


class FailureRepeatDetector(Detector[Streak]):
    """``failure_repeat``: this tool failing the same way with fresh arguments."""

    __slots__ = ()
    wakes = WAKE_TAIL
    name = "failure_repeat"
    switches = (SWITCH,)
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
    switch=SWITCH,
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
    switch=SWITCH,
)
