"""Slow clients against the real `trainwarden bot` (HTTP mode): 200 connections that send their request
headers one byte a second once locked the endpoint (waitress's inactivity timeout is refreshed by every byte
and its 100 connections were all taken), so `/healthz` and Slack's signed commands timed out for as long as
they went on. Now a request's bytes have a deadline and one address holds a bounded number of connections:
signed commands keep being answered within 3 s while the slow clients (from two other loopback addresses,
reconnecting whenever they are dropped, as an attacker would) keep going.
"""

import socket
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.slack_api import sign
from tests.slack_bot import ADMIN, SECRET, bot_process, trigger_id

pytestmark = [pytest.mark.redis]

SLOW_CLIENTS = 200
ATTACKERS = ("127.0.0.2", "127.0.0.3")  # loopback addresses other than Slack's (127.0.0.1): all of 127/8 is local
HELD_S = 25.0  # how long the slow clients go on (longer than the read deadline, so they are dropped and return)
ANSWER_S = 3.0
HEAD = b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000


class SlowClients:
    """`n` connections that each send one more byte of an endless header every second, and reconnect."""

    def __init__(self, port: int, n: int) -> None:
        self.port, self.n = port, n
        self.done = threading.Event()
        self.reconnects = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, i: int) -> tuple[socket.socket, int] | None:
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind((ATTACKERS[i % len(ATTACKERS)], 0))
            s.connect_ex(("127.0.0.1", self.port))
        except OSError:
            s.close()
            return None
        return s, 0

    def _run(self) -> None:
        conns = [self._connect(i) for i in range(self.n)]
        while not self.done.wait(1.0):
            for i, held in enumerate(conns):
                if held is not None:
                    s, sent = held
                    try:
                        s.send(HEAD[sent % len(HEAD) : sent % len(HEAD) + 1])
                        conns[i] = (s, sent + 1)
                        continue
                    except OSError:  # dropped by the server (or not connected yet): come back
                        s.close()
                self.reconnects += 1
                conns[i] = self._connect(i)
        for held in conns:
            if held is not None:
                held[0].close()


def timed_post(url: str, body: str, headers: dict[str, str]) -> tuple[int, float]:
    start = time.monotonic()
    request = urllib.request.Request(url, data=body.encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=ANSWER_S) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, time.monotonic() - start


def test_200_slow_clients_do_not_lock_out_signed_commands(store, slack_api, redis_server, tmp_path):
    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        port = int(urllib.parse.urlparse(bot.url).port or 0)
        slow = SlowClients(port, SLOW_CLIENTS)
        slow.thread.start()
        latencies: list[float] = []
        try:
            time.sleep(2)  # let them take every connection they can
            end = time.monotonic() + HELD_S
            while time.monotonic() < end:
                body = urllib.parse.urlencode({"command": "/status", "text": "", "user_id": ADMIN,
                                               "channel_id": "C1", "response_url": slack_api.response_url("cmd-s"),
                                               "trigger_id": trigger_id()})  # fmt: skip
                status, took = timed_post(bot.url, body, sign(body, SECRET))
                assert status == 200, status
                latencies.append(took)
                with urllib.request.urlopen(bot.url.replace("/slack/events", "/healthz"), timeout=ANSWER_S) as ok:
                    assert ok.status == 200
                time.sleep(0.2)
            # what held before still holds while they go on: a stale signature, a 10 MB body
            body = urllib.parse.urlencode({"command": "/status", "text": "", "user_id": ADMIN, "channel_id": "C1"})
            assert timed_post(bot.url, body, sign(body, SECRET, timestamp=int(time.time()) - 600))[0] == 401
            with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S) as s:
                s.sendall(b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10485760\r\n\r\nxx")
                assert b" 413 " in s.recv(4096).split(b"\r\n", 1)[0]
        finally:
            slow.done.set()
            slow.thread.join(timeout=10)
        assert bot.proc.poll() is None
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    p50 = statistics.median(ordered)
    print(f"signed /status under {SLOW_CLIENTS} slow clients: n={len(ordered)} p50={p50 * 1000:.0f} ms "
          f"p99={p99 * 1000:.0f} ms max={ordered[-1] * 1000:.0f} ms; reconnects {slow.reconnects}")  # fmt: skip
    assert len(latencies) > 10
