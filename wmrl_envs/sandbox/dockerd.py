"""A private Docker engine for tests and for hosts without a running one.

::

    with PrivateDockerd() as daemon:             # root only; starts in about a second
        executor = make_executor("docker", host=daemon.host)

or, from a shell, ``python -m wmrl_envs.sandbox.dockerd`` (prints the ``DOCKER_HOST`` to use and
runs until interrupted).

Its data root, exec root, socket and log live in one temp folder, and its configuration is
an empty file there, so the host's ``/etc/docker/daemon.json`` does not apply. A stock
dockerd changes host networking (the ``docker0`` bridge, ``ip_forward=1``, the iptables
FORWARD policy set to DROP); this one starts with no bridge, no iptables rules and no IP
forwarding, which the sandbox needs anyway (its containers have no network). :meth:`stop`
still compares the host's networking with what it recorded before the start and restores
whatever changed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox.docker_cli import INSTALL_HINT

log = logging.getLogger(__name__)

# sockaddr_un holds 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 107
_STOP_TIMEOUT_S = 20.0
_FORWARDING = (Path("/proc/sys/net/ipv4/ip_forward"), Path("/proc/sys/net/ipv6/conf/all/forwarding"))
_NET_DIR = Path("/sys/class/net")
_IPTABLES = ("iptables", "ip6tables")


@dataclass(frozen=True)
class HostNetwork:
    """The parts of the host's networking a dockerd is known to change."""

    interfaces: frozenset[str]
    forwarding: tuple[tuple[str, str], ...]  # (sysctl file, value)
    forward_policies: tuple[tuple[str, str], ...]  # (iptables binary, FORWARD policy)

    @classmethod
    def snapshot(cls) -> HostNetwork:
        forwarding = tuple((str(p), p.read_text().strip()) for p in _FORWARDING if p.exists())
        policies = []
        for tool in _IPTABLES:
            policy = _forward_policy(tool)
            if policy is not None:
                policies.append((tool, policy))
        return cls(frozenset(os.listdir(_NET_DIR)), forwarding, tuple(policies))


def _forward_policy(tool: str) -> str | None:
    """The FORWARD chain's policy as ``tool -S`` prints it (None where the tool cannot tell)."""
    if shutil.which(tool) is None:
        return None
    listed = subprocess.run([tool, "-S", "FORWARD"], check=False, capture_output=True, text=True)
    for line in listed.stdout.splitlines():
        if line.startswith("-P FORWARD "):
            return line.split()[2]
    return None


def restore_network(before: HostNetwork) -> list[str]:
    """Undo what changed since ``before``; returns a line per change found (empty: none)."""
    after = HostNetwork.snapshot()
    changes = []
    for name in sorted(after.interfaces - before.interfaces):
        if name == "docker0" or name.startswith("br-"):  # the bridges dockerd creates; others are not ours
            changes.append(f"interface {name} appeared; deleted")
            subprocess.run(["ip", "link", "delete", name], check=False, capture_output=True)
    old_forwarding = dict(before.forwarding)
    for path, value in after.forwarding:
        if path in old_forwarding and value != old_forwarding[path]:
            changes.append(f"{path} went from {old_forwarding[path]} to {value}; restored")
            Path(path).write_text(old_forwarding[path] + "\n")
    old_policies = dict(before.forward_policies)
    for tool, policy in after.forward_policies:
        if tool in old_policies and policy != old_policies[tool]:
            changes.append(f"{tool} FORWARD policy went from {old_policies[tool]} to {policy}; restored")
            subprocess.run([tool, "-P", "FORWARD", old_policies[tool]], check=False, capture_output=True)
    return changes


