"""The bot's supervision of its own loops: a loop that dies makes `run` return non-zero, logged once."""

import logging
import threading

from trainwarden.bot.service import EXIT_LOOP_DIED, SlackBot


class Endpoint:
    def __init__(self) -> None:
        self.up = True
        self.stopped = False

    def start(self) -> "Endpoint":
        return self

    def stop(self) -> None:
        self.stopped = True

    def alive(self) -> bool:
        return self.up


class Notifier:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def run(self, *, stop: threading.Event) -> None:
        if self.error is not None:
            raise self.error
        stop.wait()

    def stopped(self) -> None:
        return None


def test_a_stop_ends_the_bot_with_0():
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    endpoint = Endpoint()
    assert SlackBot(notifier=Notifier(), endpoint=endpoint).run(stop=stop) == 0  # type: ignore[arg-type]
    assert endpoint.stopped


def test_a_notifier_that_raises_ends_the_bot_non_zero_with_one_traceback(caplog):
    endpoint = Endpoint()
    bot = SlackBot(notifier=Notifier(KeyError("boom")), endpoint=endpoint)  # type: ignore[arg-type]
    with caplog.at_level(logging.CRITICAL, logger="trainwarden.bot.service"):
        assert bot.run(stop=threading.Event()) == EXIT_LOOP_DIED != 0
    (record,) = caplog.records
    assert "notifier loop died" in record.getMessage() and record.exc_info is not None
    assert endpoint.stopped and bot.died == ["notifier"]


def test_an_endpoint_that_stops_serving_ends_the_bot_non_zero():
    endpoint = Endpoint()
    threading.Timer(0.2, lambda: setattr(endpoint, "up", False)).start()
    bot = SlackBot(notifier=Notifier(), endpoint=endpoint)  # type: ignore[arg-type]
    assert bot.run(stop=threading.Event()) == EXIT_LOOP_DIED
    assert bot.died == ["endpoint"]
