"""The validated loop detection config (DESIGN §2): one model per object of the schema.

Validation follows the V1/V2 zod schema (spec §a.2): every key checked on its own, and the
order rule for thresholds set together in one object. :class:`LoopDetectionConfig` then fills
in what the user left out from its :class:`~loopwarden.config.presets.Preset` and repairs
thresholds out of order (§a.3, logged).

``perTool`` (a loopwarden extension) maps tool names and globs to an exemption or thresholds
of their own; its thresholds are resolved against the effective top-level ones
(:meth:`LoopDetectionConfig.tool_thresholds`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Final

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from typing_extensions import Self

from ..base.errors import _child_path, _join_path
from ..base.log import get_logger
from .detectors import DetectorsConfig
from .presets import (
    _PRESET_TABLE,
    _THRESHOLD_FIELDS,
    _THRESHOLD_ORDER,
    _TOOL_THRESHOLDS,
    Preset,
    PresetName,
)
from .switches import declared_switches
from .validation import (
    _CTX_PATH,
    _CTX_VALUE,
    _ConfigModel,
    _MergedScopes,
    _object_or_model,
    _optional_bool,
    _positive_int,
    _strict_bool,
)

logger = get_logger("loopwarden")

_PER_TOOL: Final = "perTool"


class PostCompactionGuardConfig(_ConfigModel):
    """``tools.loopDetection.postCompactionGuard``."""

    window_size: int = 3

    _ints = field_validator("window_size", mode="before")(_positive_int)


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
        if not isinstance(value, str) or value not in _PRESET_TABLE:
            names = ", ".join(json.dumps(name) for name in _PRESET_TABLE)
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

    Attributes hold effective values: thresholds the user did not set come from the chosen
    ``preset`` (``PRESETS``), and thresholds out of order are repaired (spec §a.3, logged);
    ``model_fields_set`` lists what was set explicitly. The feature switches below are the
    preset's (:class:`~loopwarden.config.presets.Preset`).
    """

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> Self:
        # Runs after the inherited order check, once per validation.
        thresholds, repairs = _effective_thresholds(self, self._rules)
        # pydantic counts a field as explicitly set when the input has it, so preset defaults
        # cannot be filled in before validation without losing model_fields_set; they are
        # written here, once, while the model is still being built and no one else holds it.
        for name, value in thresholds.items():
            object.__setattr__(self, name, value)
        repairs += self._tool_repairs()
        if repairs:
            label = info.context.label if isinstance(info.context, _MergedScopes) else None
            logger.warning(
                "loop detection thresholds out of order%s; repaired %s",
                f" in {label}" if label else "",
                "; ".join(text for _, text in repairs),
                extra={"loopwarden_repaired": tuple(key for key, _ in repairs)},
            )
        return self

    @property
    def _rules(self) -> Preset:
        return _PRESET_TABLE[self.preset]

    def _tool_repairs(self) -> list[tuple[str, str]]:
        """Per-tool thresholds set out of order (only possible across scopes) are repaired
        like the top-level ones; logged once, here, with them."""
        top = self._top_thresholds()
        repairs: list[tuple[str, str]] = []
        for pattern, entry in self.per_tool.items():
            if not entry.exempt:
                repairs += _fit_thresholds(entry, top, _child_path(_PER_TOOL, pattern))[1]
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
    def detector_switches(self) -> frozenset[str]:
        """The detector switches that are on (snake_case keys of ``detectors``): those set to
        true, and those left unset (``None``) that the preset turns on. The engine reads its
        switches from here only (a test checks the keys against the detectors' registry)."""
        on: set[str] = set()
        for name, value in self.detectors.switches().items():
            if value is None:
                value = getattr(self._rules, name)
            if value:
                on.add(name)
        return frozenset(on)

    @property
    def error_repeat_enabled(self) -> bool:
        """``detectors.errorRepeat`` when set, else the preset's choice."""
        return "error_repeat" in self.detector_switches

    @property
    def post_outcome_warnings(self) -> bool:
        """Judge a repeat once its outcome is known, and warn on that result."""
        return self._rules.post_outcome_warnings

    @property
    def mask_volatile(self) -> bool:
        """Mask timestamps, durations, ids and pids in every outcome (profiles may override)."""
        return self._rules.mask_volatile

    @property
    def learn_volatile(self) -> bool:
        """Learn, per tool, result fields that change on every otherwise-identical outcome."""
        return self._rules.learn_volatile

    @property
    def progress_aware(self) -> bool:
        """Count a repeat as loop evidence only without progress: identical outcomes, no fresh
        mutation in between, pacing calls neutral, back-off honoured, errors inside results."""
        return self._rules.progress_aware

    @property
    def extended_unknown_tools(self) -> bool:
        """Recognise other frameworks' "tool not found" wordings and namespaced tool names."""
        return self._rules.extended_unknown_tools

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


def _effective_thresholds(
    block: _LoopDetectionBlock, preset: Preset
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The thresholds ``block`` set, the preset's for the others, and spec §a.3's repair: each
    upper threshold raised to one above the lower one (in this order). Also the repairs made."""
    explicit = block.model_fields_set
    values = {
        name: getattr(block, name) if name in explicit else default
        for name, default in preset.thresholds().items()
    }
    repairs: list[tuple[str, str]] = []
    for lower, upper, _ in _THRESHOLD_ORDER:
        low, high = values[lower], values[upper]
        if high <= low:
            values[upper] = low + 1
            text = f"{to_camel(upper)} {high} -> {low + 1} (must be above {to_camel(lower)} {low})"
            repairs.append((upper, text))
    return values, repairs


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
        if model is DetectorsConfig:  # no fields: its keys are the declared switches
            aliases = {name: to_camel(name) for name in declared_switches()}
        merged.update({aliases.get(k, k): v for k, v in over.items()})
    else:
        merged.update(over)
    return merged
