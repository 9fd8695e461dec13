"""`trainwarden health --here`'s checks of this host's view, before its heartbeats: Redis reached with this
host's URL (TLS, credentials), the ACL user allowed what the agent sends, the agent's data directory
writable, NVML there or not (said, never judged). One line per check, with the fix for a failure: run on a
GPU server, it finds what would keep its agent from reporting (docs/operations.md, "An agent on each GPU
server"); in a container it is the health check, where these pass and the heartbeats decide.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from trainwarden import wiring, writable
from trainwarden.core.redact import redact_text
from trainwarden.events.access import agent_acl_rule, agent_needs, denied
from trainwarden.events.connect import is_cluster_url
from trainwarden.events.errors import AclUncheckable, StoreAuthFailed, StoreError
from trainwarden.events.health import ping
from trainwarden.events.keys import Keys
from trainwarden.events.redis_types import Client
from trainwarden.settings import Settings

OK, FAIL, INFO = "OK", "FAIL", "INFO"
CONF = "deploy/redis-central.conf"
TUNNEL = "the SSH tunnel (`systemctl status trainwarden-redis-tunnel`)"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str  # OK, FAIL, or INFO (said, never judged)
    text: str
    fix: str = ""

    def line(self) -> str:
        """Pure: the check as printed, `FAIL redis: ...; fix: ...`."""
        return f"{self.status:<4} {self.name}: {self.text}" + (f"; fix: {self.fix}" if self.fix else "")


def user_of(url: str) -> str:
    """The ACL user a Redis URL logs in as (`default` without a name)."""
    return urllib.parse.unquote(urllib.parse.urlsplit(url).username or "") or "default"


def reach(settings: Settings) -> tuple[Check, Client | None]:
    """PING with this host's URL: TLS, certificate and credentials all show here, each with its fix."""
    url = redact_text(settings.redis_url)
    tls = " over TLS" if urllib.parse.urlsplit(settings.redis_url).scheme == "rediss" else ""
    client = wiring.events_redis(settings)
    try:
        ping(client, what="reach Redis")
    except StoreAuthFailed as exc:
        client.close()
        return Check("redis", FAIL, f"{url} refused the credentials ({first_line(exc)})",
                     f"the user and password in REDIS_URL (rediss://USER:PASSWORD@HOST:PORT/0) as Redis has them "
                     f"(`user NAME on >PASSWORD` in its conf, {CONF})"), None  # fmt: skip
    except StoreError as exc:
        client.close()
        return Check("redis", FAIL, f"cannot reach {url}: {first_line(exc)}", unreachable_fix(str(exc))), None
    return Check("redis", OK, f"{url} answers{tls} as user {user_of(settings.redis_url)}"), client


def first_line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    return (str(cause).splitlines() or [type(cause).__name__])[0]


def unreachable_fix(error: str) -> str:
    """Pure: what to do, by what the connection said."""
    if "CERTIFICATE_VERIFY_FAILED" in error or "certificate verify failed" in error:
        return ("name the CA that signed Redis' certificate in the URL (rediss://...:6380/0?ssl_ca_certs=/etc/"
                "trainwarden/redis-ca.pem), and the host as the certificate names it")  # fmt: skip
    if "WRONG_VERSION_NUMBER" in error or "wrong version number" in error or "Connection closed by server" in error:
        return "rediss:// for Redis' tls-port, redis:// for its plain port"
    return (f"is Redis listening there (its bind address, the firewall open to this host on its port), or {TUNNEL} "
            "up?")  # fmt: skip


def acl(client: Client, settings: Settings) -> Check:
    """Whether this URL's user may run every command the agent sends on this host, keys included."""
    cluster = is_cluster_url(settings.redis_url)
    needs = agent_needs(Keys(settings.namespace), settings.host, cluster=cluster)
    user = user_of(settings.redis_url)
    try:
        refused = denied(client, needs)
    except AclUncheckable as exc:
        return Check("acl", INFO, f"{exc}; a NOPERM in the agent's log names what its user lacks")
    except StoreError as exc:
        return Check("acl", FAIL, f"the check of user {user}'s rights failed: {first_line(exc)}",
                     "see the Redis log")  # fmt: skip
    if not refused:
        return Check("acl", OK, f"user {user} may run the agent's {len(needs)} commands for host {settings.host}")
    rule = agent_acl_rule(Keys(settings.namespace), settings.host, cluster=cluster)
    return Check(
        "acl", FAIL, f"user {user} may not run " + ", ".join(f"{n.words} ({n.why})" for n in refused),
        f"give it the agent's rule: ACL SETUSER {user} {rule} (and in Redis' conf, {CONF})",
    )  # fmt: skip


def data_dir(settings: Settings) -> Check:
    problems = writable.problems(settings, writable.AGENT)
    if problems:
        return Check("data", FAIL, "; ".join(problems),
                     "make it writable by the agent's user, or set TRAINWARDEN_DATA_DIR (data_dir:)")  # fmt: skip
    return Check("data", OK, f"{settings.data_dir}: the agent can keep its offsets and spool there")


def gpu(settings: Settings) -> Check:
    sampler, problem = wiring.gpu_sampler(settings)
    if sampler is None:
        return Check("gpu", INFO, f"{problem}: no GPU samples or XID events from this host (fine without GPUs)")
    info = sampler.info()
    sampler.close()
    return Check("gpu", INFO, f"NVML {info['nvml']}, driver {info['driver']}, {info['gpus']} GPU(s)")


def host_checks(settings: Settings) -> tuple[list[Check], Client | None]:
    """Every check, in order; the client (open) when Redis answered, for the heartbeats that follow."""
    reached, client = reach(settings)
    checks = [reached]
    if client is not None:
        checks.append(acl(client, settings))
    return [*checks, data_dir(settings), gpu(settings)], client
