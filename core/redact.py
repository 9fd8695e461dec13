"""Keep secrets out of events, evidence packs, logs and messages.

Applied wherever text from the outside world (configs, command lines, environments, log lines)
is about to be stored or shown. Masks: values under secret-looking keys, `KEY=value` pairs and
`--flag value` options with a secret-looking name, token-shaped strings (the one table
`PATTERNS`), and the exact values of secret environment variables -- this process's own, and those
a caller learned elsewhere (the agent reads each run's environment from /proc).

A 40-hex string (a classic W&B key, but also a git commit) is masked only after a key-ish word or
`wandb`; metrics (`loss=0.123`, `max_tokens=5`, `tokens_per_s=1200`) are never masked.
Pure and cheap: a pattern is tried only on lines holding one of its trigger words.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
SECRET_ENV_VARS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "WANDB_API_KEY", "REDIS_PASSWORD")
MIN_SECRET_CHARS = 8  # shorter values of secret variables ("1", "true") are not hunted for in text

# A name is secret when its last segment is a secret word: HF_TOKEN, WANDB_API_KEY, db.password,
# AWS_SECRET_ACCESS_KEY; but not tokens_per_s, max_tokens or sort_key. A bare `key` is secret too.
_SECRET_WORD = (
    r"(?:TOKEN|SECRET|PASSWORD|PASSWD|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|SECRET[_-]?KEY|CREDENTIALS?"
    r"|AUTHORIZATION)"
)
_SECRET_NAME = rf"(?:(?:[A-Za-z0-9]+[_.-])*{_SECRET_WORD}|KEY)"
SECRET_KEY_RE = re.compile(rf"^{_SECRET_NAME}$", re.IGNORECASE)
FLAG_NAME_RE = re.compile(rf"(?i)^--?{_SECRET_NAME}$")

# The pattern table: (what, regex, shaped, triggers). A match is replaced by its `keep` group (when
# the pattern has one) followed by MASK, so `--token=abc` reads `--token=***` and `xoxb-1-2` reads
# `***`. `shaped`: the token alone says it is a secret (an environment value of that shape is one).
# `triggers`: lowercase words one of which a line must hold for the pattern to be tried at all
# (substring tests are far cheaper than regexes: most log lines hold none and cost next to nothing).
_NAMES = ("key", "token", "secret", "passw", "credential", "authorization")
# fmt: off
PATTERNS: tuple[tuple[str, str, bool, tuple[str, ...]], ...] = (
    ("W&B key", r"\bwandb_v\d+_[A-Za-z0-9_-]{16,}", True, ("wandb_v",)),
    ("Slack token", r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]{8,}", True, ("xox", "xapp-")),
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{20,}", True, ("hf_",)),
    ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", True, ("akia", "asia")),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", True,
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("OpenAI-style key", r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}", True, ("sk-",)),
    ("40-hex key after a key-ish word or wandb",
     r"(?i)(?P<keep>(?<![a-z])(?:wandb|api[_ -]?key|key|token|secret|password|login)(?![a-z])[^\n]{0,40}?)"
     r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])", False, ("wandb", "login", *_NAMES)),
    ("bearer token", r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", False, ("bearer",)),
    ("password in a URL", r"(?P<keep>[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+(?=@)", False, ("://",)),
    ("secret flag", rf"(?i)(?P<keep>(?<![\w-])--?{_SECRET_NAME}(?:\s+|=))(?!-)\S+", False, _NAMES),
    # the name's last segment is enough to find (what precedes it is kept): faster than matching it whole
    ("secret assignment",
     rf"(?i)(?P<keep>(?:(?<![A-Za-z0-9]){_SECRET_WORD}|(?<![\w.-])KEY)['\"]?\s*[=:]\s*)"
     r"(?:\"[^\"]*\"|'[^']*'|[^\s,;]+)", False, _NAMES),
)
# fmt: on
_TABLE = tuple((re.compile(regex), triggers) for _, regex, _, triggers in PATTERNS)
_SHAPED = tuple(c for (c, _), (_, _, shaped, _) in zip(_TABLE, PATTERNS, strict=True) if shaped)


def _sub(m: re.Match[str]) -> str:
    keep = m.groupdict().get("keep")
    return f"{keep}{MASK}" if keep is not None else MASK


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """Pure: the values in an environment that are secrets -- under a secret-looking name, or
    shaped like a token -- longest first (so a value containing another is masked whole)."""
    found = {
        v
        for name, v in env.items()
        if len(v) >= MIN_SECRET_CHARS and (SECRET_KEY_RE.match(name) or any(p.search(v) for p in _SHAPED))
    }
    return sorted(found, key=len, reverse=True)


def known_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The secret values of this process's environment (read once), or of `env`."""
    if env is None:
        return _own_secrets()
    named = [v for name in SECRET_ENV_VARS if len(v := env.get(name, "")) >= 6]
    return sorted({*named, *env_secrets(env)}, key=len, reverse=True)


@functools.cache
def _own_secrets() -> list[str]:
    return known_secrets(dict(os.environ))


def redact_text(text: str, secrets: Iterable[str] | None = None) -> str:
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    low = text.lower().replace("tokens", "")  # tokens_per_s, max_tokens: metrics, not secrets
    for pattern, triggers in _TABLE:
        for word in triggers:
            if word in low:
                text = pattern.sub(_sub, text)
                break
    return text


def looks_secret(text: str, secrets: Iterable[str] | None = None) -> bool:
    """Whether `text` holds something `redact_text` would mask (user text that must not be echoed)."""
    return redact_text(text, secrets) != text


def redact(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """A copy of `value` (JSON-like data) with secrets masked."""
    secrets = known_secrets() if secrets is None else list(secrets)
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, Mapping):
        return {
            k: MASK if isinstance(k, str) and SECRET_KEY_RE.match(k) and v not in (None, "") else redact(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        out = [redact(v, secrets) for v in value]
        for i in range(len(out) - 1):  # argv form: ["--hf_token", "abc"]
            if isinstance(value[i], str) and FLAG_NAME_RE.match(value[i]) and isinstance(out[i + 1], str):
                out[i + 1] = MASK
        return out
    return value


class MaskingFilter(logging.Filter):
    """A logging filter that masks secrets in each formatted record (daemon logs, tracebacks included)."""

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        super().__init__()
        self.secrets = known_secrets() if secrets is None else list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact_text(message, self.secrets)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        exc_text = redact_text(record.exc_text, self.secrets) if record.exc_text else record.exc_text
        if masked != message or exc_text != record.exc_text:
            record.msg, record.args = masked, None
            record.exc_text = exc_text
        return True
