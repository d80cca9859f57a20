"""The thresholds a config gives the detectors (:class:`~loopwarden.engine.detectors.Limits`), and a
tool's own under ``perTool``."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .detectors import Limits

if TYPE_CHECKING:
    from ..config import LoopDetectionConfig


def limits_for(config: LoopDetectionConfig) -> Limits:
    """The detectors' thresholds and switches, as ``config`` sets them for every tool."""
    return Limits(
        warning=config.warning_threshold,
        critical=config.critical_threshold,
        global_breaker=config.global_circuit_breaker_threshold,
        unknown_tool=config.unknown_tool_threshold,
        error_repeat=config.error_repeat_threshold,
        progress=config.progress_aware,
        eased_critical=eased_critical(config.critical_threshold,
                                      config.global_circuit_breaker_threshold),
        switches=frozenset(config.detector_switches),
    )


def eased_critical(critical: int, breaker: int) -> int:
    """The later block of a repeat that backs off (:attr:`Limits.eased_critical`): half as
    far again as ``critical``, at least one more, never past the circuit breaker."""
    return min(breaker, max(critical + 1, critical * 3 // 2))


def with_tool_thresholds(
    config: LoopDetectionConfig, base: Limits, tool_name: str
) -> Limits | None:
    """``base`` with ``tool_name``'s ``perTool`` thresholds, or None when it is exempt."""
    thresholds = config.tool_thresholds(tool_name)
    if thresholds is None:
        return None
    warning, critical, breaker = thresholds
    if (warning, critical, breaker) == (base.warning, base.critical, base.global_breaker):
        return base
    return dataclasses.replace(
        base, warning=warning, critical=critical, global_breaker=breaker,
        eased_critical=eased_critical(critical, breaker))
