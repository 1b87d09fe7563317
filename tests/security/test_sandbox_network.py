"""Agent code has no network at all: not the host's loopback, not the outside world."""

from __future__ import annotations

import socket
import threading

import pytest

from wmrl_envs.sandbox import ExecutionStatus

pytestmark = pytest.mark.security


def test_host_loopback_listener_is_unreachable(arena):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept_loop)
    thread.start()
    try:
        result = arena.run(
            f"""
            import socket
            for host in ("127.0.0.1", "localhost", "::1"):
                try:
                    socket.create_connection((host, {port}), timeout=3).close()
                    print("LEAK", host)
                except OSError as exc:
                    print("BLOCKED", host, type(exc).__name__)
            """
        )
    finally:
        stop.set()
        thread.join()
        server.close()
    assert result.status is ExecutionStatus.OK, result
    assert "LEAK" not in result.stdout
    assert result.stdout.count("BLOCKED") == 3
    assert accepted == []


def test_outside_address_fails_fast(arena):
    result = arena.run(
        """
        import socket
        s = socket.socket()
        s.settimeout(10)
        try:
            s.connect(("1.1.1.1", 53))
            print("LEAK connected")
        except TimeoutError:
            print("HUNG: the connect attempt timed out instead of failing")
        except OSError as exc:
            print("BLOCKED", exc.errno)
        try:
            socket.getaddrinfo("pypi.org", 443)
            print("LEAK resolved")
        except OSError:
            print("BLOCKED dns")
        """
    )
    assert result.status is ExecutionStatus.OK, result
    assert "LEAK" not in result.stdout
    assert "HUNG" not in result.stdout
    assert result.stdout.count("BLOCKED") == 2


def test_only_a_loopback_interface_exists(arena):
    result = arena.run("import socket\nprint(sorted(name for _, name in socket.if_nameindex()))")
    assert result.status is ExecutionStatus.OK, result
    assert result.stdout.strip() == "['lo']"
