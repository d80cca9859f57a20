"""Mask credentials in text that loopwarden shows to people (reports, excerpts of tool output).

The patterns are those the shared corpus was redacted with (see its SOURCES.md): provider key
shapes (``sk-...``, ``ghp_...``/``github_pat_...``, ``AKIA...``, ``AIza...``, Slack ``xox?-``,
Telegram bot tokens, JWTs), ``Bearer`` tokens, private-key blocks, and the values of keys whose
name ends in token / api key / password / secret, quoted (also JSON-escaped inside a string, as
in a tool result that is itself JSON text) or bare (``PASSWORD=...``, ``--token ...``).

A keyed value is masked from 8 characters on (the corpus used 16): a report is made to be
shared, and a short password is still a password. Only the value is replaced, so the text
still says which key held a secret.
"""

from __future__ import annotations

import re

__all__ = ["mask_secrets"]

#: What a masked value becomes (the corpus' marker, so masked corpus text reads the same).
MASK = "[REDACTED-SECRET]"

# A key whose value is a secret: ...token, ...api_key / apiKey, ...password, ...secret.
# "tokens" (a count, as in max_tokens) is deliberately not one.
_KEY = r"[\w.-]*?(?:token|api[_-]?key|passw(?:or)?d|secret|access[_-]?key)"

_SHAPES = re.compile(
    r"""
      sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}
    | (?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}
    | github_pat_[A-Za-z0-9_]{20,}
    | AKIA[0-9A-Z]{16}
    | AIza[0-9A-Za-z_-]{30,}
    | xox[abprs]-[A-Za-z0-9-]{10,}
    | \b\d{8,10}:[A-Za-z0-9_-]{35}\b
    | \beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}
    """,
    re.VERBOSE,
)

_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}")

# The body of a private key runs to its END line, or to the end of an excerpt that cut it.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
)

# "key": "value", 'key': 'value', \"key\": \"value\" (JSON inside a JSON string), key="value".
_QUOTED = re.compile(
    rf"""(?ix)
    (?P<head> (?P<kq>\\?["'])? {_KEY} (?P=kq)? \s*[:=]\s* (?P<q>\\?["']) )
    (?P<value> (?:(?!(?P=q)).){{8,}}? )
    (?P=q)
    """
)

# PASSWORD=value, token: value, --api-key value. Only a flag takes a value after a space:
# in prose, "token expired" is no secret. A bare value ends at a space, quote or comma.
_BARE = re.compile(rf"""(?ix)
    (?P<head> (?<![\w"'\\]) (?: --?{_KEY}(?:\s+|=) | {_KEY}\s*[:=]\s* ) )
    (?P<value> [^\s"'\\,;&{{}}\[\]()<>]{{8,}} )""")


def mask_secrets(text: str) -> str:
    """``text`` with every credential-looking value replaced by :data:`MASK`.

    Mask before cutting text to an excerpt: a key cut in half no longer has the shape that
    would have been recognised.
    """
    text = _PRIVATE_KEY.sub(MASK, text)
    text = _QUOTED.sub(_keep_head, text)
    text = _BARE.sub(_keep_bare_head, text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    return _SHAPES.sub(MASK, text)


def _keep_head(match: re.Match[str]) -> str:
    if match.group("value") == MASK:
        return match.group(0)
    return f"{match.group('head')}{MASK}{match.group('q')}"


def _keep_bare_head(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith(MASK.rstrip("]")) or value.lower() in _NOT_SECRETS:
        return match.group(0)
    return match.group("head") + MASK


# Bare words after a key name that are prose or settings, not a value ("token required").
_NOT_SECRETS = frozenset({"required", "expired", "missing", "provided", "invalid", "changed",
                          "verification", "authentication", "configured"})
