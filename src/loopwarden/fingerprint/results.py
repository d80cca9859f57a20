"""Reading OpenClaw-shaped results: a result's ``details`` mapping and the joined text of its
``content`` blocks (shared by the outcome hashes and the errors reported inside results).
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Mapping
from typing import Any, TypeGuard

from .ropes import _MAX_BYTES

_EMPTY: Mapping[str, object] = types.MappingProxyType({})


def _is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _is_list(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    return type(value) is list or isinstance(value, (list, tuple))


def _details_and_text(result: Mapping[str, object]) -> tuple[Mapping[str, object], str]:
    content = result.get("content")
    details = result.get("details")
    # (The exact-type tests are fast paths: this runs on every outcome.)
    has_content = type(content) is list or isinstance(content, (list, tuple))
    has_details = type(details) is dict or isinstance(details, Mapping)
    if not has_content and not has_details:
        return result, ""
    text = _content_text(content) if has_content else ""  # type: ignore[arg-type]
    return (details if has_details else _EMPTY), text  # type: ignore[return-value]


def _content_text(content: list[object] | tuple[object, ...]) -> str:
    if len(content) == 1:  # the usual single text block, without the general loop
        entry = content[0]
        if type(entry) is dict:
            text = entry.get("text")
            if type(text) is str and isinstance(entry.get("type"), str):
                return text.strip()
    texts: list[str] = []
    # (As stored: a subclass's __iter__ could go on forever.)
    entries = content if type(content) is list or type(content) is tuple else (
        list.__iter__(content) if isinstance(content, list) else tuple.__iter__(content))
    for entry in entries:
        if type(entry) is dict or isinstance(entry, Mapping):
            kind, text = entry.get("type"), entry.get("text")
            if isinstance(kind, str) and isinstance(text, str):
                texts.append(text)
    if len(texts) == 1:
        return texts[0].strip()
    if sum(map(len, texts)) > _MAX_BYTES:  # one long text repeated in many entries
        return _summary_text(texts)
    return "\n".join(texts).strip()


def _summary_text(texts: list[str]) -> str:
    """A fixed-size stand-in for a joined text past ``_MAX_BYTES`` (its parts hashed once each,
    in order), so it is never built."""
    seen: dict[int, tuple[str, bytes]] = {}
    summary = hashlib.sha256()
    for text in texts:
        done = seen.get(id(text))
        if done is None:
            done = seen[id(text)] = (text, hashlib.sha256(text.encode("utf-8", "replace")).digest())
        summary.update(done[1])
    return f"[oversized text: {len(texts)} parts, sha256 {summary.hexdigest()}]"
