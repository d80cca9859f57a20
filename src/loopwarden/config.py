"""Loop detection configuration: the validated model, presets, and OpenClaw config loading.

OpenClaw keeps loop detection under ``tools.loopDetection`` with per-agent overrides
(``agents.list[].tools.loopDetection`` or ``agents.entries.<id>.tools.loopDetection``).
Validation follows the V1/V2 zod schema (spec §a.2), block by block and only for the keys each
block has; the blocks are then merged (§a.4), and only the merged result gets preset defaults
and, when it breaks the threshold order, the V1 run-time repair (§a.3) with a logged warning.

``perTool`` (a loopwarden extension) maps tool names and globs to an exemption or thresholds
of their own; it merges per pattern, key by key, and its thresholds are resolved against the
effective top-level ones (:meth:`LoopDetectionConfig.tool_thresholds`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final, Literal, get_args, get_origin

import json5
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from typing_extensions import Self

from .errors import LoopwardenError

__all__ = [
    "MAX_CONFIG_BYTES",
    "PRESETS",
    "ConfigError",
    "DetectorsConfig",
    "LoadedConfig",
    "LoopDetectionConfig",
    "PerToolConfig",
    "PostCompactionGuardConfig",
    "config_from_mapping",
    "load_config",
    "load_config_with_origins",
]

logger = logging.getLogger("loopwarden")

PresetName = Literal["openclaw", "early"]

# Defaults for threshold keys the user did not set. "openclaw" is exactly spec §a.5; "early" is
# loopwarden's stricter detection, to be tuned by the accuracy work (keep every number here).
PRESETS: Final[dict[str, dict[str, int]]] = {
    "openclaw": {
        "history_size": 30,
        "warning_threshold": 10,
        "critical_threshold": 20,
        "unknown_tool_threshold": 10,
        "global_circuit_breaker_threshold": 30,
        "error_repeat_threshold": 10,
    },
    "early": {
        "history_size": 30,
        # A loop is 6+ no-progress calls; post-outcome checks warn on the 6th call's result.
        "warning_threshold": 6,
        "critical_threshold": 10,
        "unknown_tool_threshold": 5,
        "global_circuit_breaker_threshold": 20,
        "error_repeat_threshold": 6,
    },
}

_WARNING_ORDER_MESSAGE: Final = (
    "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
)
_CRITICAL_ORDER_MESSAGE: Final = (
    "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
)


@dataclass(frozen=True, slots=True)
class _MergedScopes:
    """Validation context of a global + agent merge: the in-block order rule does not apply
    across scopes (spec §a.2); the merged values are repaired instead (§a.3)."""

    label: str | None


# Keys of PydanticCustomError.context that carry a precise key path and value out of
# model-level validators, whose errors pydantic would otherwise locate at the object itself.
_CTX_PATH: Final = "lw_path"
_CTX_VALUE: Final = "lw_value"


# (key path, reason, bad value) of one validation problem.
Issue = tuple[str, str, object]


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


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


# --- field-level checks -------------------------------------------------------------------


def _positive_int(value: object) -> int:
    if isinstance(value, bool):
        raise PydanticCustomError("positive_int", "must be a positive integer")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)  # JSON5 numbers such as 10.0
    if not isinstance(value, int) or value <= 0:
        raise PydanticCustomError("positive_int", "must be a positive integer")
    return value


def _strict_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise PydanticCustomError("bool", "must be true or false")
    return value


def _optional_bool(value: object) -> bool | None:
    return None if value is None else _strict_bool(value)


def _object_or_model(value: object) -> object:
    if isinstance(value, (Mapping, BaseModel)):
        return value
    raise PydanticCustomError("object", "must be an object")


def _canonical_keys(model: type[BaseModel], data: Mapping[Any, Any]) -> dict[Any, Any]:
    """Rename snake_case keys to their camelCase alias, refusing a key given both ways."""
    aliases = {name: f.alias or name for name, f in model.model_fields.items()}
    out: dict[Any, Any] = {}
    for key, value in data.items():
        alias = aliases.get(key, key) if isinstance(key, str) else key
        if alias in out:
            raise PydanticCustomError(
                "duplicate_key",
                "given twice (as {alias} and as its snake_case name)",
                {"alias": alias, _CTX_PATH: alias, _CTX_VALUE: value},
            )
        out[alias] = value
    return out


class _ConfigModel(BaseModel):
    """Base for the config models: every validation failure surfaces as :class:`ConfigError`."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
    )

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(exc, type(self)) from None

    # This __init__ only translates the error. Marked as pydantic's own (as RootModel does), it
    # keeps pydantic from routing model_validate and nested models through it: validators then
    # run once per object and see the validation context.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _config_error(exc, cls) from None

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _config_error(exc, cls) from None

    @model_validator(mode="before")
    @classmethod
    def _check_shape(cls, data: Any) -> Any:
        if isinstance(data, BaseModel):
            return data
        if not isinstance(data, Mapping):
            raise PydanticCustomError("object", "must be an object")
        return _canonical_keys(cls, data)


