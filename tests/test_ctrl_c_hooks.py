"""Two Ctrl-C close together (docs/running.md "Ctrl-C"): an interrupt Python drops in a callback
is delivered again, and asyncio's shutdown does not report what the interrupt cancelled."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import weakref

import pytest

from fieldcheck._cli import main
from fieldcheck._cli._runopts import _shutdown_report


class _Thing:
    pass


def _interrupt(_: object) -> None:
    raise KeyboardInterrupt


def test_an_interrupt_dropped_in_a_weakref_callback_is_delivered_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", main._unraisable)
    thing = _Thing()
    ref = weakref.ref(thing, _interrupt)
    with pytest.raises(KeyboardInterrupt):  # not lost: the command went on to exit 0
        del thing  # the callback's KeyboardInterrupt: Python cannot raise it here
        for _ in range(5000):  # it lands here, about 10 ms later
            time.sleep(0.001)
    assert ref() is None
    assert "Exception ignored" not in capsys.readouterr().err


def test_other_unraisable_errors_are_still_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "unraisablehook", main._unraisable)

    def fail(_: object) -> None:
        raise ValueError("a real bug")

    thing = _Thing()
    ref = weakref.ref(thing, fail)
    del thing
    assert ref() is None
    assert "ValueError: a real bug" in capsys.readouterr().err


def test_asyncio_shutdown_reports_nothing_while_an_interrupt_leaves_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.new_event_loop()
    try:
        context = {"message": "unhandled exception during asyncio.run() shutdown"}
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                _shutdown_report(loop, {**context, "exception": RuntimeError("cancelled run")})
            assert caplog.records == []
            _shutdown_report(loop, {**context, "exception": RuntimeError("a real bug")})
        assert [r.getMessage() for r in caplog.records] == [context["message"]]
    finally:
        loop.close()
