"""Load on the server and where the machine's CPU went: the closed-loop load generator (wrk with a
generated Lua script, or bench/pyload.py), the paced one (bench/paced.py), CPU accounting over a
window, and waiting for other people's jobs to finish before a figure."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from harness import BENCH_DIR, BenchError, say


# --- machine measurements -------------------------------------------------------------------------
def _all_processes_cpu() -> dict[int, tuple[str, float, float]]:
    """{pid: (command name, CPU seconds, start time in seconds since boot)} for every process alive now."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                raw = fh.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        found[int(entry.name)] = (comm, (int(fields[11]) + int(fields[12])) / tick, int(fields[19]) / tick)
    return found


def _machine_cpu() -> tuple[float, float]:
    """(total, busy) CPU seconds since boot, summed over cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])
    idle = values[3] + values[4]
    tick = os.sysconf("SC_CLK_TCK")
    return total / tick, (total - idle) / tick


def machine_busy_pct(seconds: float = 1.0) -> float:
    before = _machine_cpu()
    time.sleep(seconds)
    after = _machine_cpu()
    return 100 * (after[1] - before[1]) / max(1e-9, after[0] - before[0])


def wait_for_quiet(label: str, *, wait: float, busy_pct: float, poll: float = 4.0) -> float:
    """Other jobs on this machine (test suites) skew every figure: wait up to ``wait`` seconds for the
    machine to be less than ``busy_pct`` % busy. Returns how busy it was when we went on."""
    deadline = time.monotonic() + wait
    busy = machine_busy_pct()
    while busy > busy_pct and time.monotonic() < deadline:
        say(f"  {label}: machine {busy:.0f}% busy before we start; waiting for it to calm down")
        time.sleep(poll)
        busy = machine_busy_pct()
    if busy > busy_pct:
        say(f"  {label}: WARNING machine still {busy:.0f}% busy without our load; figures will be low")
    return round(busy, 1)


class CpuMeter:
    """Where the machine's CPU went during a window: server workers, the load generator (our waited
    children), PostgreSQL, Redis, this script, other processes (other people's jobs), and what can't be
    attributed (processes that ended inside the window, such as per-request PostgreSQL backends)."""

    def __init__(self, worker_pids: list[int]):
        self.worker_pids = set(worker_pids)

    def __enter__(self):
        self.wall = time.monotonic()
        self.machine = _machine_cpu()
        self.procs = _all_processes_cpu()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.children = usage.ru_utime + usage.ru_stime
        return self

    def _group(self, pid: int, comm: str) -> str:
        if pid in self.worker_pids:
            return "server"
        if pid == os.getpid():
            return "bench_script"
        if comm == "postgres":
            return "postgres"
        if comm.startswith("redis"):
            return "redis"
        return "other_processes"

    def __exit__(self, *exc):
        wall = time.monotonic() - self.wall
        busy = _machine_cpu()[1] - self.machine[1]
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        groups = Counter({"loader": usage.ru_utime + usage.ru_stime - self.children})
        others = Counter()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        for pid, (comm, cpu, started) in _all_processes_cpu().items():
            before = self.procs.get(pid)
            if before and before[0] == comm:
                delta = cpu - before[1]
            else:
                # Not seen at the start: count the share of its life that fell inside the window.
                lifetime = max(uptime - started, 1e-3)
                delta = cpu * min(1.0, wall / lifetime)
            group = self._group(pid, comm)
            groups[group] += delta
            if group == "other_processes" and delta > 0.05 * wall:
                others[comm] += delta
        capacity = wall * (os.cpu_count() or 1)
        per_worker = {
            str(pid): round(100 * (cpu - self.procs.get(pid, ("", 0.0, 0.0))[1]) / wall, 1)
            for pid, (comm, cpu, _) in _all_processes_cpu().items()
            if pid in self.worker_pids
        }
        self.result = {
            "wall_s": round(wall, 2),
            "machine_busy_pct": round(100 * busy / capacity, 1),
            **{f"{k}_pct": round(100 * v / capacity, 1) for k, v in sorted(groups.items())},
            "unattributed_pct": round(100 * max(0.0, busy - sum(groups.values())) / capacity, 1),
            "busy_other_processes": {k: round(100 * v / capacity, 1) for k, v in others.most_common(5)},
            "per_worker_pct_of_one_core": per_worker,
            "note": "percent of all cores; unattributed = processes that ended inside the window "
            "(per-request PostgreSQL backends, short-lived jobs) and the kernel",
        }
        return False


def cpu_summary(cpu: dict) -> str:
    """One line of a CpuMeter result: the machine's share and who took it."""
    return (
        f"CPU of {os.cpu_count()} cores: {cpu['machine_busy_pct']}% busy = server {cpu.get('server_pct', 0)}% "
        f"+ postgres {cpu.get('postgres_pct', 0)}% + loader {cpu.get('loader_pct', 0)}% "
        f"+ others {cpu.get('other_processes_pct', 0)}%"
    )


# --- load generators ----------------------------------------------------------------------------
LUA_TEMPLATE = r"""
-- Generated by bench/harness/load.py. One connection per thread; thread i sends targets[i].
local targets = {
__TARGETS__
}
local counter = 0
local threads = {}

function setup(thread)
  counter = counter + 1
  thread:set("idx", counter)
  table.insert(threads, thread)
end

function init(args)
  local t = targets[((idx - 1) % #targets) + 1]
  local headers = {}
  headers["Authorization"] = t.auth
  if t.body ~= "" then
    headers["Content-Type"] = "application/json"
    req = wrk.format("POST", t.path, headers, t.body)
  else
    headers["Content-Length"] = "0"
    req = wrk.format("POST", t.path, headers, nil)
  end
  statuses = {}
end

function request()
  return req
end

function response(status, headers, body)
  local k = tostring(status)
  statuses[k] = (statuses[k] or 0) + 1
end

function done(summary, latency, requests)
  local agg = {}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    if s then
      for k, v in pairs(s) do agg[k] = (agg[k] or 0) + v end
    end
  end
  local parts = {}
  for k, v in pairs(agg) do parts[#parts + 1] = string.format('"%s":%d', k, v) end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
    .. '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"statuses":{%s}}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    table.concat(parts, ",")))
end
"""


def _lua_string(value: str) -> str:
    level = "=" * 4
    if f"]{level}]" in value:
        raise BenchError("body contains the Lua long-string terminator")
    return f"[{level}[{value}]{level}]"


def benchjson(done: subprocess.CompletedProcess, label: str) -> dict:
    """The ``BENCHJSON {...}`` line a load generator child printed, with its statuses as ints."""
    for line in done.stdout.splitlines():
        if line.startswith("BENCHJSON "):
            result = json.loads(line[len("BENCHJSON ") :])
            if "statuses" in result:
                result["statuses"] = {k: int(v) for k, v in result["statuses"].items()}
            return result
    raise BenchError(f"load generator gave no result for {label} (exit {done.returncode}):\n{done.stderr[-2000:]}")


class Loader:
    """Runs closed-loop load: one connection per target, each sending its own request again and again.
    A target is {"path", "key", "body"} (a POST; an empty body sends none)."""

    def __init__(self, choice: str, base_url: str, workdir: Path):
        self.base_url = base_url
        self.workdir = workdir
        if choice == "auto":
            choice = "wrk" if shutil.which("wrk") else "python"
        if choice == "wrk" and not shutil.which("wrk"):
            raise BenchError("wrk is not installed (apt-get install -y wrk), or use --loader python")
        self.kind = choice
        self.description = (
            "wrk (C, epoll) with a generated Lua script, one thread and connection per client"
            if choice == "wrk"
            else "asyncio + httpx in a separate process, one connection per client"
        )

    def run(self, targets: list[dict], duration: float, label: str) -> dict:
        if self.kind == "wrk":
            return self._run_wrk(targets, duration, label)
        return self._run_python(targets, duration, label)

    def _run_wrk(self, targets: list[dict], duration: float, label: str) -> dict:
        rows = [
            f"  {{path={_lua_string(t['path'])}, auth={_lua_string('Bearer ' + t['key'])}, body={_lua_string(t['body'])}}},"
            for t in targets
        ]
        script = self.workdir / f"{label}.lua"
        script.write_text(LUA_TEMPLATE.replace("__TARGETS__", "\n".join(rows)))
        n = str(len(targets))
        seconds = max(1, round(duration))
        cmd = ["wrk", "-t", n, "-c", n, "-d", f"{seconds}s", "--timeout", "10s", "-s", str(script), self.base_url]
        return benchjson(subprocess.run(cmd, capture_output=True, text=True, check=False), label)

    def _run_python(self, targets: list[dict], duration: float, label: str) -> dict:
        config = {
            "url": self.base_url,
            "duration": duration,
            "timeout": 10,
            "targets": [
                {
                    "method": "POST",
                    "path": t["path"],
                    "headers": {"Authorization": f"Bearer {t['key']}"}
                    | ({"Content-Type": "application/json"} if t["body"] else {}),
                    "body": t["body"],
                }
                for t in targets
            ],
        }
        path = self.workdir / f"{label}.json"
        path.write_text(json.dumps(config))
        cmd = [sys.executable, str(BENCH_DIR / "pyload.py"), str(path)]
        return benchjson(subprocess.run(cmd, capture_output=True, text=True, check=False), label)

    def run_paced(self, targets: list[dict], rate: float, duration: float, warmup: float, label: str) -> dict:
        """The same connections sending at ``rate`` requests/s in all, on a fixed schedule (bench/paced.py)."""
        from paced import post_request

        host, port = self.base_url.removeprefix("http://").split(":")
        requests = [
            post_request(host, int(port), t["path"], t["key"], t["body"].encode()).decode("latin-1") for t in targets
        ]
        config = {"host": host, "port": int(port), "rate": rate, "duration": duration, "warmup": warmup}
        path = self.workdir / f"{label}.json"
        path.write_text(json.dumps(config | {"timeout": 10, "requests": requests}))
        cmd = [sys.executable, str(BENCH_DIR / "paced.py"), str(path)]
        return benchjson(subprocess.run(cmd, capture_output=True, text=True, check=False), label)
