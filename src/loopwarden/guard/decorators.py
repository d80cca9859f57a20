"""The decorator door: ``@guard.tool`` / ``guard.wrap`` guard a plain sync or async function.

Arguments are bound to the function's parameters (positional and keyword calls hash alike), the
session and run ids come from strings or callables, and a blocked call raises or returns the
blocked result.
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypedDict, TypeVar, cast

from ..base.errors import LoopBlockedError
from ..base.log import get_logger
from ..base.text import optional_id, text_id
from .core import internal_error
from .verdicts import (
    EndOfRun,
    ExitBehavior,
    GuardStats,
    Verdict,
    append_note,
    check_exit_behavior,
    terminated_error,
)

log = get_logger("loopwarden")

F = TypeVar("F", bound=Callable[..., Any])


def _fresh_call_id() -> str:
    """The decorator's call id: its after hook then records the outcome on the admitted call,
    even when the tool changed its own arguments while it ran (unique across processes that
    share a store)."""
    return uuid.uuid4().hex


def _tool_name(fn: Callable[..., Any], name: object) -> str:
    """The decorator's tool name: ``name``, else the function's name (total, see _text)."""
    text = "" if name is None else text_id(name)
    if text:
        return text
    try:
        return text_id(getattr(fn, "__name__", "tool")) or "tool"
    except Exception:
        return "tool"


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


class Hooks(Protocol):
    """What the decorator door calls of a guard (a :class:`~loopwarden.guard.LoopGuard`): its
    one-call hooks, and its stats for input it cannot read."""

    stats: GuardStats

    def before_tool_call(self, tool_name: str, args: Any, *, session: str,
                         run_id: str | None = ..., call_id: str | None = ...) -> Verdict:
        """Decide whether the call may run."""
        ...

    def abefore_tool_call(self, tool_name: str, args: Any, *, session: str,
                          run_id: str | None = ..., call_id: str | None = ...
                          ) -> Awaitable[Verdict]:
        """The awaitable form of :meth:`before_tool_call`."""
        ...

    def after_tool_call(self, tool_name: str, args: Any, *, session: str, result: Any = ...,
                        error: Any = ..., run_id: str | None = ..., call_id: str | None = ...
                        ) -> Verdict:
        """Record the outcome."""
        ...

    def aafter_tool_call(self, tool_name: str, args: Any, *, session: str, result: Any = ...,
                         error: Any = ..., run_id: str | None = ..., call_id: str | None = ...
                         ) -> Awaitable[Verdict]:
        """The awaitable form of :meth:`after_tool_call`."""
        ...


#: A decorator's ``session=`` / ``run_id=``: a string, or a callable of the call's bound
#: arguments (a dict), or of nothing.
IdSource = str | Callable[[], str] | Callable[[dict[str, Any]], str]


def _id_source(value: object, label: str) -> Callable[[dict[str, Any]], str | None]:
    if value is None or isinstance(value, str):
        return lambda _args: value
    if not callable(value):
        fixed = text_id(value)  # any other value is an id like the hooks' (see _text)
        return lambda _args: fixed
    signature = _signature(value)
    if signature is not None and not signature.parameters:
        return lambda _args: cast(Callable[[], str], value)()
    return lambda args: cast(Callable[[dict[str, Any]], str], value)(dict(args))


class _Ids(TypedDict):
    """One decorated call's ids, as the hooks take them."""

    session: str
    run_id: str | None
    call_id: str


