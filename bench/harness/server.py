"""The server a benchmark measures (gunicorn with uvicorn workers, production settings, as in the
Procfile), its environment, manage.py commands, agent keys, and setup calls to its API."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from harness import BENCH_DIR, ROOT, BenchError, say


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry.name))
    return kids


def importable(module: str) -> bool:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, check=False)
    return done.returncode == 0


def stop_group(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM to the process group ``proc`` leads (started with start_new_session), SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def wait_for_healthz(base_url: str, proc: subprocess.Popen, log_path: Path, timeout: float = 60) -> None:
    """Until GET /healthz answers 200; a BenchError with the log's tail if the server exits or never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"server exited with {proc.returncode}; see {log_path}:\n{log_tail(log_path)}")
        try:
            with urllib.request.urlopen(base_url + "/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise BenchError(f"/healthz did not answer 200 within {timeout:g} s; see {log_path}:\n{log_tail(log_path)}")


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Server:
    """gunicorn (or uvicorn) serving the project; ``args`` gives --server, --workers, --port, --reuse-port."""

    def __init__(self, args, env: dict, log_path: Path):
        self.args = args
        self.env = env
        self.log_path = log_path
        self.port = args.port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.kind, self.cmd = self._command()

    def _command(self) -> tuple[str, list[str]]:
        bin_dir = Path(sys.executable).parent
        bind = f"127.0.0.1:{self.port}"
        workers = str(self.args.workers)
        choice = self.args.server
        has_gunicorn = (bin_dir / "gunicorn").exists()
        if choice == "auto":
            if has_gunicorn and importable("uvicorn_worker"):
                choice = "gunicorn"
            elif has_gunicorn and importable("uvicorn.workers"):
                choice = "gunicorn-legacy"
            else:
                choice = "uvicorn"
        if choice == "gunicorn-wsgi":
            cmd = [str(bin_dir / "gunicorn"), "bench.wsgi:application", "-k", "gthread", "--threads", "16"]
            cmd += ["-w", workers, "-b", bind, "--log-level", "warning", "--graceful-timeout", "5", "--timeout", "60"]
            return f"what-if: gunicorn -k gthread --threads 16 -w {workers} (WSGI, bench/wsgi.py)", cmd
        if choice in ("gunicorn", "gunicorn-legacy"):
            if not has_gunicorn:
                raise BenchError("gunicorn is missing: .venv/bin/pip install -r requirements/production.txt")
            # The Procfile's worker: uvicorn's with the HTTP limits (config/http_limits.py).
            worker_class = (
                "config.gunicorn_worker.UvicornWorker" if choice == "gunicorn" else "uvicorn.workers.UvicornWorker"
            )
            cmd = [str(bin_dir / "gunicorn"), "config.asgi:application", "-k", worker_class, "-w", workers]
            cmd += ["-b", bind, "--log-level", "warning", "--graceful-timeout", "5", "--timeout", "60"]
            # As in the Procfile: a listening socket per worker, so the kernel spreads keep-alive
            # connections over the workers instead of letting the first awake take them all.
            reuse = ["--reuse-port"] if self.args.reuse_port else []
            return f"gunicorn -k {worker_class} -w {workers}{' --reuse-port' if reuse else ''}", cmd + reuse
        cmd = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--workers", workers]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning", "--no-access-log"]
        # One listening socket shared by the workers: keep-alive connections often all land on one
        # worker, which halves what a run measures. Said in the label the run prints and records.
        return f"uvicorn --workers {workers} (gunicorn missing: pip install -r requirements/production.txt)", cmd

    def start(self) -> None:
        say(f"starting server: {self.kind} on {self.base_url}")
        log = open(self.log_path, "ab")  # noqa: SIM115 - the server owns it until stop()
        self.proc = subprocess.Popen(
            self.cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        wait_for_healthz(self.base_url, self.proc, self.log_path)
        time.sleep(0.5)  # let every worker finish booting
        say(f"server healthy; workers {self.worker_pids()}")

    def worker_pids(self) -> list[int]:
        if self.proc is None:
            return []
        # uvicorn --workers may keep a resource tracker beside the workers; it uses no CPU worth counting.
        return sorted(children(self.proc.pid))

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def errors_since(self, offset: int) -> dict:
        """Server errors logged since ``offset``: how many, and the most common exception lines."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return {"count": 0, "top": []}
        count = text.count("Internal Server Error") + text.count("Exception in ASGI application")
        exc_lines = re.findall(r"^([A-Za-z_][\w.]*(?:Error|Exception)\b.*)$", text, flags=re.M)
        top = Counter(line[:200] for line in exc_lines).most_common(3)
        return {"count": count, "top": [{"line": line, "times": n} for line, n in top]}

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        say("stopping server")
        stop_group(self.proc)


def server_env(*, settings: str, database_url: str, redis_url: str, var_dir: Path, **extra: str) -> dict:
    """This process's environment without its Django, database and Redis settings, then the server's:
    production settings with a fresh secret, and the files the app writes under ``var_dir``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_"))}
    alphabet = string.ascii_letters + string.digits
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": settings,
            "SECRET_KEY": "".join(secrets.choice(alphabet) for _ in range(60)),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "0",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            # Files the app writes (workspaces, logs) go to a scratch folder, not the checkout's var/.
            "SWITCHYARD_VAR_DIR": str(var_dir),
            "PYTHONUNBUFFERED": "1",
            "PYTHONWARNINGS": "ignore::DeprecationWarning",
            **extra,
        }
    )
    return env


