"""How the fallback serialiser writes single values: scalars, bytes, dates, surrogates, and the
data-like state of objects (dataclass fields, attributes, slots), never a memory address.

Shared by :mod:`.ropes`, :mod:`.walker`, :mod:`.canonical` and :mod:`.hashing`; the lowest
module of the serialiser, importing nothing else of the package.
"""

from __future__ import annotations

import base64
import dataclasses
import types
from itertools import islice
from typing import Final

import orjson

from ..base.lazy_re import lazy_pattern

_FAST_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def _refuse(value: object) -> object:
    raise TypeError("handled by the fallback serialiser")


_dumps: Final = orjson.dumps


def _compact(data: bytes) -> bytes:
    """``data`` in an allocation of its own size. orjson hands back even a short result in one
    of some 4 KiB: parts kept for long (a list of 250,000 strings until it closes) are copied."""
    return bytes(memoryview(data))


def _scalar_bytes(value: int | float | bool | None) -> bytes:
    if value is None:
        return b"null"
    if value is True or value is False:
        return b"true" if value else b"false"
    if type(value) is int:
        return _int_bytes(value)
    return _dumps(value)


def _int_bytes(value: int) -> bytes:
    """Digits, as orjson prints 64-bit integers (and as JSON allows any integer)."""
    try:
        return int.__repr__(value).encode()
    except ValueError:
        # Past sys.get_int_max_str_digits(); hex has no such limit and stays deterministic.
        return _dumps(hex(value))


def _bytes_like(value: bytes | bytearray | memoryview) -> bytes:
    try:
        raw = bytes(value)
    except Exception:  # e.g. a released memoryview
        raw = b""
    return b'{"data":"' + base64.b64encode(raw) + b'","type":"Uint8Array"}'


def _orjson_leaf(value: object) -> bytes:
    try:
        return _dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except Exception:
        # orjson refuses e.g. timezone-aware times and some subclasses.
        isoformat = getattr(value, "isoformat", None)
        text = isoformat() if callable(isoformat) else str(value)
        return _dumps(_replace_surrogates(str(text)))


def _is_utf8_safe(text: str) -> bool:
    return text.isascii() or not _SURROGATE().search(text)


_SURROGATE: Final = lazy_pattern("[\ud800-\udfff]")


def _replace_surrogates(text: str) -> str:
    """Lone surrogates -> U+FFFD; a high+low pair becomes the character it encodes (as in JS)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _exception_items(error: BaseException) -> list[tuple[object, object]]:
    try:
        message = str(error)
    except Exception:
        message = ""
    return [("message", message), ("name", type(error).__name__)]


def _dataclass_items(value: object) -> list[tuple[object, object]]:
    items: list[tuple[object, object]] = []
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        try:
            items.append((f.name, getattr(value, f.name)))
        except AttributeError:
            continue  # init=False field never assigned
    return items


_NOT_CONVERTED: Final = object()


def _converted(value: object) -> object:
    """A plain-data stand-in for well-known rich objects, or ``_NOT_CONVERTED``."""
    kind = type(value)
    try:
        if callable(getattr(kind, "model_dump", None)) and hasattr(kind, "model_fields"):
            return value.model_dump()  # type: ignore[attr-defined]
        if kind.__module__ == "numpy" and callable(getattr(value, "tolist", None)):
            return value.tolist()  # type: ignore[attr-defined]
    except Exception:
        return _NOT_CONVERTED
    if isinstance(value, range):
        return {"start": value.start, "stop": value.stop, "step": value.step}
    return _NOT_CONVERTED


def _qualified_name(kind: type) -> str:
    module = getattr(kind, "__module__", None)
    qualname = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "?")
    return f"{module}.{qualname}" if isinstance(module, str) else str(qualname)


def _callable_name(value: object) -> str | None:
    """Functions, classes and modules are identified by name (their state is not data)."""
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(
        value,
        (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType),
    ):
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", "?")
        return f"{module}.{qualname}" if isinstance(module, str) else str(qualname)
    return None


def _object_state(value: object, limit: int) -> dict[str, object]:
    state: dict[str, object] = {}
    try:
        attributes = vars(value)
    except TypeError:
        attributes = {}
    try:
        # (A ``__dict__`` property may hand back any mapping, endless ones included.)
        for name, item in islice(attributes.items(), limit):
            state[str(name)] = item
    except Exception:
        pass
    for name in _slot_names(type(value)):
        if name in state:
            continue
        try:
            state[name] = getattr(value, name)
        except Exception:
            continue  # unset slot or failing descriptor
    return state


_MAX_SLOTS: Final = 4096


def _slot_names(kind: type) -> list[str]:
    names: list[str] = []
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        try:
            declared = list(islice(slots, _MAX_SLOTS))  # __slots__ may be reassigned to anything
        except TypeError:
            continue
        for slot in declared:
            if not isinstance(slot, str) or slot in ("__dict__", "__weakref__"):
                continue
            if slot.startswith("__") and not slot.endswith("__"):
                slot = f"_{klass.__name__.lstrip('_')}{slot}"
            if slot not in names:
                names.append(slot)
    return names


def _opaque(value: object) -> bytes:
    try:
        name = _qualified_name(type(value))
        try:
            return b'{"__unserialisable__":' + orjson.dumps(name) + b"}"
        except orjson.JSONEncodeError:
            return b'{"__unserialisable__":' + orjson.dumps(_replace_surrogates(name)) + b"}"
    except Exception:  # a metaclass whose __module__ or __qualname__ raises
        return b'{"__unserialisable__":"?"}'
