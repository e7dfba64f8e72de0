"""What benchmarks/chaos/chaos.py injects faults into: a private PostgreSQL cluster, network
namespaces for the beat replicas, and a TCP proxy in front of the broker.

* :class:`PrivateCluster`: a PostgreSQL cluster of its own (``initdb`` in a temporary
  folder, another port), so that it can be crashed and restarted without touching the
  machine's server. Run as the ``postgres`` user when the harness is root.
* :class:`Namespaces`: one network namespace per beat slot, each with two veth pairs to
  the root namespace: one that only the database is reached through, one for the broker
  proxy. A partition puts a ``blackhole`` qdisc on both ends of a slot's database pair:
  the kernel drops every packet silently, as a dead link would, and the standbys still
  reach the database on their own pairs. :class:`Loopback` is the same interface for
  runs without a partition (no root needed).
* :class:`BrokerProxy`: forwards to the broker; ``reset`` closes every connection and
  refuses new ones, ``hang`` keeps sockets open and forwards nothing until ``resume``.

Every ``close`` is idempotent and safe after a partial set-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path


class InfraError(RuntimeError):
    """Something the harness needs is missing here (said in one line)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


# -- PostgreSQL ---------------------------------------------------------------------------


class PrivateCluster:
    """A PostgreSQL cluster in a temporary folder, trusting the addresses it listens on."""

    def __init__(self, listen: Sequence[str] = ("127.0.0.1",), port: int | None = None,
                 trust: Sequence[str] = ()) -> None:
        self.bindir = self.find_bindir()
        self.listen = list(listen)
        self.trust = list(trust)
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="awa-chaos-pg-"))
        self.datadir = self.root / "data"
        self.log = self.root / "postgres.log"
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise InfraError("running as root and there is no postgres user for initdb"
                                 ) from None
            self.user = "postgres"
            shutil.chown(self.root, "postgres")
        self._initialised = False

    @staticmethod
    def find_bindir() -> Path:
        pg_config = shutil.which("pg_config")
        if pg_config is None:
            raise InfraError("no pg_config on PATH (PostgreSQL's initdb is needed)")
        bindir = Path(_run([pg_config, "--bindir"]).stdout.strip())
        if not (bindir / "initdb").exists():
            raise InfraError(f"no initdb in {bindir}")
        return bindir

    def _as_owner(self, *argv: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        return _run([*prefix, *argv])

    def url(self, host: str = "127.0.0.1", dbname: str = "postgres") -> str:
        return f"postgresql://postgres@{host}:{self.port}/{dbname}"

    def init(self) -> None:
        self._as_owner(str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", "postgres",
                       "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
        self._initialised = True
        conf = [f"port = {self.port}", f"listen_addresses = '{','.join(self.listen)}'",
                f"unix_socket_directories = '{self.root}'", "fsync = off",
                "synchronous_commit = off", "full_page_writes = off", "max_connections = 200",
                "log_min_messages = warning", "shared_buffers = 32MB"]
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write("\n".join(conf) + "\n")
        with open(self.datadir / "pg_hba.conf", "a") as f:
            for net in ["127.0.0.1/32", *self.trust]:
                f.write(f"host all all {net} trust\n")

    def start(self) -> None:
        self._as_owner(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l",
                       str(self.log), "-w", "-t", "60", "start")

    def crash(self) -> None:
        """Stop as a crash would: no checkpoint, every backend killed."""
        self._as_owner(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m",
                       "immediate", "-w", "stop")

    def close(self) -> None:
        if self._initialised and (self.datadir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self.crash()
        shutil.rmtree(self.root, ignore_errors=True)


# -- the network --------------------------------------------------------------------------


class Loopback:
    """No namespaces: every replica reaches the database and the proxy on 127.0.0.1."""

    can_partition = False

    def __init__(self, slots: int) -> None:
        self.slots = slots

    def db_host(self, slot: int) -> str:
        return "127.0.0.1"

    def broker_host(self, slot: int) -> str:
        return "127.0.0.1"

    def db_listen(self) -> list[str]:
        return ["127.0.0.1"]

    def trusted(self) -> list[str]:
        return []

    def broker_listen(self) -> list[str]:
        return ["127.0.0.1"]

    def wrap(self, slot: int, argv: list[str]) -> list[str]:
        return argv

    def setup(self) -> None:
        pass

    def partition(self, slot: int) -> None:
        raise InfraError("a partition needs network namespaces (root and `ip`)")

    heal = partition

    def close(self) -> None:
        pass


class Namespaces(Loopback):
    """A network namespace per slot; see the module's docstring."""

    can_partition = True
    DB_NET = "10.251"
    BROKER_NET = "10.252"

    def __init__(self, slots: int) -> None:
        super().__init__(slots)
        if os.geteuid() != 0:
            raise InfraError("network namespaces need root")
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                raise InfraError(f"no `{tool}` on PATH")
        self.tag = secrets.token_hex(2)
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.partitioned: set[int] = set()

    def ns(self, slot: int) -> str:
        return f"awachaos-{self.tag}-{slot}"

    def _dev(self, kind: str, slot: int, side: str) -> str:
        return f"ac{self.tag}{kind}{slot}{side}"  # at most 15 characters

    def db_host(self, slot: int) -> str:
        return f"{self.DB_NET}.{slot}.1"

    def broker_host(self, slot: int) -> str:
        return f"{self.BROKER_NET}.{slot}.1"

    def db_listen(self) -> list[str]:
        return ["127.0.0.1", *(self.db_host(s) for s in range(self.slots))]

    def trusted(self) -> list[str]:
        return [f"{self.DB_NET}.0.0/16"]

    def broker_listen(self) -> list[str]:
        return [self.broker_host(s) for s in range(self.slots)]

    def wrap(self, slot: int, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(slot), *argv]

    def setup(self) -> None:
        used = _run(["ip", "-o", "-4", "addr", "show"]).stdout
        for net in (self.DB_NET, self.BROKER_NET):
            if f" {net}." in used:
                raise InfraError(f"addresses in {net}.0.0/16 are in use here already")
        for slot in range(self.slots):
            ns = self.ns(slot)
            _run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            for kind, net in (("d", self.DB_NET), ("b", self.BROKER_NET)):
                host, inner = self._dev(kind, slot, "h"), self._dev(kind, slot, "n")
                _run(["ip", "link", "add", host, "type", "veth", "peer", "name", inner])
                self.links.append(host)
                _run(["ip", "link", "set", inner, "netns", ns])
                _run(["ip", "addr", "add", f"{net}.{slot}.1/30", "dev", host])
                _run(["ip", "link", "set", host, "up"])
                _run(["ip", "-n", ns, "addr", "add", f"{net}.{slot}.2/30", "dev", inner])
                _run(["ip", "-n", ns, "link", "set", inner, "up"])

    def partition(self, slot: int) -> None:
        """Drop every packet between the slot and the database, both ways, in the kernel."""
        _run(["tc", "qdisc", "add", "dev", self._dev("d", slot, "h"), "root", "blackhole"])
        self.partitioned.add(slot)
        _run(["ip", "netns", "exec", self.ns(slot), "tc", "qdisc", "add", "dev",
              self._dev("d", slot, "n"), "root", "blackhole"])

    def heal(self, slot: int) -> None:
        _run(["tc", "qdisc", "del", "dev", self._dev("d", slot, "h"), "root"], check=False)
        _run(["ip", "netns", "exec", self.ns(slot), "tc", "qdisc", "del", "dev",
              self._dev("d", slot, "n"), "root"], check=False)
        self.partitioned.discard(slot)

    def close(self) -> None:
        for slot in list(self.partitioned):
            self.heal(slot)
        for link in self.links:  # deleting one end deletes its peer
            _run(["ip", "link", "del", link], check=False)
        self.links.clear()
        for ns in self.namespaces:
            _run(["ip", "netns", "del", ns], check=False)
        self.namespaces.clear()


# -- the broker proxy ---------------------------------------------------------------------


class BrokerProxy:
    """A TCP proxy to the broker on each of ``hosts`` (one port), run by an asyncio loop
    on a thread of its own; the fault methods return once the fault is in place.
    ``upstream`` is a (host, port) pair, or the path of a Unix socket (a PostgreSQL
    server that listens on no TCP port, as the embedded one)."""

    def __init__(self, hosts: Sequence[str], upstream: tuple[str, int] | str) -> None:
        self.hosts = list(hosts)
        self.upstream = upstream
        self.port = free_port(self.hosts[0])
        self.loop = asyncio.new_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        self._transports: set[asyncio.BaseTransport] = set()
        self._flowing = asyncio.Event()
        self._thread = threading.Thread(target=self.loop.run_forever, name="broker-proxy",
                                        daemon=True)
        self.connections = 0

    def url(self, host: str) -> str:
        return f"amqp://guest:guest@{host}:{self.port}//"

    def _call(self, coro: object, timeout: float = 10.0) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def start(self) -> None:
        self._thread.start()
        self._call(self._listen())

    async def _listen(self) -> None:
        self._flowing.set()
        for host in self.hosts:
            self._servers.append(await asyncio.start_server(
                self._serve, host, self.port, reuse_address=True))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                     ) -> None:
        self.connections += 1
        self._transports.add(writer.transport)
        try:
            await self._flowing.wait()  # a hung broker does not even answer the handshake
            if isinstance(self.upstream, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            self._transports.discard(writer.transport)
            return
        self._transports.add(up_writer.transport)
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer),
                             return_exceptions=True)
        for w in (writer, up_writer):
            w.transport.abort()
            self._transports.discard(w.transport)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await self._flowing.wait()
                data = await reader.read(65536)
                if not data:
                    break
                # Data read just before a hang waits here: nothing gets through.
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()

    async def _reset(self) -> None:
        for server in self._servers:
            server.close()
        # Connections first: from Python 3.12.1 on, wait_closed() waits for them too.
        for transport in list(self._transports):
            transport.abort()  # an RST, as a broker that went away
        self._transports.clear()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    def reset(self) -> None:
        """Close every connection, and refuse new ones until :meth:`restore`."""
        self._call(self._reset())

    def restore(self) -> None:
        self._call(self._listen())

    def hang(self) -> None:
        """Keep every socket open and forward nothing, until :meth:`resume`."""
        self.loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        self.loop.call_soon_threadsafe(self._flowing.set)

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._reset())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
