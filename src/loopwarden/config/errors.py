"""``ConfigError`` and the key-path text it is written with.

Every config problem, from the file system to a threshold out of order, ends as one
``ConfigError`` naming the file, the position or key path, the reason and the bad value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..base.errors import LoopwardenError

__all__ = ["ConfigError", "Issue"]

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


def _key_segment(key: str) -> str:
    """``.key``, or ``["key"]`` when the key would not read as one path segment."""
    return f".{key}" if re.fullmatch(r"[A-Za-z_][\w-]*", key) else f"[{json.dumps(key)}]"


def _child_path(path: str, key: str) -> str:
    return _join_path(path, _key_segment(key).removeprefix("."))
