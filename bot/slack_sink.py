"""Posting to Slack through slack-sdk's WebClient: per-channel rate limit, 429 Retry-After,
retries with backoff on 5xx and dropped connections, and reconciliation before any re-post.

A 5xx or a dropped connection leaves it unknown whether the message was posted, so before trying
again the sink looks for it in the channel by the key in its metadata (conversations.history, or
conversations.replies inside a thread). A 429 is unambiguous (nothing was posted): it waits
Retry-After and tries again. Every wait (the rate limit, a Retry-After, a backoff, the call itself)
is declared to the notifier's `Liveness` (events/heartbeat.py), so its heartbeat, written from a
thread of its own, goes on and says what it waits for instead of going silent.
"""

from __future__ import annotations

import functools
import http.client
import logging
import time
import urllib.error
from collections.abc import Callable, Iterator
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError
from trainwarden.bot.errors import SlackRejected, SlackUnavailable
from trainwarden.bot.limits import fit_message
from trainwarden.bot.rate import RateLimiter, wait_turn
from trainwarden.bot.sink import METADATA_TYPE, Message
from trainwarden.events.heartbeat import Liveness
from trainwarden.events.loop import Outage

log = logging.getLogger(__name__)

NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError)
MAX_RATE_LIMITED = 20  # 429s in a row for one call before giving up for now
TIMEOUT_S = 10  # seconds one Web API call may take
CALL_WAIT_S = 4 * TIMEOUT_S  # a call declared as a wait (an upload is three HTTP requests)
MAX_ATTEMPTS = 6  # tries of one Web API call on 5xx / connection errors before giving up for now
BACKOFF_S = 0.2  # first pause between such tries, doubled each time (up to BACKOFF_MAX_S)
BACKOFF_MAX_S = 10.0
PAGE = 200
# Refusals that no message would get past (token, scopes, channel): the setup must be fixed, the
# notification waits for it; any other refusal concerns the one message (bot/delivery.py).
SETUP_ERRORS = frozenset({
    "not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired", "no_permission",
    "missing_scope", "not_allowed_token_type", "access_denied", "channel_not_found", "not_in_channel",
    "is_archived", "team_access_not_granted", "org_login_required", "two_factor_setup_required",
    "ekm_access_denied", "enterprise_is_restricted",
})  # fmt: skip


def _not_retried(record: logging.LogRecord) -> bool:
    """slack_sdk logs an ERROR for every call that could not reach Slack; the sink retries those and says the
    outage once (SlackSink.outage), so they are left out."""
    return not record.getMessage().startswith("Failed to send a request to Slack API server")


# the logger of the bot's WebClient (wiring.slack_client), in place of slack_sdk's own
SDK_LOG = logging.getLogger(f"{__name__}.sdk")
SDK_LOG.addFilter(_not_retried)


