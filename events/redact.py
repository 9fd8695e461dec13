"""Keep secrets out of events, evidence packs, logs and messages.

Applied wherever text from the outside world (configs, command lines, environments, log lines)
is about to be stored or shown. Masks: values under secret-looking keys, `KEY=value` pairs with a
secret-looking KEY, token-shaped strings, and the exact values of the secret environment
variables this process knows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
SECRET_ENV_VARS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "WANDB_API_KEY", "REDIS_PASSWORD")

# A name is secret when its last segment is a secret word: HF_TOKEN, WANDB_API_KEY, db.password,
# AWS_SECRET_ACCESS_KEY; but not tokens_per_s or max_tokens.
_SECRET_NAME = (
    r"(?:[A-Za-z0-9]+[_.-])*"
    r"(?:TOKEN|SECRET|PASSWORD|PASSWD|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|SECRET[_-]?KEY|CREDENTIALS?"
    r"|AUTHORIZATION)"
)
SECRET_KEY_RE = re.compile(rf"^{_SECRET_NAME}$", re.IGNORECASE)
ASSIGNMENT_RE = re.compile(rf"(?i)(?<![\w.-])({_SECRET_NAME})(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)")
FLAG_RE = re.compile(rf"(?i)(--?{_SECRET_NAME})(\s+|=)(?!-)(\S+)")
FLAG_NAME_RE = re.compile(rf"(?i)^--?{_SECRET_NAME}$")
TOKEN_RE = re.compile(r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]{8,}|\bgh[pousr]_[A-Za-z0-9]{20,}")
URL_PASSWORD_RE = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")


def known_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if env is None else env
    return [v for name in SECRET_ENV_VARS if len(v := env.get(name, "")) >= 6]


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    for secret in known_secrets() if secrets is None else secrets:
        text = text.replace(secret, MASK)
    text = TOKEN_RE.sub(MASK, text)
    text = URL_PASSWORD_RE.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = FLAG_RE.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    return ASSIGNMENT_RE.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """A copy of `value` (JSON-like data) with secrets masked."""
    secrets = known_secrets() if secrets is None else secrets
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
