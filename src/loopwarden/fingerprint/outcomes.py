"""Outcome hashing (§c.3-§c.6): what one tool result or error contributes to the loop
history, following OpenClaw's order, with the built-in projections of profiled tools.
"""

from __future__ import annotations

import hashlib
import math
import types
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

import orjson

from ..base.types import MISSING
from .canonical import _FLAT_ITEMS, _PLAIN_TEXT_LEAVES, canonical_json_slow, orjson_safe
from .errors import _js_number_text, error_text
from .hashing import _UNTRUSTED_NEEDLE_BYTES, _sha256_hex, digest, mask_when_spans
from .profiles import (
    PROJECTION_EXEC,
    PROJECTION_PROCESS,
    PROJECTION_WRITE,
    ProfileRegistry,
    ToolProfile,
    default_registry,
)
from .profiles.builtin import SEND_VOLATILE_KEYS
from .results import _EMPTY, _details_and_text, _is_mapping
from .strip import _strip_keys
from .unknown_tools import extract_unknown_tool
from .values import _FAST_OPTIONS

#: The kinds of outcome the history tells apart (``Outcome.outcome_kind``). Defined here, below
#: the history, which imports them: one spelling for the hashes and the detectors.
OUTCOME_VETO: Final = "tool-loop-veto"
OUTCOME_TERMINAL_EXEC_FAILURE: Final = "terminal-exec-failure"
OUTCOME_WRITE_MUTATION: Final = "write-mutation"


class Outcome(NamedTuple):
    """What one tool outcome contributes to the loop history.

    An immutable value built for nearly every result: a named tuple costs a fifth of a frozen
    dataclass to build."""

    result_hash: str | None  # 64-hex, "error:<64hex>", or None (nothing to record)
    outcome_kind: str | None = None  # one of the OUTCOME_* kinds above
    failure_identity_hash: str | None = None
    no_progress: bool = False
    unknown_tool_name: str | None = None
    # ``early`` preset: which failure this was, whatever the arguments (for error repeat).
    error_identity_hash: str | None = None
    # ``detectors.failureRepeat``: which failure this was, the call's argument values masked.
    echo_failure_hash: str | None = None


_NOTHING: Final = Outcome(None)
_new_tuple: Final = tuple.__new__


def _plain(result_hash: str) -> Outcome:
    """A hash-only Outcome (tuple.__new__ skips the named tuple's keyword handling: half the
    cost, for nearly every result)."""
    return _new_tuple(Outcome, (result_hash, None, None, False, None, None, None))


def text_outcome(text: str) -> Outcome:
    """The outcome of a text result (no error), whatever the tool's profile: projections and
    volatile keys apply to structured results only."""
    return _plain(digest(text))


_VETO: Final = Outcome(None, outcome_kind=OUTCOME_VETO)


def outcome_of(
    tool_name: str,
    args: object,
    result: object = MISSING,
    error: object = MISSING,
    *,
    registry: ProfileRegistry | None = None,
    extended_unknown: bool = False,
) -> Outcome:
    """Hash one outcome following OpenClaw's order (§c.3); never raises.

    A mapping result is OpenClaw-shaped when its ``content`` is a list or its ``details`` a
    mapping; any other mapping is treated as its own ``details`` (with empty text), so plain
    dict results from Python tools keep every field significant.
    """
    try:
        profile = (registry or default_registry).get(tool_name)
    except Exception:
        return _raw_outcome(tool_name, result, error)
    return profiled_outcome(tool_name, profile, args, result, error,
                            extended_unknown=extended_unknown)


def profiled_outcome(
    tool_name: str,
    profile: ToolProfile | None,
    args: object,
    result: object = MISSING,
    error: object = MISSING,
    *,
    extended_unknown: bool = False,
) -> Outcome:
    """:func:`outcome_of` for a caller that has already looked up the tool's profile."""
    try:
        return _outcome(profile, args, result, error, extended_unknown)
    except Exception:
        return _raw_outcome(tool_name, result, error)


def _raw_outcome(tool_name: str, result: object, error: object) -> Outcome:
    # Defensive: a hash of the raw value still lets identical outcomes match.
    return Outcome(_sha256_hex(canonical_json_slow((tool_name, result, error))))


def _outcome(
    profile: ToolProfile | None,
    args: object,
    result: object,
    error: object,
    extended_unknown: bool = False,
) -> Outcome:
    if error is not MISSING and error is not None:
        text = error_text(error)
        return Outcome(
            "error:" + digest(text),
            no_progress=True,
            unknown_tool_name=extract_unknown_tool(text, extended=extended_unknown),
        )
    # (The exact-type tests skip the ABC check, ~0.4 us, for the usual str and dict results.)
    if type(result) is str or (type(result) is not dict and not _is_mapping(result)):
        if result is MISSING:
            return _NOTHING
        if profile is not None and profile.volatile_keys:
            result = _strip_keys(result, profile.volatile_keys, message_ids=False)
        return _plain(digest(result))
    details, text = _details_and_text(result)
    if details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop":
        return _VETO
    if profile is None:
        return _plain(_details_digest(details, text))
    return _profiled(profile, args, details, text)


