"""A client that leaves while its upload is scored (trial a, finding 1): the server stops the run as
Ctrl-C stops the CLI's (interrupted in the store, its folder left unfinished, nothing removed)
instead of working minutes for nobody."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from live_server import Serve

from fieldcheck.store import Store

GOOD = b'{"id": "first", "ground_truth": {"a": 1}, "output": {"a": 1}}\n'
BAD = b'{"id": "x", "ground_truth": {"a": 1}, "output": {"a": 1, "b": oops}}\n'


def _post_and_leave(base_url: str, path: str, body: bytes, boundary: str) -> None:
    """Send the whole multipart request, then close the connection without reading an answer."""
    url = urlsplit(base_url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(head + body)
        time.sleep(1.0)  # the upload is read and its scoring under way


@pytest.mark.parametrize("path", ["/api/score/json", "/api/json/batch"])
def test_a_client_that_leaves_stops_its_run(
    serve: Serve, tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    live = serve()
    field = "batch" if path.endswith("/json") else "file"
    boundary = "fieldcheckXYZ"
    data = GOOD + BAD * 400_000  # 28 MB: tens of seconds of work on a busy machine
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
            f'filename="garbage.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    caplog.set_level(logging.WARNING, logger="fieldcheck")
    _post_and_leave(live.base_url, path, body, boundary)
    line = f"{path}: the client left: its run was stopped, as Ctrl-C stops one"
    deadline = time.monotonic() + 60  # said once the worker thread has stopped
    while line not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.2)
    assert line in caplog.text
    # stopped while reading (nothing stored yet) or scoring (the run interrupted), as Ctrl-C
    runs = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}").list_runs()
    assert [r.status for r in runs] in ([], ["interrupted"])
    # its upload kept, its run folder not renamed into place
    (folder,) = (tmp_path / "data" / "fieldcheck-runs").iterdir()
    assert (folder / "inputs" / "batch" / "garbage.jsonl").stat().st_size == len(data)
    assert not (folder / "run").exists()
