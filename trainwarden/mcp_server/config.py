"""The `mcp:` section of the settings file: which actions an agent may take, and who it is in the audit trail.

```yaml
mcp:
  allow_actions: [stop]      # true (stop and launch), false (the default: reads only), or a list of them
  identity: research-agent   # recorded as mcp:research-agent (default: the name the MCP client gives)
```

Actions are off by default: an agent that can read a run cannot stop or launch one until a person says so here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainwarden.core.yamlfile import Reader, Schema

STOP = "stop"
LAUNCH = "launch"
ACTIONS = (STOP, LAUNCH)
IDENTITY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")  # goes into events and Slack text as it is
CALLER_PREFIX = "mcp:"  # a caller in the audit trail: mcp:<identity>, beside Slack's user ids and the CLI's logins
HTTP_HOST = "127.0.0.1"  # streamable HTTP: loopback only unless --host says otherwise
HTTP_PORT = 8770  # streamable HTTP: the default port (`--port`)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpConfig:
    allow_actions: frozenset[str] = frozenset()  # of ACTIONS; empty: an agent may only read
    identity: str | None = None  # None: the MCP client's own name (clientInfo.name), else "unknown"

    def allows(self, action: str) -> bool:
        return action in self.allow_actions


def read_mcp(m: Reader) -> McpConfig | None:
    """The section's config; None when it is absent (the defaults apply: no actions)."""
    one: Schema = {"enum": list(ACTIONS)}
    got = m.raw("allow_actions", {"anyOf": [{"type": "boolean"}, {"type": "array", "items": one, "uniqueItems": True}]})
    allowed: frozenset[str] = frozenset()
    if got is not None:
        node, value = got
        if isinstance(value, bool):
            allowed = frozenset(ACTIONS) if value else frozenset()
        elif isinstance(value, list) and all(isinstance(x, str) and x in ACTIONS for x in value):
            allowed = frozenset(value)
        else:
            m.ctx.problem(node, f"allow_actions must be true, false or a list of {', '.join(ACTIONS)}; got {value!r}")
    identity = m.string("identity", pattern=IDENTITY_RE, label="mcp.identity",
                        hint="is not a valid identity: letters, digits and . _ @ - (at most 64)")  # fmt: skip
    m.finish()
    if not m.present:
        return None
    return McpConfig(allow_actions=allowed, identity=identity)
