"""The ``detectors`` object of the config: the switches the detectors declare
(:mod:`.switches`), validated like every other key, with no field written here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    GetJsonSchemaHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, InitErrorDetails, PydanticCustomError, ValidationError

from .switches import declared_switches
from .validation import _ConfigModel


class DetectorsConfig(_ConfigModel):
    """Per-detector switches (``tools.loopDetection.detectors``): one for each switch a
    detector declares (:mod:`loopwarden.config.switches`), read as attributes
    (``.generic_repeat``); an unset one reads as its default (None for a switch
    the preset decides, such as ``error_repeat``).

    No field is written here: the detectors declare their switches, so adding one touches only
    its detector. The keys are checked against the declared switches, in either spelling, the
    values must be true or false (or null for a switch the preset decides); only the keys
    given are stored, so equality compares the switches' effective values.
    """

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _check_shape(cls, data: Any) -> Any:  # replaces the base class's check of the keys
        if isinstance(data, BaseModel):
            return data
        if not isinstance(data, Mapping):
            raise PydanticCustomError("object", "must be an object")
        return _switch_values(data)

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # No field is written here: the schema's properties are the declared switches, in the
        # config file's spelling, and nothing else is allowed (as in the rest of the config).
        schema = handler.resolve_ref_schema(handler(core_schema))
        schema["properties"] = {
            to_camel(name): {"type": "boolean" if default is not None else ["boolean", "null"],
                             "default": default}
            for name, default in declared_switches().items()}
        schema["additionalProperties"] = False
        return schema

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        # Every switch, as given or by default, unless only what was given is asked for.
        data = handler(self) if info.exclude_unset else self.switches()
        return {to_camel(key): value for key, value in data.items()} if info.by_alias else data

    if TYPE_CHECKING:  # a switch's attribute, for type checkers: bool, or None (see above)

        def __getattr__(self, name: str) -> bool | None: ...
    else:

        def __getattr__(self, name: str) -> Any:
            extra = self.__pydantic_extra__
            if extra is not None and name in extra:
                return extra[name]
            switches = declared_switches()
            if name in switches:
                return switches[name]
            return super().__getattr__(name)

    def switches(self) -> dict[str, bool | None]:
        """Every declared switch (snake_case) with its value here: as given, else its default
        (None: the preset decides)."""
        given = self.__pydantic_extra__ or {}
        return {name: given.get(name, default) for name, default in declared_switches().items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DetectorsConfig):
            return NotImplemented
        return self.switches() == other.switches()

    def __hash__(self) -> int:
        return hash(frozenset(self.switches().items()))


def _switch_values(data: Mapping[Any, Any]) -> dict[str, Any]:
    """``detectors`` as given, keyed by snake_case name, or every problem in it at once (at
    its camelCase key path, as the other objects report theirs)."""
    switches = declared_switches()
    names = {to_camel(name): name for name in switches} | {name: name for name in switches}
    values: dict[str, Any] = {}
    problems: list[InitErrorDetails] = []
    for key, value in data.items():
        name = names.get(key) if isinstance(key, str) else None
        if name is None:
            valid = ", ".join(to_camel(name) for name in switches)
            problems.append(_problem(key, value, "unknown_key",
                                     "unknown key (valid keys: {valid})", valid=valid))
        elif name in values:
            problems.append(_problem(to_camel(name), value, "duplicate_key",
                                     "given twice (as {alias} and as its snake_case name)",
                                     alias=to_camel(name)))
        elif not (isinstance(value, bool) or (value is None and switches[name] is None)):
            problems.append(_problem(to_camel(name), value, "bool", "must be true or false"))
        else:
            values[name] = value
    if problems:
        raise ValidationError.from_exception_data(DetectorsConfig.__name__, problems)
    return values


def _problem(key: Any, value: Any, kind: str, message: str, **context: Any) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError(kind, message, context),
                            loc=(key,), input=value)
