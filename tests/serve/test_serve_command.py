"""`transformer-lab serve` binds its address before it says "open ...": a bad --host or --port is one line, exit 2.

Oracles: a socket this test holds on the port, an address no machine is given (TEST-NET-1),
a resolver made to fail, and, for the good case, the page answering on the port it named.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest
import uvicorn

from transformer_lab.cli import main

# RFC 5737's documentation range: assigned to no machine, so binding it always fails.
NOT_THIS_MACHINE = "192.0.2.1"


def serve(checkpoint: Path, *options: str) -> int:
    return main(["serve", "--checkpoint", str(checkpoint), *options])


def test_a_port_in_use_is_named_before_open_is_said(
    translation_run: Path, find_unused_port: Callable[[], int], capsys: pytest.CaptureFixture[str]
) -> None:
    port = find_unused_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert serve(translation_run, "--port", str(port)) == 2
    captured = capsys.readouterr()
    assert "open " not in captured.out
    assert captured.err.splitlines() == [
        f"transformer-lab serve: error: --port {port}: expected a free port on 127.0.0.1, got one in use (EADDRINUSE)"
    ]


def test_an_address_of_another_machine_is_named(
    translation_run: Path, find_unused_port: Callable[[], int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve(translation_run, "--host", NOT_THIS_MACHINE, "--port", str(find_unused_port())) == 2
    captured = capsys.readouterr()
    assert "open " not in captured.out
    assert captured.err.splitlines() == [
        f"transformer-lab serve: error: --host: expected an address of this machine, got '{NOT_THIS_MACHINE}' "
        "(EADDRNOTAVAIL: Cannot assign requested address)"
    ]


def test_a_host_that_does_not_resolve_is_named(
    translation_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The resolver made to fail: a real lookup of a made-up name may wait on the network.
    def unknown(*arguments: Any, **keywords: Any) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    assert serve(translation_run, "--host", "999.1.1.1", "--port", "18765") == 2
    captured = capsys.readouterr()
    assert "open " not in captured.out
    assert captured.err.splitlines() == [
        "transformer-lab serve: error: --host: expected an address of this machine, got '999.1.1.1' "
        "(EAI_NONAME: Name or service not known)"
    ]


def test_the_page_answers_on_the_socket_bound_before_open_is_said(
    translation_run: Path,
    find_unused_port: Callable[[], int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    servers: list[uvicorn.Server] = []

    class RecordedServer(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            servers.append(self)

    monkeypatch.setattr(uvicorn, "Server", RecordedServer)
    port = find_unused_port()
    outcome: list[int] = []
    # In a thread, where neither the command nor uvicorn installs signal handlers.
    thread = threading.Thread(target=lambda: outcome.append(serve(translation_run, "--port", str(port))), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (servers and servers[0].started):
        assert thread.is_alive() and time.monotonic() < deadline, f"serve did not start: {capsys.readouterr()}"
        time.sleep(0.05)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/models", timeout=10) as response:
            assert response.status == 200
    finally:
        servers[0].should_exit = True
        thread.join(timeout=10)
    assert outcome == [0]
    assert capsys.readouterr().out.splitlines()[-1] == f"open http://127.0.0.1:{port}/  (Ctrl-C stops)"


@pytest.mark.parametrize("host", ["", " "])
def test_an_empty_host_is_refused_not_read_as_every_interface(
    translation_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    # The resolver reads "" as every interface: the page was opened to the network ("open http://:8000/").
    def never(*arguments: Any, **keywords: Any) -> None:
        raise AssertionError("serve listened")

    monkeypatch.setattr(uvicorn, "Server", never)
    with pytest.raises(SystemExit) as exited:
        serve(translation_run, "--host", host, "--port", "18765")
    assert exited.value.code == 2
    shown = "an empty one" if not host else repr(host)
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab serve: error: argument --host: expected an address to listen on (127.0.0.1: this machine "
        f"only; 0.0.0.0: every network interface), got {shown} (see transformer-lab serve --help)"
    ]


@pytest.mark.parametrize(("host", "url"), [("::1", "http://[::1]:18765/"), ("localhost", "http://localhost:18765/")])
def test_the_page_address_said_is_one_a_browser_opens(
    translation_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str, url: str
) -> None:
    # An IPv6 address was said bare, "open http://::1:18765/", which no browser reads as a host and port.
    ran: list[str] = []

    class NotRun(uvicorn.Server):
        def run(self, sockets: Any = None) -> None:
            ran.append(self.config.host)

    monkeypatch.setattr(uvicorn, "Server", NotRun)
    monkeypatch.setattr("transformer_lab.cli.serve_command.listening_sockets", lambda host, port: [])
    assert serve(translation_run, "--host", host, "--port", "18765") == 0
    assert ran == [host]
    assert capsys.readouterr().out.splitlines()[-1] == f"open {url}  (Ctrl-C stops)"
