"""Each LangChain hook is written once, as a plan: a generator that yields the guard calls (and
the tool call) it needs and receives their answers. :func:`run_plan` runs it with the guard's
sync methods, :func:`arun_plan` with their awaitable twins (``a`` + the name)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple, TypeVar, cast

from ..guard import LoopGuard

R = TypeVar("R")


class Step(NamedTuple):
    """What a plan needs next: the guard's method ``name`` (its ``a``-twin on the async path)
    called with these arguments, or, with no name, the tool call itself (``args[0]``)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Plan = Generator[Step, Any, R]


class _Driver:
    """One plan's run: hands the plan each answer (or raises each error in it) and gives its
    next step; its return value is :attr:`result`."""

    __slots__ = ("answer", "error", "plan", "result")
    error: Exception | None

    def __init__(self, plan: Plan[Any]) -> None:
        self.plan, self.answer, self.result, self.error = plan, None, None, None

    def next(self) -> Step | None:
        """The plan's next step, or None when it returned."""
        try:
            step = self.plan.throw(self.error) if self.error else self.plan.send(self.answer)
        except StopIteration as done:
            self.result = done.value
            return None
        self.answer = self.error = None
        return step

    def attempt(self, call: Callable[..., Any], *args: Any) -> None:
        """Run one step's call; its answer or its error goes to the plan."""
        try:
            self.answer = call(*args)
        except Exception as exc:
            self.error = exc

    async def aattempt(self, pending: Awaitable[Any]) -> None:
        """Await one step's call; its answer or its error goes to the plan."""
        try:
            self.answer = await pending
        except Exception as exc:
            self.error = exc


def _call(step: Step, guard: LoopGuard, prefix: str, handler: Callable[..., Any] | None) -> Any:
    if not step.name:
        assert handler is not None
        return handler(*step.args)
    return getattr(guard, prefix + step.name)(*step.args, **step.kwargs)


def run_plan(guard: LoopGuard, plan: Plan[R], handler: Callable[..., Any] | None = None) -> R:
    """Run ``plan`` with the guard's sync methods (and the sync tool handler)."""
    run = _Driver(plan)
    while (step := run.next()) is not None:
        run.attempt(_call, step, guard, "", handler)
    return cast(R, run.result)


async def arun_plan(
    guard: LoopGuard, plan: Plan[R], handler: Callable[..., Any] | None = None,
) -> R:
    """Run ``plan`` with the guard's awaitable twins, without blocking the event loop."""
    run = _Driver(plan)
    while (step := run.next()) is not None:
        await run.aattempt(_call(step, guard, "a", handler))
    return cast(R, run.result)