class DetectorsConfig(_ConfigModel):
    """Per-detector switches (``tools.loopDetection.detectors``)."""

    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    argument_churn: bool = True
    cycle: bool = True  # loopwarden extension: cycles of period 3-6, on in both presets
    # loopwarden extension; None lets the preset decide (on for "early").
    error_repeat: bool | None = None

    _bools = field_validator(
        "generic_repeat", "known_poll_no_progress", "ping_pong", "argument_churn", mode="before"
    )(_strict_bool)
    _cycle_bool = field_validator("cycle", mode="before")(_strict_bool)
    _optional = field_validator("error_repeat", mode="before")(_optional_bool)


class PostCompactionGuardConfig(_ConfigModel):
    """``tools.loopDetection.postCompactionGuard``."""

    window_size: int = 3

    _ints = field_validator("window_size", mode="before")(_positive_int)


_THRESHOLD_FIELDS: Final = tuple(PRESETS["openclaw"])

# (lower, upper, message when a single object sets both out of order), checked in this order.
_THRESHOLD_ORDER: Final = (
    ("warning_threshold", "critical_threshold", _WARNING_ORDER_MESSAGE),
    ("critical_threshold", "global_circuit_breaker_threshold", _CRITICAL_ORDER_MESSAGE),
)


# The thresholds a perTool entry may set, lowest first.
_TOOL_THRESHOLDS: Final = (
    "warning_threshold", "critical_threshold", "global_circuit_breaker_threshold"
)


class PerToolConfig(_ConfigModel):
    """One ``tools.loopDetection.perTool`` entry: for the tools its pattern matches, either no
    verdicts at all (``exempt``) or thresholds of their own.

    Thresholds left out follow the top-level ones, moved as needed to stay in order around
    the ones given (see :meth:`LoopDetectionConfig.tool_thresholds`).
    """

    exempt: bool = False
    warning_threshold: int | None = None
    critical_threshold: int | None = None
    global_circuit_breaker_threshold: int | None = None

    _exempt = field_validator("exempt", mode="before")(_strict_bool)
    _ints = field_validator(*_TOOL_THRESHOLDS, mode="before")(_positive_int)

    @model_validator(mode="after")
    def _check_entry(self, info: ValidationInfo) -> Self:
        """Like a block's order rule (spec §a.2), for what this one entry sets together; an
        agent's entry merged over a global one is repaired instead (see ``tool_thresholds``)."""
        if isinstance(info.context, _MergedScopes):
            return self
        explicit = self.model_fields_set
        if self.exempt:
            given = next((name for name in _TOOL_THRESHOLDS if name in explicit), None)
            if given is not None:
                raise PydanticCustomError(
                    "exempt_thresholds",
                    "an exempt tool gets no verdicts, so it takes no thresholds; "
                    "remove exempt or {key}",
                    {"key": to_camel(given), _CTX_PATH: "exempt", _CTX_VALUE: True},
                )
        for lower, upper, _ in _THRESHOLD_ORDER:
            if lower in explicit and upper in explicit:
                low, high = getattr(self, lower), getattr(self, upper)
                if low >= high:
                    raise PydanticCustomError(
                        "threshold_order",
                        "must be greater than {lower} ({low}) in the same perTool entry",
                        {"lower": to_camel(lower), "low": low,
                         _CTX_PATH: to_camel(upper), _CTX_VALUE: high},
                    )
        return self