def manage(env: dict, *argv: str) -> str:
    """``manage.py argv`` in the checkout with ``env``; its stdout, or a BenchError with its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BenchError(f"manage.py {' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def create_agent_keys(env: dict, prefix: str, count: int) -> list[str]:
    """Keys for agents <prefix>00 (scopes agent and orchestrate) .. <prefix><count-1> (scope agent)."""
    say(f"manage.py create_agent_key {prefix}00 --scope agent --scope orchestrate")
    out = manage(env, "create_agent_key", f"{prefix}00", "--scope", "agent", "--scope", "orchestrate")
    keys = [out.strip().splitlines()[-1].strip()]
    if count > 1:
        # The same command for the others, in one Django process (bench/make_keys.py): 0.7 s a start adds up.
        say(f"create_agent_key {prefix}01 .. {prefix}{count - 1:02d} (--scope agent) via bench/make_keys.py")
        done = subprocess.run(
            [sys.executable, str(BENCH_DIR / "make_keys.py"), prefix, "1", str(count - 1)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BenchError(f"bench/make_keys.py failed:\n{done.stderr[-2000:]}")
        keys += [line.split()[1] for line in done.stdout.splitlines() if line.strip()]
    if len(keys) != count or not all(k.startswith("sy_") for k in keys):
        raise BenchError("create_agent_key printed something other than a key on its last line")
    return keys


# --- setup calls to the API --------------------------------------------------------------------
def api(base_url: str, key: str, method: str, path: str, body=None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base_url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, raw.decode(errors="replace")[:500]


def api_ok(base_url: str, key: str, method: str, path: str, body=None) -> dict:
    status, payload = api(base_url, key, method, path, body)
    if status >= 300:
        raise BenchError(f"{method} {path} answered {status}: {payload}")
    return payload


# --- profiling the workers ---------------------------------------------------------------------
class Profiler:
    """py-spy record of each server worker over a window, as collapsed stacks."""

    def __init__(self, enabled: bool, prefix: Path):
        local = Path(sys.executable).parent / "py-spy"
        self.exe = str(local) if local.exists() else shutil.which("py-spy")
        self.enabled = enabled and self.exe is not None
        self.prefix = prefix
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        if enabled and not self.enabled:
            say("py-spy not found on PATH: --profile ignored (.venv/bin/pip install py-spy)")

    def start(self, pids: list[int], label: str, duration: float) -> None:
        if not self.enabled:
            return
        for pid in pids:
            out = Path(f"{self.prefix}-{label}-{pid}.txt")
            cmd = [self.exe, "record", "--pid", str(pid), "--duration", str(max(1, round(duration))), "--rate", "200"]
            cmd += ["--format", "raw", "--nonblocking", "--output", str(out)]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append((proc, out))

    def finish(self) -> list[str]:
        files = []
        for proc, out in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.terminate()
            if out.exists():
                files.append(str(out.relative_to(ROOT)))
        self.procs = []
        return files
