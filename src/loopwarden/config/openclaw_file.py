"""OpenClaw config files: reading, parsing, and resolving loop detection for one agent.

OpenClaw keeps loop detection under ``tools.loopDetection`` with per-agent overrides
(``agents.list[].tools.loopDetection`` or ``agents.entries.<id>.tools.loopDetection``).
Every block is validated on its own, for the keys it has (so errors name its key path); the
global block and the agent's are then merged (spec §a.4), and only the merged result gets
preset defaults and, when it breaks the threshold order, the V1 run-time repair (§a.3).

Files are read defensively: only regular files, at most ``MAX_CONFIG_BYTES``, and a key given
twice in one object is an error rather than a silent "last one wins".
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import json5

from ..base.errors import _UNSET, ConfigError, _child_path, _describe, key_segment
from .model import _PER_TOOL, LoopDetectionConfig, _LoopDetectionBlock, _merge_per_tool
from .validation import _MergedScopes

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


def load_config_text(text: str, source: str, agent_id: str | None = None) -> LoadedConfig:
    """:func:`load_config_with_origins` for a config given as text (``config check -`` reads
    standard input); ``source`` names it in errors, as a file's path does."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        raise _too_large(source)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _resolve_document(_parse(text, source), agent_id, source)


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
    _refuse_misnested(data, source)
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


def _refuse_misnested(data: Mapping[str, object], source: str | None) -> None:
    """Loop detection keys at the top of the file are a nesting mistake, never ignored: read
    as OpenClaw reads them they would silently configure nothing."""
    known = {field.alias or name for name, field in LoopDetectionConfig.model_fields.items()}
    stray = sorted(key for key in data if key in known or key == "loopDetection")
    if stray:
        raise ConfigError(
            f"{', '.join(stray)} at the top level configures nothing: loop detection is read "
            'from tools.loopDetection (e.g. {"tools": {"loopDetection": {"enabled": true, '
            '"warningThreshold": 5}}})', file=source, value=stray[0])


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
        where = f"agents.entries{key_segment(str(key))}"
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