class SlackSink:
    def __init__(
        self,
        *,
        client: WebClient,
        limiter: RateLimiter,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
        liveness: Liveness | None = None,
    ) -> None:
        self.client = client
        self.liveness = liveness or Liveness(stale_s=float("inf"))  # the notifier's (wiring), to declare waits
        self.limiter = limiter
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.sleep = sleep
        self.retries = 0  # calls repeated after 429, 5xx or a dropped connection
        # one line when Slack stops answering and one, with its duration, when it answers again: a 2-minute
        # outage logged a line per try (and slack_sdk an ERROR per try: wiring.slack_client quiets those)
        self.outage = Outage("notifier", service="Slack")

    def post(self, message: Message) -> str:
        text, blocks = fit_message(message.text, message.blocks)
        kwargs: dict[str, Any] = {"channel": message.channel, "text": text, "metadata": message.metadata,
                                  "unfurl_links": False}  # fmt: skip
        if blocks:
            kwargs["blocks"] = blocks
        if message.thread_ts:
            kwargs["thread_ts"] = message.thread_ts
            kwargs["reply_broadcast"] = message.broadcast
        started = time.time()

        def recover() -> str | None:
            return self.find(channel=message.channel, key=message.key, thread_ts=message.thread_ts, oldest=started)

        reply = self._call("chat.postMessage", message.channel, lambda: self.client.chat_postMessage(**kwargs), recover,
                           paced=message.paced)  # fmt: skip
        return str(reply["ts"])

    def upload(self, message: Message) -> str:
        """files_upload_v2: files.getUploadURLExternal per file, a POST of its bytes to the URL it gives,
        then files.completeUploadExternal sharing them in the channel's thread with `text` as comment.
        Not reconciled: a repeat after an unclear failure may share the files twice (harmless)."""
        text, _ = fit_message(message.text, [])
        uploads = [{"filename": name, "content": data, "title": name} for name, data in message.files]

        def call() -> Any:
            try:
                return self.client.files_upload_v2(channel=message.channel, thread_ts=message.thread_ts,
                                                   initial_comment=text, file_uploads=uploads)  # fmt: skip
            except (SlackRequestError, urllib.error.HTTPError) as exc:
                if isinstance(exc, urllib.error.HTTPError) and exc.code >= 500:
                    raise  # retried like any 5xx
                # the upload URL refused the bytes: this upload's problem, not the setup's
                raise SlackRejected(f"Slack refused the upload: {exc}", error="upload_failed", setup=False,
                                    channel=message.channel) from None  # fmt: skip

        reply = self._call("files.upload", message.channel, call)
        files = reply.get("files") or [{}]
        return str(files[0].get("id") or "")

    def update(self, *, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        """chat.update is idempotent: a repeat after an unclear failure is harmless."""
        text, blocks = fit_message(text, blocks)
        self._call("chat.update", channel, lambda: self.client.chat_update(channel=channel, ts=ts, text=text,
                                                                          blocks=blocks))  # fmt: skip

    def find(self, *, channel: str, key: str, thread_ts: str | None, oldest: float) -> str | None:
        for message in self._scan(channel=channel, thread_ts=thread_ts, oldest=oldest):
            meta = message.get("metadata") or {}
            if meta.get("event_type") == METADATA_TYPE and (meta.get("event_payload") or {}).get("key") == key:
                return str(message["ts"])
        return None

    def _scan(self, *, channel: str, thread_ts: str | None, oldest: float) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            args: dict[str, Any] = {"channel": channel, "include_all_metadata": True, "limit": PAGE}
            if cursor:
                args["cursor"] = cursor
            if thread_ts:
                call = functools.partial(self.client.conversations_replies, ts=thread_ts, **args)
                page = self._read("conversations.replies", channel, call)
            else:
                oldest_s = f"{max(0.0, oldest - 5):.6f}"
                call = functools.partial(self.client.conversations_history, oldest=oldest_s, **args)
                page = self._read("conversations.history", channel, call)
            yield from page.get("messages") or []
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return

    def _read(self, method: str, channel: str, call: Callable[[], Any]) -> Any:
        return self._call(method, channel, call, limited=False)

    def _call(
        self,
        method: str,
        channel: str,
        call: Callable[[], Any],
        recover: Callable[[], str | None] | None = None,
        *,
        limited: bool = True,
        paced: bool = False,
    ) -> Any:
        """Run one Web API call through the rate limit and the retry rules; `recover` looks for a
        post that may have landed before a failure we could not read."""
        failures = limited_429 = 0
        unclear = False
        while True:
            # a post the notify path paced (bot/rate.py) has its token: only a Retry-After holds its first try
            first_paced = paced and failures == limited_429 == 0
            wait_turn(self.limiter, channel, what=method, counted=limited and not first_paced,
                      liveness=self.liveness, sleep=self.sleep)  # fmt: skip
            if unclear and recover is not None and (ts := recover()) is not None:
                log.info("%s to %s had landed before the failure; not posting again", method, channel)
                return {"ts": ts}
            try:
                with self.liveness.waiting(f"waiting for Slack to answer {method}", CALL_WAIT_S):
                    reply = call()
                self.outage.succeeded()
                return reply
            except SlackApiError as exc:
                status = exc.response.status_code
                if status == 429 and limited_429 < MAX_RATE_LIMITED:
                    limited_429 += 1
                    self.retries += 1
                    retry_after = float(exc.response.headers.get("Retry-After") or exc.response.headers.get(
                        "retry-after") or 1)  # fmt: skip
                    log.warning("Slack rate-limited %s; waiting %.0fs (Retry-After)", method, retry_after)
                    self.limiter.pause(channel, retry_after)
                    continue
                if status < 500 and status != 429:
                    self.outage.succeeded()  # Slack answered
                    error = str(exc.response.get("error") or status)
                    setup = error in SETUP_ERRORS
                    fix = "; check the bot token's scopes and that the bot was invited to the channel" if setup else ""
                    raise SlackRejected(f"Slack refused {method}: {error}{fix}", error=error, setup=setup,
                                        channel=channel) from None  # fmt: skip
                cause: str = f"HTTP {status}"
            except NETWORK_ERRORS as exc:
                cause = f"{type(exc).__name__}: {exc}"
            failures += 1
            unclear = True
            self.outage.failed(SlackUnavailable(f"Slack does not answer {method} ({cause})", channel=channel))
            if failures >= self.max_attempts:
                raise SlackUnavailable(f"{method} failed {failures} times, last: {cause}", channel=channel)
            self.retries += 1
            pause = min(BACKOFF_MAX_S, self.backoff_s * 2 ** (failures - 1))
            log.debug("%s failed (%s); retrying in %.1fs", method, cause, pause)  # the outage's line says it
            with self.liveness.waiting(f"retrying {method} in {pause:.1f} s after {cause}", pause):
                self.sleep(pause)
