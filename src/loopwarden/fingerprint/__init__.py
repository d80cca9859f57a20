"""Canonical serialisation and hashing of tool arguments and outcomes (spec §c). Pure, no I/O.

Everything is imported from ``loopwarden.fingerprint``; the modules inside are not a public API:

- :mod:`.canonical`: ``canonical_json`` and the quick check that decides when orjson alone is
  trusted with a value; the fallback serialiser behind it is :mod:`.walker` (with
  :mod:`.ropes` and :mod:`.values`);
- :mod:`.hashing`: ``args_hash``, ``digest``, the write-target hash, untrusted-content ids and
  "when, not why" masking;
- :mod:`.errors`: the text of raised errors and of errors reported inside results;
- :mod:`.unknown_tools`: which missing tool an error names;
- :mod:`.outcomes`: ``Outcome`` and the outcome hashes, with the built-in projections;
  :mod:`.results` reads OpenClaw-shaped results and :mod:`.strip` drops volatile keys.
"""

from __future__ import annotations

from .canonical import canonical_json, orjson_safe

# ``as``: names the tests use, importable from here but outside __all__ (which lists what
# other floors use).
from .canonical import canonical_json_slow as canonical_json_slow
from .canonical import json_bytes as json_bytes
from .errors import error_text, result_error_text
from .hashing import UNTRUSTED_ZERO_ID as UNTRUSTED_ZERO_ID
from .hashing import (
    args_hash,
    args_hash_of_json,
    digest,
    mutation_target_hash,
)
from .hashing import canonicalise_untrusted as canonicalise_untrusted
from .hashing import mask_when_spans as mask_when_spans
from .outcomes import Outcome, outcome_of, profiled_outcome, text_outcome
from .unknown_tools import extract_unknown_tool as extract_unknown_tool

__all__ = [
    "Outcome",
    "args_hash",
    "args_hash_of_json",
    "canonical_json",
    "digest",
    "error_text",
    "mutation_target_hash",
    "orjson_safe",
    "outcome_of",
    "profiled_outcome",
    "result_error_text",
    "text_outcome",
]