class _FunctionDoor:
    """What ``guard.wrap`` needs per call: argument binding, ids, and the block/note policy."""

    __slots__ = ("end_of_run", "guard", "on_block", "run", "session", "signature",
                 "tool_name")

    def __init__(self, guard: Hooks, tool_name: str, signature: inspect.Signature | None,
                 session: Callable[[dict[str, Any]], str | None],
                 run: Callable[[dict[str, Any]], str | None],
                 on_block: Literal["raise", "return"], exit_behavior: ExitBehavior) -> None:
        self.guard = guard
        self.tool_name = tool_name
        self.signature = signature
        self.session = session
        self.run = run
        self.on_block = on_block
        self.end_of_run = EndOfRun(exit_behavior)

    def start(self, a: tuple[Any, ...], kw: dict[str, Any]) -> tuple[dict[str, Any], _Ids] | None:
        """The call's bound arguments and ids, or None (logged and counted) when they cannot
        be read — a session callable that raised, say: the function then runs unguarded."""
        try:
            args = self.bind(a, kw)
            run = self.run(args)
            session = text_id(self.session(args))
        except Exception as exc:
            internal_error(self.guard.stats, self.tool_name, exc)
            return None
        return args, {"session": session, "run_id": optional_id(run), "call_id": _fresh_call_id()}

    def bind(self, a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
        if self.signature is None:
            return {"args": list(a), **kw}
        try:
            bound = self.signature.bind(*a, **kw)
        except TypeError:
            return {"args": list(a), **kw}
        bound.apply_defaults()
        return dict(bound.arguments)

    def blocked(self, verdict: Verdict, ids: _Ids) -> Any:
        # A decorated function cannot end the run: at the end, as for "error", it raises; it has
        # no human to ask either ("ask" ends as "end" does; a plain loop asks with guard.ask).
        if self.end_of_run.action(verdict.terminate, can_ask=False) in ("end", "raise"):
            raise terminated_error(verdict, session=ids["session"], run_id=ids["run_id"])
        if self.on_block == "raise":
            raise LoopBlockedError(verdict)
        return verdict.blocked_result()

    def noted(self, result: Any, *verdicts: Verdict) -> Any:
        """``result`` with the warning note(s) the model should see."""
        for verdict in verdicts:
            note = verdict.note
            if note is None:
                continue
            if isinstance(result, str) or (isinstance(result, dict)
                                           and isinstance(result.get("content"), list)):
                result = append_note(result, note)
            else:
                log.info("loopwarden: no warning note added to the %s result of %s: %s",
                         type(result).__name__, self.tool_name, note)
        return result


#: What a decorated function does with a blocked call: raise LoopBlockedError, or return the
#: blocked result.
ON_BLOCK: tuple[str, ...] = ("raise", "return")


def check_on_block(value: object) -> Literal["raise", "return"]:
    """``value`` as an ``on_block`` choice; a :class:`ConfigError` (a ``ValueError``) naming the
    allowed values else (``on_block="ignore"`` would otherwise be taken as "return")."""
    if value not in ON_BLOCK:
        from ..config import ConfigError  # (pydantic loads only when a value is wrong)

        raise ConfigError(f"must be one of {', '.join(map(repr, ON_BLOCK))}",
                          path="on_block", value=value)
    return value  # type: ignore[return-value]


def tool(
    guard: Hooks, fn: F | None = None, /, *, name: str | None = None,
    session: IdSource = "default", run_id: IdSource | None = None,
    on_block: Literal["raise", "return"] = "raise", exit_behavior: ExitBehavior = "end",
) -> Any:
    """``@guard.tool`` (``fn`` given) or ``@guard.tool(...)`` (a decorator): see
    :meth:`LoopGuard.tool`."""
    if fn is not None:
        return wrap(guard, fn)
    check_exit_behavior(exit_behavior)  # a bad option fails here, not at the first call
    check_on_block(on_block)
    return lambda f: wrap(guard, f, name=name, session=session, run_id=run_id,
                          on_block=on_block, exit_behavior=exit_behavior)


def wrap(
    guard: Hooks, fn: F, *, name: str | None = None, session: IdSource = "default",
    run_id: IdSource | None = None, on_block: Literal["raise", "return"] = "raise",
    exit_behavior: ExitBehavior = "end",
) -> F:
    """``fn`` guarded by ``guard``: see :meth:`LoopGuard.wrap`."""
    door = _FunctionDoor(guard, _tool_name(fn, name), _signature(fn),
                         _id_source(session, "session"), _id_source(run_id, "run_id"),
                         check_on_block(on_block), check_exit_behavior(exit_behavior))
    tool_name = door.tool_name

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*a: Any, **kw: Any) -> Any:
            call = door.start(a, kw)
            if call is None:
                return await fn(*a, **kw)
            args, ids = call
            verdict = await guard.abefore_tool_call(tool_name, args, **ids)
            if verdict.action == "block":
                return door.blocked(verdict, ids)
            try:
                result = await fn(*a, **kw)
            except Exception as exc:
                await guard.aafter_tool_call(tool_name, args, error=exc, **ids)
                raise
            after = await guard.aafter_tool_call(tool_name, args, result=result, **ids)
            return door.noted(result, verdict, after)

        return cast(F, async_wrapper)

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        call = door.start(a, kw)
        if call is None:
            return fn(*a, **kw)
        args, ids = call
        verdict = guard.before_tool_call(tool_name, args, **ids)
        if verdict.action == "block":
            return door.blocked(verdict, ids)
        try:
            result = fn(*a, **kw)
        except Exception as exc:
            guard.after_tool_call(tool_name, args, error=exc, **ids)
            raise
        return door.noted(result, verdict, guard.after_tool_call(tool_name, args, result=result,
                                                                 **ids))

    return cast(F, wrapper)