class _FrozenDict(dict[str, PerToolConfig]):
    """The ``perTool`` mapping: read-only and hashable, so the config stays immutable and
    hashable (the engine caches limits per tool name on that)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("perTool is read-only; use with_overrides(per_tool=...)")

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]

    def copy(self) -> _FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


_GLOB_CHARS: Final = frozenset("*?[")


def _tool_patterns(value: object) -> object:
    """``perTool`` must be an object whose keys are tool names or globs (non-empty text)."""
    if isinstance(value, _FrozenDict):
        return value
    if not isinstance(value, Mapping):
        raise PydanticCustomError("object", "must be an object")
    for key in value:
        if not isinstance(key, str) or not key:
            raise PydanticCustomError(
                "tool_pattern",
                "a tool name or glob must be a non-empty string",
                {_CTX_PATH: str(key), _CTX_VALUE: key},
            )
    return value


class _LoopDetectionBlock(_ConfigModel):
    """One ``loopDetection`` object as written: every key checked on its own, and the in-object
    order rule (spec §a.2) for the thresholds it sets together. Nothing is derived here.

    Config loading validates each global and agent block with this before merging them, so the
    merge sees exactly what each block said.
    """

    enabled: bool | None = None
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    error_repeat_threshold: int = 10
    detectors: DetectorsConfig = Field(default_factory=DetectorsConfig)
    post_compaction_guard: PostCompactionGuardConfig = Field(
        default_factory=PostCompactionGuardConfig
    )
    per_tool: Mapping[str, PerToolConfig] = Field(default_factory=_FrozenDict)
    preset: PresetName = "openclaw"

    _enabled = field_validator("enabled", mode="before")(_optional_bool)
    _ints = field_validator(*_THRESHOLD_FIELDS, mode="before")(_positive_int)
    _objects = field_validator("detectors", "post_compaction_guard", mode="before")(
        _object_or_model
    )

    _patterns = field_validator("per_tool", mode="before")(_tool_patterns)

    @field_validator("per_tool", mode="after")
    @classmethod
    def _freeze(cls, value: Mapping[str, PerToolConfig]) -> Mapping[str, PerToolConfig]:
        if isinstance(value, _FrozenDict):
            return value
        # Exempt wins over thresholds an entry merged from another scope brought (within one
        # entry they are an error): an exempt tool has no use for them.
        return _FrozenDict({
            pattern: PerToolConfig(exempt=True)
            if entry.exempt and entry.model_fields_set - {"exempt"} else entry
            for pattern, entry in value.items()
        })

    @field_validator("preset", mode="before")
    @classmethod
    def _known_preset(cls, value: object) -> object:
        if not isinstance(value, str) or value not in PRESETS:
            names = ", ".join(json.dumps(name) for name in PRESETS)
            raise PydanticCustomError("preset", "must be one of {names}", {"names": names})
        return value

    @model_validator(mode="after")
    def _check_order(self, info: ValidationInfo) -> Self:
        """Spec §a.2: the order rule applies only to keys set together in one object."""
        if isinstance(info.context, _MergedScopes):
            return self
        explicit = self.model_fields_set
        for lower, upper, message in _THRESHOLD_ORDER:
            if lower in explicit and upper in explicit:
                upper_value = getattr(self, upper)
                if getattr(self, lower) >= upper_value:
                    raise PydanticCustomError(
                        "threshold_order",
                        message,
                        {_CTX_PATH: to_camel(upper), _CTX_VALUE: upper_value},
                    )
        return self

    def explicit_mapping(self) -> dict[str, Any]:
        """The explicitly set keys, camelCase, as a config file would hold them."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class LoopDetectionConfig(_LoopDetectionBlock):
    """The effective loop detection settings (DESIGN §2); immutable.

    Attributes hold effective values: thresholds the user did not set come from ``PRESETS``
    for the chosen ``preset``, and thresholds out of order are repaired (spec §a.3, logged);
    ``model_fields_set`` lists what was set explicitly.
    """

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> Self:
        # Runs after the inherited order check, once per validation.
        self._apply_preset()
        repairs = self._repair_order() + self._tool_repairs()
        if repairs:
            label = info.context.label if isinstance(info.context, _MergedScopes) else None
            logger.warning(
                "loop detection thresholds out of order%s; repaired %s",
                f" in {label}" if label else "",
                "; ".join(text for _, text in repairs),
                extra={"loopwarden_repaired": tuple(key for key, _ in repairs)},
            )
        return self

    def _apply_preset(self) -> None:
        for name, value in PRESETS[self.preset].items():
            if name not in self.model_fields_set:
                # The model is frozen; this runs during construction, before anyone holds it.
                object.__setattr__(self, name, value)

    def _repair_order(self) -> list[tuple[str, str]]:
        """Spec §a.3: raise each upper threshold to one above the lower one (in this order)."""
        repairs: list[tuple[str, str]] = []
        for lower, upper, _ in _THRESHOLD_ORDER:
            low, high = getattr(self, lower), getattr(self, upper)
            if high <= low:
                object.__setattr__(self, upper, low + 1)
                text = (
                    f"{to_camel(upper)} {high} -> {low + 1} (must be above {to_camel(lower)} {low})"
                )
                repairs.append((upper, text))
        return repairs

    def _tool_repairs(self) -> list[tuple[str, str]]:
        """Per-tool thresholds set out of order (only possible across scopes) are repaired
        like the top-level ones; logged once, here, with them."""
        top = self._top_thresholds()
        repairs: list[tuple[str, str]] = []
        for pattern, entry in self.per_tool.items():
            if not entry.exempt:
                repairs += _fit_thresholds(entry, top, _child_path("perTool", pattern))[1]
        return repairs

    def _top_thresholds(self) -> tuple[int, int, int]:
        return (self.warning_threshold, self.critical_threshold,
                self.global_circuit_breaker_threshold)

    def tool_rule(self, tool_name: str) -> tuple[str, PerToolConfig] | None:
        """The ``perTool`` entry that applies to ``tool_name``, with its pattern, or None.

        The entry named exactly after the tool wins; otherwise the longest matching glob
        (``fnmatch`` syntax, case-sensitive), the alphabetically first of equally long ones.
        One entry applies as a whole: keys it leaves out come from the top level, never from
        another matching pattern.
        """
        rules = self.per_tool
        if not rules:
            return None
        entry = rules.get(tool_name)
        if entry is not None:
            return tool_name, entry
        best: str | None = None
        for pattern in rules:
            if _GLOB_CHARS.isdisjoint(pattern) or not fnmatchcase(tool_name, pattern):
                continue
            if best is None or (-len(pattern), pattern) < (-len(best), best):
                best = pattern
        return None if best is None else (best, rules[best])

    def tool_thresholds(self, tool_name: str) -> tuple[int, int, int] | None:
        """(warning, critical, global circuit breaker) for detections about ``tool_name``;
        None when its ``perTool`` entry exempts it.

        Thresholds the entry leaves out are the top-level ones, moved only as far as needed
        to stay in order around those it sets (``criticalThreshold: 5`` alone warns at 4).
        """
        rule = self.tool_rule(tool_name)
        if rule is None:
            return self._top_thresholds()
        if rule[1].exempt:
            return None
        return _fit_thresholds(rule[1], self._top_thresholds(), "")[0]

    @property
    def rolling_enabled(self) -> bool:
        """The rolling-history detectors need ``enabled`` to be exactly ``True``."""
        return self.enabled is True

    @property
    def compaction_guard_enabled(self) -> bool:
        """The post-compaction guard runs unless ``enabled`` is exactly ``False`` (spec §k.2)."""
        return self.enabled is not False

    @property
    def error_repeat_enabled(self) -> bool:
        if self.detectors.error_repeat is not None:
            return self.detectors.error_repeat
        return self.preset == "early"

    @property
    def post_outcome_warnings(self) -> bool:
        return self.preset == "early"

    @property
    def mask_volatile(self) -> bool:
        """Mask timestamps, durations, ids and pids in every outcome (profiles may override)."""
        return self.preset == "early"

    @property
    def learn_volatile(self) -> bool:
        """Learn, per tool, result fields that change on every otherwise-identical outcome."""
        return self.preset == "early"

    @property
    def progress_aware(self) -> bool:
        """Count a repeat as loop evidence only without progress: identical outcomes, no fresh
        mutation in between, pacing calls neutral, back-off honoured, errors inside results."""
        return self.preset == "early"

    @property
    def extended_unknown_tools(self) -> bool:
        """Recognise other frameworks' "tool not found" wordings and namespaced tool names."""
        return self.preset == "early"

    def with_overrides(self, **changes: Any) -> LoopDetectionConfig:
        """A validated copy with ``changes`` applied (camelCase or snake_case keys).

        A mapping given for ``detectors`` or ``postCompactionGuard`` is merged key-wise into
        the current one, as a per-agent override would be. Thresholds not set explicitly are
        re-derived, so changing ``preset`` changes them too.
        """
        data = self.explicit_mapping()
        aliases = {name: f.alias or name for name, f in type(self).model_fields.items()}
        for key, value in changes.items():
            alias = aliases.get(key, key)
            current = data.get(alias)
            if isinstance(value, BaseModel):
                value = value.model_dump(by_alias=True, exclude_unset=True)
            if alias == _PER_TOOL and isinstance(current, Mapping) and isinstance(value, Mapping):
                value = _merge_per_tool(current, value)
            elif isinstance(current, Mapping) and isinstance(value, Mapping):
                nested = type(self).model_fields[_field_name(alias)].annotation
                value = _merge_keywise(current, value, nested)
            data[alias] = value
        return type(self).model_validate(data)


