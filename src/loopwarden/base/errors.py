"""Every loopwarden exception, so a host can catch ``LoopwardenError`` alone and a reader finds
them all in one place.

Exceptions that also carry a familiar meaning keep it as a second base (``ConfigError`` is a
``ValueError``); the rest subclass ``RuntimeError`` through the root. Each is also importable
from the module that raises it (``loopwarden.config``, ``loopwarden.guard.stores``, ...)::

    RuntimeError
     └─ LoopwardenError                    the root
         ├─ LoopTerminatedError            a run ended by the terminal stop (spec §f.1)
         ├─ LoopBlockedError               a blocked call, raised by @guard.tool / guard.wrap
         ├─ CompactionLoopPersistedError   a loop survived compaction (spec §g)
         ├─ StoreError                     a store unreachable or failing
         ├─ CallbackError                  a transcript reader's on_problem callback raised
         ├─ ConfigError (+ ValueError)     an invalid config: file, key path, value
         ├─ HookPayloadError (+ ValueError)  not a Claude Code hook input
         ├─ LabelError (+ ValueError)      an unusable labels file (``eval``)
         └─ CalibrationError (+ ValueError)  too few good runs (``calibrate``)
    ValueError
     └─ SettingsError                      Claude Code settings loopwarden will not edit
    OSError
     └─ NotRegularFileError                a transcript path that is not a regular file
    Exception
     └─ TokenizerError                     a tokenizer that cannot be used (``scan --tokens``)

Two live with their door, as their second base is the framework's own exception class:
``AgentsLoopTerminatedError`` and ``AgentsCompactionLoopPersistedError`` in
:mod:`loopwarden.integrations.openai_agents` (they subclass the errors above and
``agents.AgentsException``).

``ConfigError`` is written with the key-path text below (``key_segment`` and its helpers),
which the config floor uses to name keys the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from typing import Protocol

    # What the errors read of the engine's and the guard's values, without importing them
    # (this floor imports none above it, not even for annotations).
    class _Detection(Protocol):
        @property
        def message(self) -> str: ...

    class _BlockedVerdict(Protocol):
        @property
        def message(self) -> str | None: ...

        def blocked_result(self) -> dict[str, Any]: ...

    class _CompactionVerdict(Protocol):
        @property
        def message(self) -> str | None: ...

        @property
        def count(self) -> int: ...

        @property
        def tool_name(self) -> str | None: ...


__all__ = [
    "CalibrationError",
    "CallbackError",
    "CompactionLoopPersistedError",
    "ConfigError",
    "HookPayloadError",
    "LabelError",
    "LoopBlockedError",
    "LoopTerminatedError",
    "LoopwardenError",
    "NotRegularFileError",
    "SettingsError",
    "StoreError",
    "TokenizerError",
    "key_segment",
]


class LoopwardenError(RuntimeError):
    """Base class of every exception loopwarden raises."""


class LoopTerminatedError(LoopwardenError):
    """A run ended by the terminal stop: a second critical loop in the same run, after the
    model had its one recovery turn (spec §f.1). ``detection`` is the critical that ended it;
    ``message`` is the stop message a door shows as the run's final answer."""

    def __init__(self, message: str, detection: _Detection | None = None, *,
                 tool_name: str | None = None, session: str | None = None,
                 run_id: str | None = None, result: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detection = detection
        self.tool_name = tool_name
        self.session = session
        self.run_id = run_id
        #: What the blocked call would have handed the model (an OpenClaw-shaped result).
        self.result = result


class LoopBlockedError(LoopwardenError):
    """Raised by ``@guard.tool`` / ``guard.wrap`` for a blocked call when asked to raise."""

    def __init__(self, verdict: _BlockedVerdict) -> None:
        super().__init__(verdict.message or "tool call blocked by loopwarden")
        self.verdict = verdict

    @property
    def blocked_result(self) -> dict[str, Any]:
        """The blocked call's OpenClaw-shaped tool result (see :meth:`Verdict.blocked_result`)."""
        return self.verdict.blocked_result()


class CompactionLoopPersistedError(LoopwardenError):
    """Raised into the agent when a loop survived compaction; the run should end."""

    detector = "compaction_loop_persisted"

    def __init__(self, message: str, *, count: int = 0, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.count = count
        self.tool_name = tool_name

    @property
    def name(self) -> str:
        """OpenClaw's name for this error, ``PostCompactionLoopPersistedError`` (spec §g)."""
        return "PostCompactionLoopPersistedError"

    @classmethod
    def from_verdict(cls, verdict: _CompactionVerdict) -> CompactionLoopPersistedError:
        """The error for an aborting verdict: its message, count and tool."""
        return cls(verdict.message or cls.detector, count=verdict.count,
                   tool_name=verdict.tool_name)


class StoreError(LoopwardenError):
    """A store could not be reached or failed; the guard fails open (or closed) on it."""


class CallbackError(LoopwardenError):
    """Carries an exception raised by the caller's ``on_problem`` through the safety net.

    The defensive wrapper around every reader swallows reader bugs, but a callback that raises
    is the caller asking to stop (a strict mode), so that exception must reach the caller.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class HookPayloadError(LoopwardenError, ValueError):
    """The hook payload is not a Claude Code hook input loopwarden can read."""


class LabelError(LoopwardenError, ValueError):
    """A labels file that cannot be used; the message names the entry and the field."""


class CalibrationError(LoopwardenError, ValueError):
    """Too few good runs for the requested bound, or no runs at all."""


class SettingsError(ValueError):
    """The settings hold something loopwarden will not edit (``hooks`` that is no object...)."""


class NotRegularFileError(OSError):
    """Raised by :func:`~loopwarden.offline.transcripts.open_regular` for anything that is not
    a regular file."""


class TokenizerError(Exception):
    """A tokenizer that cannot be used here: not installed, or its encoding cannot be loaded."""


# --- ConfigError and the key-path text it is written with --------------------------------------

# (key path, reason, bad value) of one validation problem.
Issue = tuple[str, str, object]


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


# "No value": a config value may itself be None (JSON null), so None cannot mean absent.
_UNSET: Final = _Unset()


class ConfigError(LoopwardenError, ValueError):
    """An invalid loop detection config, naming the file, the key path and the bad value."""

    file: str | None
    path: str
    value: object
    reason: str
    line: int | None
    column: int | None

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        path: str = "",
        value: object = _UNSET,
        line: int | None = None,
        column: int | None = None,
        others: Sequence[Issue] = (),
    ) -> None:
        self.reason = reason
        self.file = file
        self.path = path
        self._has_value = value is not _UNSET
        self.value = None if value is _UNSET else value
        self.line = line
        self.column = column
        self.others = tuple(others)
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.file, self._position(), self.path) if p]
        text = _with_value(self.reason, self.value, self._has_value)
        head = ": ".join([*parts, text])
        also = (f"  also: {_join_path_text(p, _with_value(r, v, True))}" for p, r, v in self.others)
        return "\n".join([head, *also])

    def _position(self) -> str:
        if self.line is None:
            return ""
        return f"line {self.line}" + (f", column {self.column}" if self.column else "")

    def relocated(self, *, file: str | None, prefix: str) -> ConfigError:
        """The same error seen from a larger document: under ``prefix`` and inside ``file``."""
        return ConfigError(
            self.reason,
            file=file if file is not None else self.file,
            path=_join_path(prefix, self.path),
            value=self.value if self._has_value else _UNSET,
            line=self.line,
            column=self.column,
            others=[(_join_path(prefix, p), r, v) for p, r, v in self.others],
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments would otherwise be lost when pickling across processes.
        value = self.value if self._has_value else _UNSET
        return (
            _rebuild_config_error,
            (
                self.reason,
                self.file,
                self.path,
                self._has_value,
                value,
                self.line,
                self.column,
                self.others,
            ),
        )


def _rebuild_config_error(
    reason: str,
    file: str | None,
    path: str,
    has_value: bool,
    value: object,
    line: int | None,
    column: int | None,
    others: Sequence[Issue],
) -> ConfigError:
    return ConfigError(
        reason,
        file=file,
        path=path,
        value=value if has_value else _UNSET,
        line=line,
        column=column,
        others=others,
    )


def _with_value(reason: str, value: object, has_value: bool) -> str:
    return f"{reason} (got {_describe(value)})" if has_value else reason


def _describe(value: object) -> str:
    """A short, JSON-flavoured rendering of a config value for error messages."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        text = json.dumps(value)
    elif isinstance(value, Mapping):
        text = "an object"
    elif isinstance(value, (list, tuple)):
        text = "a list"
    else:
        text = f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _join_path(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def _join_path_text(path: str, text: str) -> str:
    return f"{path}: {text}" if path else text


def key_segment(key: str) -> str:
    """``.key``, or ``["key"]`` when the key would not read as one path segment."""
    return f".{key}" if re.fullmatch(r"[A-Za-z_][\w-]*", key) else f"[{json.dumps(key)}]"


def _child_path(path: str, key: str) -> str:
    return _join_path(path, key_segment(key).removeprefix("."))
