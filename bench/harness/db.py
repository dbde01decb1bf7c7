"""PostgreSQL and Redis for a benchmark: a database made fresh and dropped, one connection kept
open for the checks, Redis flushed before a run, and Django set up in this process."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from urllib.parse import urlsplit, urlunsplit

from harness import ROOT, BenchError


class Pg:
    """One PostgreSQL database for a benchmark (trust auth; the user may create databases)."""

    def __init__(self, host: str, port: int, user: str, db: str):
        import psycopg

        self.psycopg = psycopg
        self.host, self.port, self.user, self.db = host, port, user, db
        self._control = None

    @classmethod
    def from_args(cls, args) -> Pg:
        """From the --pg-host, --pg-port, --pg-user and --db options."""
        return cls(args.pg_host, args.pg_port, args.pg_user, args.db)

    def url(self, db: str | None = None) -> str:
        return f"postgres://{self.user}@{self.host}:{self.port}/{db or self.db}"

    def connect(self, db: str | None = None, autocommit: bool = True):
        return self.psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname=db or self.db, autocommit=autocommit
        )

    def version(self) -> str:
        """The server's version; a BenchError naming the address when PostgreSQL can't be reached."""
        try:
            with self.connect("postgres") as conn:
                return conn.execute("SHOW server_version").fetchone()[0]
        except Exception as exc:
            raise BenchError(f"PostgreSQL at {self.host}:{self.port} (user {self.user}): {exc}") from exc

    def recreate_database(self) -> None:
        with self.connect("postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.db}"')

    def drop_database(self) -> None:
        with self.connect("postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')

    def control(self):
        """One connection to the benchmark database, kept open for the whole run: the checks after a
        figure must work even when the server has used up every connection PostgreSQL allows."""
        if self._control is None or self._control.closed:
            self._control = self.connect()
        return self._control

    @contextlib.contextmanager
    def kept(self):
        """The kept connection, in a with-block that leaves it open."""
        yield self.control()

    def close_control(self) -> None:
        if self._control is not None:
            with contextlib.suppress(Exception):
                self._control.close()
            self._control = None

    def scalar(self, sql: str, params=None):
        row = self.control().execute(sql, params).fetchone()
        return row[0] if row else None

    def execute(self, sql: str, params=None) -> None:
        self.control().execute(sql, params)

    def sessions_opened(self) -> int | None:
        """PostgreSQL's count of sessions (connections) opened on this database (pg_stat_database)."""
        with contextlib.suppress(Exception):
            return self.scalar("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return None

    def psql(self, *commands: str) -> str:
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.host, "-p", str(self.port), "-U", self.user]
        cmd += ["-d", self.db]
        for command in commands:
            cmd += ["-c", command]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BenchError(f"psql failed: {done.stderr.strip()}")
        return done.stdout


# --- a database named by a URL (the scripts that take DATABASE_URL) -------------------------------
def _admin_execute(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(urlunsplit(urlsplit(url)._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(sql)


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def recreate_database_url(url: str) -> None:
    """Drop (closing its connections) and create the PostgreSQL database the URL names."""
    drop_database_url(url)
    _admin_execute(url, f'CREATE DATABASE "{database_name(url)}"')


def drop_database_url(url: str) -> None:
    _admin_execute(url, f'DROP DATABASE IF EXISTS "{database_name(url)}" WITH (FORCE)')


# --- Redis ---------------------------------------------------------------------------------------
def _redis_address(url: str) -> tuple[str, int, str] | None:
    match = re.match(r"redis://([^:/]+)(?::(\d+))?(?:/(\d+))?$", url)
    if not match:
        return None
    return match.group(1), int(match.group(2) or 6379), match.group(3) or "0"


def redis_flush(url: str) -> None:
    """FLUSHDB on the URL's database; an unusual URL is left to the operator."""
    address = _redis_address(url)
    if address is None:
        return
    host, port, db = address
    try:
        with socket.create_connection((host, port), timeout=3) as sock:
            sock.sendall(f"SELECT {db}\r\nFLUSHDB\r\n".encode())
            reply = sock.recv(100)
    except OSError as exc:
        raise BenchError(f"Redis at {host}:{port}: {exc}") from exc
    if reply[:1] == b"-":
        raise BenchError(f"Redis refused SELECT/FLUSHDB: {reply!r}")


def redis_connections_received(url: str) -> int | None:
    """Redis's count of connections accepted since it started (INFO stats), or None."""
    match = re.match(r"redis://([^:/]+)(?::(\d+))?", url)
    if not match:
        return None
    try:
        with socket.create_connection((match.group(1), int(match.group(2) or 6379)), timeout=3) as sock:
            sock.sendall(b"INFO stats\r\n")
            data = b""
            while b"total_connections_received:" not in data or not data.endswith(b"\r\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    found = re.search(rb"total_connections_received:(\d+)", data)
    return int(found.group(1)) if found else None


class ConnectionSampler(threading.Thread):
    """Counts the benchmark database's connections twice a second, over one connection opened up front."""

    def __init__(self, pg: Pg):
        super().__init__(daemon=True)
        self.conn = pg.connect("postgres")
        self.db = pg.db
        self.peak = 0
        self.window_peak = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.5):
            try:
                count = self.conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [self.db])
                value = count.fetchone()[0]
            except Exception:  # the sampler must never stop the benchmark
                continue
            self.peak = max(self.peak, value)
            self.window_peak = max(self.window_peak, value)

    def reset_window(self) -> None:
        self.window_peak = 0

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=2)
        with contextlib.suppress(Exception):
            self.conn.close()


# --- Django in this process ------------------------------------------------------------------------
def django_setup(env: dict[str, str] | None = None, *, migrate: bool = True) -> None:
    """Set ``env`` in os.environ, set Django up from the checkout, and migrate its database."""
    os.environ.update(env or {})
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