def _fit_thresholds(
    entry: PerToolConfig, top: tuple[int, int, int], where: str
) -> tuple[tuple[int, int, int], list[tuple[str, str]]]:
    """An entry's effective (warning, critical, breaker) and the repairs of values it set.

    Inherited values first move down to fit below the entry's own (never below 1); then, as
    spec §a.3 does, each upper value still not above the one below it is raised. Only the
    raising of an explicit value is a repair (reported with its key path under ``where``).
    """
    top_warning, top_critical, top_breaker = top
    breaker = entry.global_circuit_breaker_threshold or top_breaker
    critical = entry.critical_threshold or max(1, min(top_critical, breaker - 1))
    warning = entry.warning_threshold or max(1, min(top_warning, critical - 1))
    repairs: list[tuple[str, str]] = []
    if critical <= warning:
        if entry.critical_threshold is not None:
            repairs.append(_repair_text(where, "critical_threshold", critical,
                                        "warning_threshold", warning))
        critical = warning + 1
    if breaker <= critical:
        if entry.global_circuit_breaker_threshold is not None:
            repairs.append(_repair_text(where, "global_circuit_breaker_threshold", breaker,
                                        "critical_threshold", critical))
        breaker = critical + 1
    return (warning, critical, breaker), repairs


def _repair_text(where: str, upper: str, high: int, lower: str, low: int) -> tuple[str, str]:
    key = _join_path(where, to_camel(upper))
    return key, f"{key} {high} -> {low + 1} (must be above {to_camel(lower)} {low})"