class PrivateDockerd:
    """A dockerd of this process's own, in a temp folder, that leaves host networking alone.

    Args:
        root: Folder for its data, exec root, socket and log (default: a new temp folder,
            removed by :meth:`stop`); the socket path must stay under 108 bytes.
        start_timeout_s: How long :meth:`start` waits for the engine to answer.

    :meth:`start` raises :class:`SandboxUnavailableError` when ``dockerd`` is missing, the
    process is not root, or the engine does not come up (the message quotes its log). The
    daemon gets SIGTERM if the thread that started it dies (``setpriv --pdeathsig``).
    """

    def __init__(self, root: Path | None = None, start_timeout_s: float = 30.0) -> None:
        self._given_root = Path(root) if root is not None else None
        self.root: Path | None = None
        self.start_timeout_s = start_timeout_s
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._network: HostNetwork | None = None

    @property
    def socket_path(self) -> Path:
        if self.root is None:
            raise SandboxUnavailableError("the private dockerd is not started")
        return self.root / "docker.sock"

    @property
    def host(self) -> str:
        """The engine's address, for ``make_executor("docker", host=...)`` or ``DOCKER_HOST``."""
        return f"unix://{self.socket_path}"

    def start(self) -> PrivateDockerd:
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise SandboxUnavailableError(f"dockerd is not installed: {INSTALL_HINT}")
        if os.geteuid() != 0:
            raise SandboxUnavailableError("a private dockerd needs root; as another user, use a running Docker engine")
        root = self._given_root or Path(tempfile.mkdtemp(prefix="wmrl-dockerd-"))
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            raise SandboxUnavailableError(f"the socket path {self.socket_path} is too long for a unix socket")
        config = root / "daemon.json"
        config.write_text("{}\n")
        argv = [
            dockerd,
            "--config-file", str(config),
            "--data-root", str(root / "data"),
            "--exec-root", str(root / "exec"),
            "--pidfile", str(root / "dockerd.pid"),
            "--host", self.host,
            # Host networking stays as it is: no docker0 bridge, no iptables rules, no forwarding.
            "--bridge", "none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--userland-proxy=false",
        ]  # fmt: skip
        setpriv = shutil.which("setpriv")
        if setpriv:  # setpriv execs dockerd: the pid stays the daemon's
            argv = [setpriv, "--pdeathsig", "TERM", "--", *argv]
        self._network = HostNetwork.snapshot()
        with open(root / "dockerd.log", "wb") as out:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                start_new_session=True,  # a Ctrl-C in the terminal is for the caller, not the daemon
            )
        self.pid = self._proc.pid
        deadline = time.monotonic() + self.start_timeout_s
        while not _answers(self.socket_path):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = self._log_tail()
                self.stop()
                raise SandboxUnavailableError(f"the private dockerd did not come up; its log ends with:\n{tail}")
            time.sleep(0.05)
        return self

    def stop(self) -> list[str]:
        """Stop the daemon by its pid, restore host networking; returns what had to be restored."""
        if self._proc is not None:
            containerd = self._containerd_pid()
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            # dockerd stops the containerd it started, unless it was killed before it could.
            if containerd is not None and _alive(containerd):
                os.kill(containerd, signal.SIGKILL)
            self._proc = None
        changes = restore_network(self._network) if self._network is not None else []
        self._network = None
        if self.root is not None:
            _unmount_below(self.root)
            if self._given_root is None:
                shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        for change in changes:
            log.warning("private dockerd: %s", change)
        return changes

    def __enter__(self) -> PrivateDockerd:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _containerd_pid(self) -> int | None:
        assert self.root is not None
        with contextlib.suppress(OSError, ValueError):
            return int((self.root / "exec" / "containerd" / "containerd.pid").read_text())
        return None

    def _log_tail(self) -> str:
        assert self.root is not None
        with contextlib.suppress(OSError):
            return (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
        return "(no log)"


def _answers(socket_path: Path) -> bool:
    """Whether an engine answers ``GET /_ping`` on ``socket_path``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(2.0)
            conn.connect(str(socket_path))
            conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            status = conn.recv(64)
    except OSError:
        return False
    return status.startswith(b"HTTP/") and b" 200 " in status


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _unmount_below(root: Path) -> None:
    """Lazily unmount whatever a killed daemon left mounted under ``root`` (deepest first)."""
    prefix = str(root.resolve()) + "/"
    points = [p for p in mount_points() if p.startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)


def mount_points() -> list[str]:
    """Mount points of this mount namespace (``/proc/self/mountinfo``, octal escapes decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        field = line.split()[4]
        points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field))
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None, help="folder for its data and socket (default: a temp dir)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    daemon = PrivateDockerd(args.root).start()
    print(f"export DOCKER_HOST={daemon.host}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SystemExit unwinds through the finally
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        changes = daemon.stop()
        print("host networking left as found" if not changes else "\n".join(changes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
