"""The detectors: pure functions over one run's history, and their precedence in one table.

Each ``*_streak`` function measures one pattern for a prospective call (spec §d.2–§d.8). The
``RULES`` table turns those measurements into at most one :class:`Detection`, first match wins,
in OpenClaw's order (§d). Nothing here mutates state or does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .history import (
    OUTCOME_TERMINAL_EXEC_FAILURE,
    OUTCOME_VETO,
    OUTCOME_WRITE_MUTATION,
    CallRecord,
    SessionState,
)

if TYPE_CHECKING:  # only an annotation: the detectors need no profile code
    from .profiles import ToolProfile

__all__ = [
    "RULES",
    "Detection",
    "Facts",
    "Limits",
    "Prospect",
    "Rule",
    "argument_churn",
    "error_streak",
    "evaluate",
    "no_progress_cycle",
    "no_progress_streak",
    "ping_pong",
    "progress_streak",
    "unknown_tool_streak",
]

Level = Literal["warning", "critical"]
CHURN_MIN_REPEATS = 3
#: An interval between two polls at least this long (ms) is paced rather than fast: longer than
#: a model's usual turn, so only a deliberate wait (a sleep, a poll timeout) reaches it.
MIN_PACE_MS = 10_000
#: Back-off: the newest intervals reach at least this multiple of the streak's shortest one.
BACKOFF_GROWTH = 1.5
BACKOFF_WINDOW = 3
# Periods the cycle detector looks for: 1 is a plain repeat, 2 is OpenClaw's ping-pong.
CYCLE_PERIODS = (3, 4, 5, 6)


@dataclass(frozen=True, slots=True)
class Detection:
    """What a detector found for a prospective call."""

    level: Level
    detector: str
    count: int
    message: str
    paired_tool_name: str | None = None
    warning_key: str | None = None
    liveness_signal: str | None = None

    @property
    def stuck(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Limits:
    """Effective thresholds and switches (already preset-filled and order-repaired)."""

    warning: int = 10
    critical: int = 20
    global_breaker: int = 30
    unknown_tool: int = 10
    error_repeat: int = 10
    generic_repeat: bool = True
    known_poll: bool = True
    ping_pong: bool = True
    argument_churn: bool = True
    error_repeat_on: bool = False
    # ``early``: repeats count only without progress (see :func:`progress_streak`); a paced or
    # backing-off repeat is blocked at ``eased_critical`` (reachable when a pacing call sits
    # between every two polls of a 30-call window).
    progress: bool = False
    eased_critical: int = 30
    cycle: bool = True


@dataclass(slots=True)  # built twice per call; frozen would double that cost
class Prospect:
    """The call about to be made, already fingerprinted."""

    tool_name: str
    args_hash: str
    known_poll: bool = False
    poll_critical_at_warning: bool = False
    mutation_target_hash: str | None = None
    # The tool's profile when it was fingerprinted (its outcome is hashed by the same one).
    profile: ToolProfile | None = field(default=None, repr=False, compare=False)
    # From the profile, ``early`` preset only: changes state / only waits / waits this long.
    mutating: bool = False
    pacing: bool = False
    wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class Streak:
    count: int = 0
    latest_result_hash: str | None = None
    name: str | None = None
    # ``early``: every interval between the calls was paced (blocks wait for the global
    # breaker), or the caller is backing off / this is a pacing call (no warning either).
    paced: bool = False
    compliant: bool = False


@dataclass(frozen=True, slots=True)
class PingPong:
    count: int = 0
    paired_tool_name: str | None = None
    paired_signature: str | None = None
    no_progress_evidence: bool = False


@dataclass(frozen=True, slots=True)
class Churn:
    count: int = 0
    variant_count: int = 0
    write_mutation: bool = False


@dataclass(frozen=True, slots=True)
class Cycle:
    count: int = 0  # calls in the cycling tail, blocked attempts and the prospective call included
    steps: tuple[str, ...] = ()  # the cycle's args hashes, starting at the prospective call
    tools: tuple[str, ...] = ()  # their tool names, in the same order


NO_STREAK = Streak()
NO_PING_PONG = PingPong()
NO_CHURN = Churn()
NO_CYCLE = Cycle()


# -- measurements --------------------------------------------------------------------------------


def unknown_tool_streak(state: SessionState, run: str | None, tool: str) -> Streak:
    """§d.5, keeping unknown-tool evidence across loop vetoes (the newer upstream behaviour)."""
    count = 0
    name: str | None = None
    for r in state.reversed_run(run):
        if r.is_veto:
            continue
        if r.tool_name != tool or r.unknown_tool_name is None:
            break
        if name is None:
            name = r.unknown_tool_name
        elif r.unknown_tool_name != name:
            break
        count += 1
    return Streak(count, None, name) if count else NO_STREAK


def _walk_same_args(records: Iterable[CallRecord]) -> Streak:
    streak = 0
    anchor: str | None = None
    pending_vetoes = 0
    for r in records:
        if r.is_veto:
            pending_vetoes += 1
            continue
        if r.result_hash is None:
            continue
        if anchor is None:
            anchor = r.result_hash
            streak = pending_vetoes + 1
            pending_vetoes = 0
            continue
        if r.result_hash != anchor:
            break
        streak += pending_vetoes + 1
        pending_vetoes = 0
    if anchor is None:
        return Streak(pending_vetoes) if pending_vetoes else NO_STREAK
    return Streak(streak, anchor)


def _walk_terminal_failures(records: Iterable[CallRecord], tool: str) -> Streak:
    streak = 0
    anchor: CallRecord | None = None
    pending_vetoes = 0
    for r in records:
        if r.tool_name != tool:
            break
        if r.is_veto:
            pending_vetoes += 1
            continue
        if r.result_hash is None:
            continue
        if r.outcome_kind != OUTCOME_TERMINAL_EXEC_FAILURE:
            break
        if anchor is None:
            anchor = r
            streak = pending_vetoes + 1
            pending_vetoes = 0
            continue
        if r.result_hash != anchor.result_hash:
            same_failure = (
                r.args_hash == anchor.args_hash
                and r.failure_identity_hash is not None
                and r.failure_identity_hash == anchor.failure_identity_hash
            )
            if not same_failure:
                break
        streak += pending_vetoes + 1
        pending_vetoes = 0
    if anchor is None:
        return NO_STREAK
    return Streak(streak, anchor.result_hash)


def no_progress_streak(state: SessionState, run: str | None, call: Prospect) -> Streak:
    """§d.3: identical outcomes of this exact call (vetoes counted once anchored); for ``exec``
    also a contiguous tail of terminal failures across different commands."""
    same = _walk_same_args(reversed(state.key_records(run, call.args_hash)))
    if call.tool_name != "exec":
        return same
    terminal = _walk_terminal_failures(state.reversed_run(run), call.tool_name)
    return terminal if terminal.count > same.count else same


def fresh_mutation(state: SessionState, run: str | None, record: CallRecord) -> bool:
    """A completed state change that is not a replay of an earlier identical one in the window
    (writing the same content twice, or clicking the same element again, is a replay)."""
    if not record.mutating or record.result_hash is None:
        return False
    same = state.key_records(run, record.args_hash)
    return not same or same[0] is record


def progress_streak(state: SessionState, run: str | None, call: Prospect) -> Streak:
    """``early``'s no-progress streak: identical outcomes of this exact call, newest first,
    ended by a fresh mutation of any other call (a repeat after an edit is a new experiment);
    pacing calls in between stretch the intervals between the calls, which tell fast polling
    from paced polling and back-off. For ``exec`` also the terminal-failure tail (§d.3)."""
    count = 0
    anchor: str | None = None
    pending_vetoes = 0
    intervals: list[int] = []  # newest first
    waited = 0  # pacing since the newer counted call
    newer: CallRecord | None = None
    trailing: int | None = None
    for r in state.reversed_run(run):
        if r.args_hash != call.args_hash:
            if fresh_mutation(state, run, r):
                break
            waited += r.wait_ms
            continue
        if r.is_veto:
            pending_vetoes += 1
            continue
        if r.result_hash is None:
            continue
        if anchor is None:
            anchor = r.result_hash
            count = pending_vetoes + 1
            trailing = waited
        elif r.result_hash != anchor:
            break
        else:
            count += pending_vetoes + 1
            assert newer is not None
            intervals.append(max(newer.timestamp - r.timestamp, waited + newer.wait_ms))
        pending_vetoes = 0
        waited = 0
        newer = r
    if anchor is None:
        same = Streak(pending_vetoes) if pending_vetoes else NO_STREAK
    else:
        intervals.reverse()
        if trailing or call.wait_ms:  # a pre-call check: the wait before this call counts too
            intervals.append((trailing or 0) + call.wait_ms)
        paced, backoff = _pacing(intervals)
        same = Streak(count, anchor, None, paced or call.pacing, backoff or call.pacing)
    if call.tool_name != "exec":
        return same
    terminal = _walk_terminal_failures(state.reversed_run(run), call.tool_name)
    return terminal if terminal.count > same.count else same


def _pacing(intervals: list[int]) -> tuple[bool, bool]:
    """(paced, backing off) from the intervals between a streak's calls, oldest first.

    Paced: each of the newest intervals is a deliberate wait (>= :data:`MIN_PACE_MS`).
    Backing off: paced, and the caller now waits clearly longer than it did at its quickest
    (sleeps of 30, 60, 90 s): what the poll warning asks for, so it is compliance."""
    recent = intervals[-BACKOFF_WINDOW:]
    if not recent or min(recent) < MIN_PACE_MS:
        return False, False
    backoff = len(intervals) >= 2 and max(recent) >= BACKOFF_GROWTH * max(min(intervals), 1)
    return True, backoff


def ping_pong(state: SessionState, run: str | None, cur: str) -> PingPong:
    """§d.4: the A-B-A-B tail, counted as if ``cur`` were the next call."""
    records = state.run_records(run)
    if not records:
        return NO_PING_PONG
    last = records[-1]
    other: CallRecord | None = None
    for r in reversed(records):
        if r.args_hash != last.args_hash:
            other = r
            break
    if other is None or cur != other.args_hash:
        return NO_PING_PONG
    tail: list[CallRecord] = []
    expected = last.args_hash
    newest_first = list(reversed(records))
    for i, r in enumerate(newest_first):
        if r.args_hash != expected:
            break
        tail.append(r)
        older = newest_first[i + 1] if i + 1 < len(newest_first) else None
        if r.outcome_kind == OUTCOME_VETO and older is not None and older.args_hash == expected:
            # A blocked retry of the call before it (a batch admission vetoes the trigger
            # right after its own earlier run): it keeps the model's place in the alternation.
            continue
        expected = other.args_hash if expected == last.args_hash else last.args_hash
    if len(tail) < 2:
        return NO_PING_PONG
    return PingPong(len(tail) + 1, last.tool_name, last.args_hash, _stable_sides(tail))


def _stable_sides(tail: list[CallRecord]) -> bool:
    """Both sides of the alternation have one outcome each. A loop veto (a blocked attempt:
    nothing ran) matches its side's outcome, so a model that keeps alternating after a block
    stays blocked and climbs to the terminal stop; in OpenClaw the veto hid the evidence and
    the alternation was allowed again until the veto left the window."""
    sides: dict[str, str] = {}
    for r in tail:
        if r.outcome_kind == OUTCOME_VETO:
            continue
        if r.result_hash is None:
            return False
        seen = sides.setdefault(r.args_hash, r.result_hash)
        if seen != r.result_hash:
            return False
    return len(sides) == 2


def no_progress_cycle(state: SessionState, run: str | None, call: Prospect) -> Cycle:
    """loopwarden's cycle: the run's newest calls repeat a sequence of k calls (k in 3..6, the
    prospective call being its next step; at least two tools), at least twice over, with the
    same outcome at each step in every repetition. Counted like ping-pong: the cycling tail
    plus this call.

    Loop vetoes are blocked attempts. Nothing ran, so a veto matches any outcome of its step;
    and a veto followed by the same call again is a retry that keeps the model's place in the
    cycle. Either way it counts, so a model that insists climbs from critical to the breaker
    instead of being let through after one block. A pending record (outcome unknown) ends the
    tail."""
    records = state.run_records(run)
    best = NO_CYCLE
    for k in CYCLE_PERIODS:
        if len(records) + 1 < 2 * k:
            break
        found, ambiguous = _cycle_walk(records, call, k, retries_first=False)
        if ambiguous:  # a veto among the newest k steps could be a retry or a blocked step
            other, _ = _cycle_walk(records, call, k, retries_first=True)
            if other.count > found.count:
                found = other
        if found.count > best.count:
            best = found
    return best


def _cycle_walk(
    records: Sequence[CallRecord], call: Prospect, k: int, *, retries_first: bool
) -> tuple[Cycle, bool]:
    """The period-``k`` cycling tail ending with ``call``, and whether a veto among its newest
    ``k`` steps was ambiguous (while the cycle's steps are not yet known, a veto of the call
    made right after it may be either a retry or a step of its own)."""
    keys = [call.args_hash]  # the tail's steps, newest first (vetoes of retries left out)
    tools = [call.tool_name]
    anchors: list[str | None] = [None] * k  # the outcome of each step, newest first
    count = 1
    after = call.args_hash  # the attempt made right after the record in hand
    ambiguous = False
    for r in reversed(records):
        m = len(keys)
        key = r.args_hash
        if r.outcome_kind == OUTCOME_VETO:
            if m >= k and key != keys[m - k]:
                if key != after:
                    break
                count += 1  # a retry: the model stays at this step of the cycle
                continue
            if m < k and key == after:
                ambiguous = True
                if retries_first:
                    count += 1
                    continue
        else:
            if r.result_hash is None:  # pending: its outcome is unknown
                break
            if m >= k and key != keys[m - k]:
                break
            slot = m % k
            anchor = anchors[slot]
            if anchor is None:
                anchors[slot] = r.result_hash
            elif anchor != r.result_hash:
                break
        keys.append(key)
        if m < k:
            tools.append(r.tool_name)
            if m + 1 == k and (len(set(tools)) == 1 or not _primitive(keys)):
                # One tool cycling its arguments is OpenClaw's argument churn, warning-only by
                # design (and §i scenario 28); a shorter period is a repeat or a ping-pong.
                return NO_CYCLE, ambiguous
        count += 1
        after = key
    if len(keys) < 2 * k:
        return NO_CYCLE, ambiguous
    order = (0, *range(k - 1, 0, -1))  # this call, then the steps that follow it in the cycle
    return Cycle(count, tuple(keys[i] for i in order), tuple(tools[i] for i in order)), ambiguous


def _primitive(steps: Sequence[str]) -> bool:
    """True unless the steps are a shorter sequence repeated (a smaller period)."""
    k = len(steps)
    return not any(
        k % p == 0 and all(steps[i] == steps[i + p] for i in range(k - p)) for p in range(1, k)
    )


def argument_churn(state: SessionState, run: str | None, call: Prospect) -> Churn:
    """§d.8: the same tool cycling argument variants with one stable no-progress outcome, or
    rewriting one write target with new variants (warning-only)."""
    semantic = _semantic_churn(state, run, call)
    return semantic if semantic.count else write_churn(state, run, call)


def _semantic_churn(state: SessionState, run: str | None, call: Prospect) -> Churn:
    per_args: dict[str, list[object]] = {}
    for r in state.reversed_run(run):
        if r.tool_name != call.tool_name:
            break
        if r.result_hash is None:
            continue
        if not r.no_progress:
            break
        entry = per_args.get(r.args_hash)
        if entry is None:
            per_args[r.args_hash] = [r.result_hash, 1]
            continue
        if entry[0] != r.result_hash:
            break
        entry[1] = int(entry[1]) + 1  # type: ignore[call-overload]
    counts = {h: int(v[1]) for h, v in per_args.items()}  # type: ignore[call-overload]
    stable = [h for h, n in counts.items() if n >= CHURN_MIN_REPEATS]
    total = sum(counts.values())
    ok = (
        len(stable) > 1
        and sum(counts[h] for h in stable) == total
        and len({per_args[h][0] for h in stable}) == 1
        and counts.get(call.args_hash, 0) >= CHURN_MIN_REPEATS
    )
    return Churn(total, len(stable)) if ok else NO_CHURN


def write_churn(
    state: SessionState, run: str | None, call: Prospect, *, skip: CallRecord | None = None
) -> Churn:
    if call.tool_name != "write" or call.mutation_target_hash is None:
        return NO_CHURN
    variants: list[str] = []
    seen: dict[str, int] = {}
    for r in state.reversed_run(run):
        if r is skip:
            continue
        if (
            r.tool_name != "write"
            or r.outcome_kind != OUTCOME_WRITE_MUTATION
            or r.mutation_target_hash != call.mutation_target_hash
        ):
            break
        if r.args_hash in seen:
            del variants[seen[r.args_hash] + 1 :]
            break
        seen[r.args_hash] = len(variants)
        variants.append(r.args_hash)
    if call.args_hash in variants:
        return NO_CHURN
    return Churn(len(variants), len(variants), True) if variants else NO_CHURN


def error_streak(
    state: SessionState, run: str | None, tool: str, *, progress: bool = False
) -> Streak:
    """loopwarden's error repeat: the newest outcomes of this tool failing with one masked error,
    whatever the arguments. Other tools' records and pending calls do not interrupt it; with
    ``progress`` (``early``) a fresh mutation by another tool does."""
    count = 0
    identity: str | None = None
    for r in state.reversed_run(run):
        if r.tool_name != tool or r.is_veto or r.pending:
            if progress and r.tool_name != tool and fresh_mutation(state, run, r):
                break
            continue
        if r.error_identity_hash is None:
            break
        if identity is None:
            identity = r.error_identity_hash
        elif r.error_identity_hash != identity:
            break
        count += 1
    return Streak(count, identity) if count else NO_STREAK


# -- precedence ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Facts:
    """All measurements for one prospective call, computed once."""

    call: Prospect
    unknown: Streak
    no_progress: Streak
    ping_pong: PingPong
    churn: Churn
    recent: int
    errors: Streak
    cycle: Cycle = NO_CYCLE

    @classmethod
    def measure(
        cls, state: SessionState, run: str | None, call: Prospect, limits: Limits
    ) -> Facts:
        if limits.progress:
            return cls._measure_progress(state, run, call, limits)
        return cls(
            call=call,
            unknown=unknown_tool_streak(state, run, call.tool_name),
            no_progress=no_progress_streak(state, run, call),
            ping_pong=ping_pong(state, run, call.args_hash),
            churn=argument_churn(state, run, call) if limits.argument_churn else NO_CHURN,
            recent=len(state.key_records(run, call.args_hash)),
            errors=error_streak(state, run, call.tool_name) if limits.error_repeat_on else NO_STREAK,
            cycle=no_progress_cycle(state, run, call) if limits.cycle else NO_CYCLE,
        )

    @classmethod
    def _measure_progress(
        cls, state: SessionState, run: str | None, call: Prospect, limits: Limits
    ) -> Facts:
        """``early``: a pacing call is neutral (only the hard cap watches it), an alternation
        with one is not a ping-pong, and streaks end at fresh mutations."""
        streak = progress_streak(state, run, call)
        if call.pacing:
            return cls(call, unknown_tool_streak(state, run, call.tool_name), streak,
                       NO_PING_PONG, NO_CHURN, 0, NO_STREAK)
        pp = ping_pong(state, run, call.args_hash)
        if pp.count and _pacing_in_tail(state.run_records(run)):
            pp = NO_PING_PONG
        return cls(
            call=call,
            unknown=unknown_tool_streak(state, run, call.tool_name),
            no_progress=streak,
            ping_pong=pp,
            churn=argument_churn(state, run, call) if limits.argument_churn else NO_CHURN,
            recent=len(state.key_records(run, call.args_hash)),
            errors=(error_streak(state, run, call.tool_name, progress=True)
                    if limits.error_repeat_on else NO_STREAK),
            cycle=_unpaced_cycle(state, run, call) if limits.cycle else NO_CYCLE,
        )


def _unpaced_cycle(state: SessionState, run: str | None, call: Prospect) -> Cycle:
    """``early``: a cycle with a pacing step (build, sleep, status, ...) waits on purpose; the
    paced poll is judged by its own streak, as a ping-pong with a pacing side is."""
    cycle = no_progress_cycle(state, run, call)
    if cycle.count and any(r.pacing for r in list(state.run_records(run))[-len(cycle.steps):]):
        return NO_CYCLE
    return cycle


def _pacing_in_tail(records: Sequence[CallRecord]) -> bool:
    """Whether either side of the newest alternation is a pacing call (poll, sleep, poll ...)."""
    return any(r.pacing for r in list(records)[-2:])


def repeat_count(f: Facts, lim: Limits) -> int:
    """What the generic-repeat warning counts: identical arguments (OpenClaw), or with
    ``progress`` identical outcomes without progress in between (0 while backing off)."""
    if not lim.progress:
        return f.recent
    return 0 if f.no_progress.compliant else f.no_progress.count


def _blocks_at(f: Facts, lim: Limits, critical: int) -> int:
    """``early``: a paced or backing-off repeat is blocked only at the hard cap, a pacing call
    only by the global breaker."""
    if lim.progress and f.call.pacing:
        return lim.global_breaker
    if lim.progress and (f.no_progress.paced or f.no_progress.compliant):
        return max(critical, lim.eased_critical)
    return critical


def _poll_warns(f: Facts, lim: Limits) -> bool:
    return not (lim.progress and f.no_progress.compliant)


def _pp_warns(f: Facts, lim: Limits) -> bool:
    # At lowered thresholds an alternation warns only with evidence of no progress.
    return not lim.progress or f.ping_pong.no_progress_evidence


Count = Callable[[Facts, Limits], int]


@dataclass(frozen=True, slots=True)
class Rule:
    detector: str
    level: Level
    fires: Callable[[Facts, Limits], bool]
    count: Count
    message: Callable[[Facts, int], str]
    key: Callable[[Facts], str]


def _np(f: Facts, _: Limits) -> int:
    return f.no_progress.count


def _latest(f: Facts) -> str:
    return f.no_progress.latest_result_hash or "none"


def _pp_key(f: Facts) -> str:
    if f.ping_pong.paired_signature is None:
        return f"pingpong:{f.call.tool_name}:{f.call.args_hash}"
    return "pingpong:" + "|".join(sorted((f.call.args_hash, f.ping_pong.paired_signature)))


def _poll_critical_threshold(f: Facts, lim: Limits) -> int:
    return lim.warning if f.call.poll_critical_at_warning else lim.critical


def _churn_message(f: Facts, n: int) -> str:
    t = f.call.tool_name
    if f.churn.write_mutation:
        return (
            f"WARNING: {t} has changed the same target with {f.churn.variant_count} distinct "
            "argument variants and no intervening verification. Continued rewriting is treated "
            "as stalled run activity, but this tool call remains allowed. Read or verify the "
            "current result before rewriting it again."
        )
    return (
        f"WARNING: {t} has cycled through {f.churn.variant_count} repeated argument patterns "
        f"with the same stable outcome {n} times. Continued churn is treated as stalled run "
        "activity, but this tool call remains allowed."
    )


def _churn_key(f: Facts) -> str:
    if f.churn.write_mutation:
        return f"argument-churn:{f.call.tool_name}:write-mutation:{f.call.mutation_target_hash or 'unknown'}"
    return f"argument-churn:{f.call.tool_name}"


def unknown_tool_message(name: str, n: int) -> str:
    """The ``unknown_tool_repeat`` message. ``name`` is the missing tool as the error text
    named it, which the model wrote, possibly into an argument: logs use the called tool's
    name instead (:class:`~loopwarden.events.LoggingSink`)."""
    return (f"CRITICAL: attempted unavailable tool {name} {n} times. "
            "Stop retrying that missing tool and answer without it.")
def _cycle_text(f: Facts, n: int) -> str:
    steps = " \u2192 ".join(f.cycle.tools)
    return (
        f"You are repeating a cycle of {len(f.cycle.steps)} tool calls ({steps}) with "
        f"identical results ({n} consecutive calls)."
    )


def _cycle_key(f: Facts) -> str:
    """The same for every step and phase of one cycle: its smallest rotation."""
    steps = f.cycle.steps
    return "cycle:" + "|".join(min(steps[i:] + steps[:i] for i in range(len(steps))))


RULES: tuple[Rule, ...] = (
    Rule(
        "unknown_tool_repeat", "critical",
        lambda f, lim: f.unknown.count >= lim.unknown_tool,
        lambda f, _: f.unknown.count,
        lambda f, n: unknown_tool_message(f.unknown.name or f.call.tool_name, n),
        lambda f: f"unknown-tool:{f.call.tool_name}:{f.unknown.name or 'unknown'}",
    ),
    Rule(
        "global_circuit_breaker", "critical",
        lambda f, lim: f.no_progress.count >= lim.global_breaker,
        _np,
        lambda f, n: (
            f"CRITICAL: {f.call.tool_name} repeated identical no-progress outcomes {n} times. "
            "Session execution blocked by global circuit breaker to prevent runaway loops."
        ),
        lambda f: f"global:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "known_poll_no_progress", "critical",
        lambda f, lim: lim.known_poll and f.call.known_poll
        and f.no_progress.count >= _blocks_at(f, lim, _poll_critical_threshold(f, lim)),
        _np,
        lambda f, n: (
            f"CRITICAL: Called {f.call.tool_name} with identical arguments and no progress {n} "
            "times. This appears to be a stuck polling loop. Session execution blocked to "
            "prevent resource waste."
        ),
        lambda f: f"poll:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "known_poll_no_progress", "warning",
        lambda f, lim: lim.known_poll and f.call.known_poll
        and f.no_progress.count >= lim.warning and _poll_warns(f, lim),
        _np,
        lambda f, n: (
            f"WARNING: You have called {f.call.tool_name} {n} times with identical arguments and "
            "no progress. Stop polling and either (1) increase wait time between checks, or (2) "
            "report the task as failed if the process is stuck."
        ),
        lambda f: f"poll:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "ping_pong", "critical",
        lambda f, lim: lim.ping_pong and f.ping_pong.count >= lim.critical
        and f.ping_pong.no_progress_evidence,
        lambda f, _: f.ping_pong.count,
        lambda f, n: (
            f"CRITICAL: You are alternating between repeated tool-call patterns ({n} consecutive "
            "calls) with no progress. This appears to be a stuck ping-pong loop. Session "
            "execution blocked to prevent resource waste."
        ),
        _pp_key,
    ),
    # loopwarden's cycles (periods 3-6) rank right after ping-pong (period 2). Blocked attempts
    # keep counting, so an insistent model reaches the breaker, as a repeated call does.
    Rule(
        "global_circuit_breaker", "critical",
        lambda f, lim: lim.cycle and f.cycle.count >= lim.global_breaker,
        lambda f, _: f.cycle.count,
        lambda f, n: (
            f"CRITICAL: {_cycle_text(f, n)} Session execution blocked by global circuit breaker "
            "to prevent runaway loops."
        ),
        lambda f: "global:" + _cycle_key(f),
    ),
    Rule(
        "cycle", "critical",
        lambda f, lim: lim.cycle and f.cycle.count >= lim.critical,
        lambda f, _: f.cycle.count,
        lambda f, n: (
            f"CRITICAL: {_cycle_text(f, n)} This appears to be a stuck cycle. Session execution "
            "blocked to prevent resource waste."
        ),
        _cycle_key,
    ),
    Rule(
        "ping_pong", "warning",
        lambda f, lim: lim.ping_pong and f.ping_pong.count >= lim.warning and _pp_warns(f, lim),
        lambda f, _: f.ping_pong.count,
        lambda f, n: (
            f"WARNING: You are alternating between repeated tool-call patterns ({n} consecutive "
            "calls). This looks like a ping-pong loop; stop retrying and report the task as "
            "failed."
        ),
        _pp_key,
    ),
    Rule(
        "generic_repeat", "critical",
        lambda f, lim: lim.generic_repeat and not f.call.known_poll
        and f.no_progress.count >= _blocks_at(f, lim, lim.critical),
        _np,
        lambda f, n: (
            f"CRITICAL: Called {f.call.tool_name} with identical outcomes {n} times. Session "
            "execution blocked to prevent runaway loops."
        ),
        lambda f: f"generic:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "error_repeat", "critical",
        lambda f, lim: lim.error_repeat_on and f.errors.count >= lim.critical,
        lambda f, _: f.errors.count,
        lambda f, n: (
            f"CRITICAL: {f.call.tool_name} failed {n} times in this run with the same error. "
            "Session execution blocked to prevent runaway loops."
        ),
        lambda f: f"error:{f.call.tool_name}:{f.errors.latest_result_hash}",
    ),
    # Below every critical, so that a cycle's warning never turns an existing block into a
    # warning.
    Rule(
        "cycle", "warning",
        lambda f, lim: lim.cycle and f.cycle.count >= lim.warning,
        lambda f, _: f.cycle.count,
        lambda f, n: (
            f"WARNING: {_cycle_text(f, n)} This looks like a no-progress loop; change your "
            "approach or report the task as failed."
        ),
        _cycle_key,
    ),
    Rule(
        "argument_churn", "warning",
        lambda f, lim: lim.argument_churn and f.churn.count >= lim.warning,
        lambda f, _: f.churn.count,
        _churn_message,
        _churn_key,
    ),
    Rule(
        "generic_repeat", "warning",
        lambda f, lim: lim.generic_repeat and not f.call.known_poll
        and repeat_count(f, lim) >= lim.warning,
        repeat_count,
        lambda f, n: (
            f"WARNING: You have called {f.call.tool_name} {n} times with identical arguments. "
            "If this is not making progress, stop retrying and report the task as failed."
        ),
        lambda f: f"generic:{f.call.tool_name}:{f.call.args_hash}",
    ),
    Rule(
        "error_repeat", "warning",
        lambda f, lim: lim.error_repeat_on and f.errors.count >= lim.error_repeat,
        lambda f, _: f.errors.count,
        lambda f, n: (
            f"WARNING: {f.call.tool_name} has failed {n} times in this run with the same error. "
            "Stop retrying the same failing action; change your approach or report the failure."
        ),
        lambda f: f"error:{f.call.tool_name}:{f.errors.latest_result_hash}",
    ),
)

_LIVENESS_DETECTORS = frozenset({"known_poll_no_progress", "ping_pong", "cycle", "argument_churn"})


def evaluate(facts: Facts, limits: Limits, rules: Iterable[Rule] = RULES) -> Detection | None:
    """The first rule that fires, as a :class:`Detection` (spec §d precedence)."""
    for rule in rules:
        if not rule.fires(facts, limits):
            continue
        count = rule.count(facts, limits)
        liveness = None
        if (
            rule.level == "warning"
            and rule.detector in _LIVENESS_DETECTORS
            and facts.churn.count >= limits.warning
        ):
            liveness = "argument_churn"
        paired = facts.ping_pong.paired_tool_name if rule.detector == "ping_pong" else None
        return Detection(
            level=rule.level,
            detector=rule.detector,
            count=count,
            message=rule.message(facts, count),
            paired_tool_name=paired,
            warning_key=rule.key(facts),
            liveness_signal=liveness,
        )
    return None