def _merge_per_tool(base: Mapping[str, Any], over: Mapping[Any, Any]) -> dict[Any, Any]:
    """``perTool`` merges per pattern, and within a pattern key by key: a later entry (the
    agent's, an override's) changes only the keys it gives."""
    merged = dict(base)
    for pattern, entry in over.items():
        earlier = merged.get(pattern)
        if isinstance(entry, BaseModel):
            entry = entry.model_dump(by_alias=True, exclude_unset=True)
        if isinstance(earlier, BaseModel):
            earlier = earlier.model_dump(by_alias=True, exclude_unset=True)
        if isinstance(earlier, Mapping) and isinstance(entry, Mapping):
            entry = _merge_keywise(earlier, entry, PerToolConfig)
        merged[pattern] = entry
    return merged


def _field_name(alias: str) -> str:
    for name, field in LoopDetectionConfig.model_fields.items():
        if (field.alias or name) == alias:
            return name
    return alias


def _merge_keywise(base: Mapping[str, Any], over: Mapping[str, Any], model: Any) -> dict[str, Any]:
    merged = dict(base)
    if isinstance(model, type) and issubclass(model, BaseModel):
        aliases = {name: f.alias or name for name, f in model.model_fields.items()}
        merged.update({aliases.get(k, k): v for k, v in over.items()})
    else:
        merged.update(over)
    return merged


# --- ValidationError -> ConfigError -------------------------------------------------------


def _config_error(exc: ValidationError, model: type[BaseModel]) -> ConfigError:
    issues = [i for err in exc.errors(include_url=False) for i in _issues(err, model)]
    path, reason, value = issues[0]
    return ConfigError(reason, path=path, value=value, others=issues[1:])


def _issues(err: Mapping[str, Any], model: type[BaseModel]) -> list[Issue]:
    loc = tuple(err.get("loc", ()))
    ctx = err.get("ctx") or {}
    value = ctx.get(_CTX_VALUE, err.get("input"))
    if _CTX_PATH in ctx:
        loc = (*loc, ctx[_CTX_PATH])
    path = _loc_path(loc)
    if err.get("type") == "extra_forbidden":
        known = ", ".join(_aliases_at(model, loc[:-1]))
        return [(path, f"unknown key (valid keys: {known})", value)]
    return [(path, str(err.get("msg", "invalid value")), value)]