def _details_digest(details: Mapping[str, object], text: str) -> str:
    """``digest({"details": details, "text": text})``. The text is a ``str`` already, so only
    the details take the quick check (this runs for nearly every structured result)."""
    if details is _EMPTY:
        details = {}
    if type(details) is dict and len(details) <= _FLAT_ITEMS:  # (inline, as in canonical_json)
        safe = True
        for child in details.values():
            if type(child) not in _PLAIN_TEXT_LEAVES:
                safe = orjson_safe(details)
                break
    else:
        safe = orjson_safe(details)
    if safe and type(text) is str:
        try:
            data = orjson.dumps({"details": details, "text": text}, option=_FAST_OPTIONS)
        except Exception:
            pass
        else:
            if _UNTRUSTED_NEEDLE_BYTES not in data:
                return hashlib.sha256(data).hexdigest()
    return digest({"details": details, "text": text})


def _profiled(
    profile: ToolProfile, args: object, details: Mapping[str, object], text: str
) -> Outcome:
    if profile.volatile_keys:
        details = _strip_keys(details, profile.volatile_keys, message_ids=False)  # type: ignore[assignment]
    if profile.projection is not None:
        project = PROJECTIONS.get(profile.projection)
        projected = None if project is None else project(args, details, text)
        if projected is not None:
            return projected
    if profile.is_send_like(args):
        return _plain(digest(_strip_keys(details, SEND_VOLATILE_KEYS, message_ids=True)))
    return _plain(_details_digest(details, text))


#: A built-in outcome projection: (the call's args, the result's details with volatile keys
#: stripped, its text) -> the outcome, or None when the result is hashed like any other.
Projection = Callable[[object, Mapping[str, object], str], "Outcome | None"]


def _exec_outcome(args: object, details: Mapping[str, object], text: str) -> Outcome | None:
    status = details.get("status")
    if status == "running":
        tail = details.get("tail")
        return _plain(digest({"status": status, "tail": tail if isinstance(tail, str) else ""}))
    if status in ("completed", "failed"):
        return _exec_finished(status, details, text)
    if status in ("approval-pending", "approval-unavailable"):
        return Outcome(
            digest(
                {
                    "status": status,
                    "reason": _str_or(details.get("reason"), None),
                    "host": _str_or(details.get("host"), None),
                    "command": _str_or(details.get("command"), ""),
                    "warningText": _str_or(details.get("warningText"), ""),
                }
            )
        )
    return None


def _exec_finished(status: str, details: Mapping[str, object], text: str) -> Outcome:
    exit_code = _number_or_none(details.get("exitCode"))
    timed_out = details.get("timedOut") is True
    output = _nonempty(details.get("aggregated")) or text
    projection = {"status": status, "exitCode": exit_code, "timedOut": timed_out}
    result_hash = digest({**projection, "output": output})
    if not _is_terminal_failure(exit_code, timed_out, output):
        return _plain(result_hash)
    masked = mask_when_spans(output)
    identity = result_hash if masked == output else digest({**projection, "output": masked})
    return Outcome(
        result_hash, outcome_kind=OUTCOME_TERMINAL_EXEC_FAILURE, failure_identity_hash=identity
    )


def _is_terminal_failure(exit_code: float | None, timed_out: bool, output: str) -> bool:
    if exit_code is None or not math.isfinite(exit_code) or exit_code == 0 or timed_out:
        return False
    footer = f"(Command exited with code {_js_number_text(exit_code)})"
    return output != "" and output != footer


def _write_outcome(args: object, details: Mapping[str, object], text: str) -> Outcome | None:
    changed = details.get("changed")
    if changed is False:
        return Outcome(digest({"status": "unchanged"}), no_progress=True)
    if changed is True:
        return Outcome(_details_digest(details, text), outcome_kind=OUTCOME_WRITE_MUTATION)
    return None


_PROCESS_FIELDS: Final = {
    "poll": ("exitCode", "exitSignal", "aggregated"),
    "log": ("totalLines", "totalChars", "truncated", "exitCode", "exitSignal"),
}


def _process_outcome(args: object, details: Mapping[str, object], text: str) -> Outcome | None:
    action = args.get("action") if isinstance(args, Mapping) else None
    if action not in _PROCESS_FIELDS:
        return None
    projection: dict[str, object] = {"action": action, "text": text}
    # JS leaves a missing status `undefined`; omitting the key keeps it distinct from null.
    if "status" in details:
        projection["status"] = details["status"]
    for key in _PROCESS_FIELDS[action]:
        projection[key] = details.get(key)
    return _plain(digest(projection))


#: The built-in projections by the name a profile gives them (``ToolProfile.projection``).
#: A new projection is one function above and one entry here (its name joins the others in
#: loopwarden.fingerprint.profiles.registry).
PROJECTIONS: Final[Mapping[str, Projection]] = types.MappingProxyType({
    PROJECTION_EXEC: _exec_outcome,
    PROJECTION_PROCESS: _process_outcome,
    PROJECTION_WRITE: _write_outcome,
})


def _str_or(value: object, default: str | None) -> str | None:
    return value if isinstance(value, str) else default


def _nonempty(value: object) -> str | None:
    if isinstance(value, str):
        stripped = value.strip()
        return stripped or None
    return None


def _number_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JS has one number type: 1.0 and 1 are the same exit code
    return value
