"""The base of the config models: field checks, and every pydantic failure as ``ConfigError``.

pydantic reports problems as ``ValidationError`` with a location tuple; the config speaks in
camelCase key paths (``perTool["browser*"].warningThreshold``), with the valid keys named for
an unknown one. This module does that translation, once, for every model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from typing_extensions import Self

from ..base.errors import ConfigError, Issue, _join_path, key_segment

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class _MergedScopes:
    """Validation context of a global + agent merge: the in-block order rule does not apply
    across scopes (spec §a.2); the merged values are repaired instead (§a.3)."""

    label: str | None


# Keys of PydanticCustomError.context that carry a precise key path and value out of
# model-level validators, whose errors pydantic would otherwise locate at the object itself.
_CTX_PATH: Final = "lw_path"
_CTX_VALUE: Final = "lw_value"


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
    """Base for the config models: every validation failure surfaces as :class:`ConfigError`.

    pydantic has no hook for the exception a failed validation raises, and ``ConfigError`` is a
    ``ValueError``, which pydantic would wrap again if a validator raised it. So the three entry
    points translate the ``ValidationError`` on the way out; nothing else is overridden.
    """

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
        segment = f"[{part}]" if isinstance(part, int) else key_segment(str(part))
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