def _loc_path(loc: Sequence[Any]) -> str:
    """A pydantic location as a key path: ``perTool["browser*"].warningThreshold``."""
    path = ""
    for part in loc:
        segment = f"[{part}]" if isinstance(part, int) else _key_segment(str(part))
        path = _join_path(path, segment.removeprefix("."))
    return path


def _aliases_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The valid keys of the (nested) object at ``loc``, for "unknown key" hints."""
    current: Any = model
    parts = iter(loc)
    for part in parts:
        fields = {f.alias or n: f for n, f in current.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return []
        annotation = field.annotation
        if get_origin(annotation) is Mapping:  # perTool: the next part is a pattern
            annotation = get_args(annotation)[1]
            if next(parts, None) is None:
                return []
        if not isinstance(annotation, type):
            return []
        current = annotation
    return [f.alias or n for n, f in current.model_fields.items()]


# --- OpenClaw config documents ------------------------------------------------------------

# Larger than any real OpenClaw config by orders of magnitude; a file beyond it is a mistake
# (a log, a dump) and reading it whole would only exhaust memory.
MAX_CONFIG_BYTES: Final = 16 * 1024 * 1024

Scope = Literal["global", "agent"]


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A loaded config together with where each explicitly set key came from.

    ``origins`` maps camelCase key paths (``criticalThreshold``, ``detectors.pingPong``) to the
    scope whose block set them; keys not listed come from the preset or the model's defaults.
    ``agent_block`` is the key path of the agent override that was applied, None when no agent
    was asked for or the agent has no ``loopDetection`` override.
    """

    config: LoopDetectionConfig
    origins: Mapping[str, Scope]
    global_block: str | None
    agent_block: str | None


@dataclass(frozen=True, slots=True)
class _Block:
    path: str
    data: object


def load_config(path: str | os.PathLike[str], agent_id: str | None = None) -> LoopDetectionConfig:
    """Read an OpenClaw JSON5 config file and resolve loop detection for ``agent_id``."""
    return load_config_with_origins(path, agent_id).config


def load_config_with_origins(
    path: str | os.PathLike[str], agent_id: str | None = None
) -> LoadedConfig:
    """:func:`load_config`, also telling which block (global or the agent's) set each key."""
    file = os.fspath(path)
    return _resolve_document(_parse(_read_config_text(file), file), agent_id, file)


def _read_config_text(file: str) -> str:
    """The text of ``file``, which must be a regular file of at most ``MAX_CONFIG_BYTES``.

    Anything else (a named pipe, a device such as /dev/zero, a socket) is refused before it is
    opened: reading it could block forever or never end.
    """
    try:
        info = os.stat(file)
    except FileNotFoundError:
        raise ConfigError("config file not found", file=file) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file ({exc})", file=file) from None
    _require_regular_file(info, file)
    try:
        # O_NONBLOCK: should the path be swapped for a pipe after the stat, opening it does not
        # wait for a writer, and the fstat below refuses it.
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config file ({exc})", file=file) from None
    with os.fdopen(fd, "rb") as handle:
        try:
            _require_regular_file(os.fstat(handle.fileno()), file)
            # One byte more than allowed tells a file that grew past the limit from one at it.
            data = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read config file ({exc})", file=file) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise _too_large(file)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file ({exc})", file=file) from None
    # Universal newlines, as text-mode reading did: JSON5 error positions count lines.
    return text.replace("\r\n", "\n").replace("\r", "\n")


_FILE_KINDS: Final = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _require_regular_file(info: os.stat_result, file: str) -> None:
    mode = info.st_mode
    if stat.S_ISREG(mode):
        if info.st_size > MAX_CONFIG_BYTES:
            raise _too_large(file)
        return
    if stat.S_ISDIR(mode):
        raise ConfigError("is a directory, not a config file", file=file)
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
    raise ConfigError(f"is {kind}, not a config file (only regular files are read)", file=file)


def _too_large(file: str) -> ConfigError:
    limit = MAX_CONFIG_BYTES // (1024 * 1024)
    return ConfigError(f"config file is larger than {limit} MiB; refusing to read it", file=file)


_JSON5_POSITION = re.compile(r"^<string>:(?P<line>\d+) (?P<msg>.*?)(?: at column (?P<col>\d+))?$")


class _DuplicateKeys:
    """An ``object_pairs_hook`` that builds dicts and remembers those given a key twice."""

    def __init__(self) -> None:
        # (the object, its duplicated key, the earlier value, the later value)
        self.found: list[tuple[dict[str, Any], str, object, object]] = []

    def __call__(self, items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
        pairs = items if isinstance(items, list) else list(items)
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: dict[str, object] = {}
            for key, value in pairs:
                if key in seen:
                    self.found.append((obj, key, seen[key], value))
                    break
                seen[key] = value
        return obj


def _parse(text: str, file: str) -> Any:
    """Parse as strict JSON first (fast), as JSON5 only when that fails (json5 is pure Python,
    tens of seconds for a few MB). Both paths refuse duplicate keys."""
    hook = _DuplicateKeys()
    try:
        data = json.loads(text, object_pairs_hook=hook)
    except ValueError:
        hook = _DuplicateKeys()
        data = _parse_json5(text, file, hook)
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", file=file) from None
    if hook.found:
        raise _duplicate_key_error(data, hook.found[0], file)
    return data


def _parse_json5(text: str, file: str, hook: _DuplicateKeys) -> Any:
    try:
        return json5.loads(text, object_pairs_hook=hook)
    except (ValueError, RecursionError) as exc:
        match = _JSON5_POSITION.match(str(exc).strip())
        if match is None:
            raise ConfigError(f"invalid JSON5: {exc}", file=file) from None
        col = match.group("col")
        raise ConfigError(
            f"invalid JSON5: {match.group('msg')}",
            file=file,
            line=int(match.group("line")),
            column=int(col) if col else None,
        ) from None


def _duplicate_key_error(
    root: object, found: tuple[dict[str, Any], str, object, object], file: str
) -> ConfigError:
    obj, key, first, later = found
    where = _child_path(_path_to(root, obj) or "", key)
    return ConfigError(
        f"duplicate key: given more than once, first as {_describe(first)}",
        file=file,
        path=where,
        value=later,
    )


def _path_to(root: object, target: object) -> str | None:
    """The key path from ``root`` to the object ``target`` (by identity), None if absent."""
    stack: list[tuple[object, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack.extend((v, _child_path(path, str(k))) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return None


def _child_path(path: str, key: str) -> str:
    return _join_path(path, _key_segment(key).removeprefix("."))


def config_from_mapping(
    data: Mapping[str, object], *, agent_id: str | None = None, source: str | None = None
) -> LoopDetectionConfig:
    """Resolve loop detection from a whole OpenClaw config (a dict with ``tools``/``agents``).

    Every block is validated on its own, for the keys it has (so errors name its key path);
    then the global block and the agent's override are merged (spec §a.4, V1/V2) and only the
    merged result gets preset defaults and the order repair (§a.3).
    """
    return _resolve_document(data, agent_id, source).config


def _resolve_document(
    data: Mapping[str, object], agent_id: str | None, source: str | None
) -> LoadedConfig:
    if not isinstance(data, Mapping):
        raise ConfigError("the config must be a JSON object", file=source, value=data)
    global_block = _global_block(data, source)
    global_keys = _block_keys(global_block, source) if global_block is not None else {}
    chosen: tuple[_Block, dict[str, Any]] | None = None
    for agent, block in _agent_blocks(data, source):
        # Every agent's block is validated: OpenClaw rejects the whole file for a bad one.
        keys = _block_keys(block, source)
        if chosen is None and agent_id is not None and agent == agent_id:
            chosen = (block, keys)
    merged, origins = _merge(global_keys, chosen[1] if chosen else {})
    label = source or "config"
    if chosen is not None:
        label += f" (agent {agent_id})"
    config = LoopDetectionConfig.model_validate(merged, context=_MergedScopes(label))
    return LoadedConfig(
        config=config,
        origins=origins,
        global_block=global_block.path if global_block is not None else None,
        agent_block=chosen[0].path if chosen is not None else None,
    )


def _global_block(data: Mapping[str, object], source: str | None) -> _Block | None:
    tools = _optional_mapping(data, "tools", "tools", source)
    if tools is None or "loopDetection" not in tools:
        return None
    return _Block("tools.loopDetection", tools["loopDetection"])


def _agent_blocks(
    data: Mapping[str, object], source: str | None
) -> Iterator[tuple[str | None, _Block]]:
    """Per-agent blocks from ``agents.entries`` (current shape) then ``agents.list`` (older).

    An agent id defined twice (twice in the list, or in both shapes) is an error: which
    override applies would otherwise depend on the order of the file.
    """
    agents = _optional_mapping(data, "agents", "agents", source)
    if agents is None:
        return
    entries = _optional_mapping(agents, "entries", "agents.entries", source)
    defined: dict[str, str] = {}
    for key, entry in (entries or {}).items():
        where = f"agents.entries{_key_segment(str(key))}"
        defined[str(key)] = where
        block = _agent_block(entry, where, source)
        if block is not None:
            yield str(key), block
    listed = agents.get("list", _UNSET)
    if listed is _UNSET:
        return
    if not isinstance(listed, list):
        raise ConfigError("must be a list", file=source, path="agents.list", value=listed)
    for index, entry in enumerate(listed):
        where = f"agents.list[{index}]"
        block = _agent_block(entry, where, source)
        agent = _agent_id(entry, where, source) if block is not None else _listed_id(entry)
        if agent is not None:
            if agent in defined:
                raise ConfigError(
                    f"duplicate agent id: already defined at {defined[agent]}",
                    file=source,
                    path=f"{where}.id",
                    value=agent,
                )
            defined[agent] = where
        if block is not None:
            yield agent, block


def _agent_block(entry: object, where: str, source: str | None) -> _Block | None:
    if not isinstance(entry, Mapping):
        raise ConfigError("must be an object", file=source, path=where, value=entry)
    tools = _optional_mapping(entry, "tools", f"{where}.tools", source)
    if tools is None or "loopDetection" not in tools:
        return None
    return _Block(f"{where}.tools.loopDetection", tools["loopDetection"])


def _agent_id(entry: Mapping[str, object], where: str, source: str | None) -> str | None:
    agent = entry.get("id")
    if agent is None or isinstance(agent, str):
        return agent
    raise ConfigError("must be a string", file=source, path=f"{where}.id", value=agent)


def _listed_id(entry: object) -> str | None:
    """The id of a list entry without a loopDetection block (not validated: loop detection
    does not use it), for the duplicate check."""
    agent = entry.get("id") if isinstance(entry, Mapping) else None
    return agent if isinstance(agent, str) else None


def _optional_mapping(
    parent: Mapping[str, object], key: str, path: str, source: str | None
) -> Mapping[str, object] | None:
    value = parent.get(key, _UNSET)
    if value is _UNSET:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError("must be an object", file=source, path=path, value=value)
    return value


def _block_keys(block: _Block, source: str | None) -> dict[str, Any]:
    """Validate one block alone, for the keys it has; return them camelCase, as given."""
    try:
        model = _LoopDetectionBlock.model_validate(block.data)
    except ConfigError as exc:
        raise exc.relocated(file=source, prefix=block.path) from None
    return model.explicit_mapping()


_NESTED_KEYS: Final = ("detectors", "postCompactionGuard")
_PER_TOOL: Final = "perTool"


def _merge(
    global_: Mapping[str, Any], agent: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Scope]]:
    """Spec §a.4 (V1/V2): agent wins per top-level key; nested objects merge key-wise, and
    ``perTool`` per pattern, then key-wise within the pattern's entry.

    An agent's ``enabled: null`` means "not set here" and keeps the global value. Also returns
    the scope each merged key path came from.
    """
    merged: dict[str, Any] = {}
    origins: dict[str, Scope] = {}
    scopes: tuple[tuple[Scope, Mapping[str, Any]], ...] = (("global", global_), ("agent", agent))
    for scope, keys in scopes:
        for key, value in keys.items():
            if key == "enabled" and value is None and scope == "agent":
                continue
            if key == _PER_TOOL:
                merged[key] = _merge_per_tool(merged.get(key, {}), value)
                origins.update((f"{_child_path(key, pattern)}.{sub}", scope)
                               for pattern, entry in value.items() for sub in entry)
            elif key in _NESTED_KEYS:
                merged[key] = {**merged.get(key, {}), **value}
                origins.update((f"{key}.{sub}", scope) for sub in value)
            else:
                merged[key] = value
                origins[key] = scope
    return merged, origins
