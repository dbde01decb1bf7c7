#!/usr/bin/env python
"""Board benchmark: (a) server-side render time of the board page, (b) live push latency.

(a) render  the board page through Django's test client on a real database with 200, 2,000 and
            10,000 tasks (agents, campaigns, labels, sessions on half of them); p50 / p95 of 20
            renders each, after two warm-ups.
(b) push    uvicorn serving config.asgi; 100 websocket clients on /ws/board/; 150 warm-up moves,
            then 1,000 card moves at 50/s through POST /tasks/<id>/move/ (one transaction and one
            push each) from 3 movers; latency from the server's after-commit send (the frame's
            "at") to each client receiving it, p50 / p99, beside the same from sending the move;
            gaps in the sequence numbers seen by any client (must be 0) and changes never received.

Run:  .venv/bin/python bench/board_bench.py                      # embedded: SQLite, in-memory layer
      DATABASE_URL=postgres://postgres@127.0.0.1:5432/switchyard_board_bench \\
      REDIS_URL=redis://127.0.0.1:6379/12 .venv/bin/python bench/board_bench.py
      options: --parts render,push  --sizes 200,2000,10000  --clients 100 --changes 1000 --rate 50
               --lanes 3 --warmup 150
The database named by DATABASE_URL (or var/board_bench.sqlite3) is dropped and recreated.
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness import db, percentile  # noqa: E402 - bench/harness, beside this script
from harness.catalogue import CATALOGUE  # noqa: E402
from harness.figures import Recorder, add_option  # noqa: E402
from harness.server import free_port, wait_for_healthz  # noqa: E402

CARD_ID = re.compile(r'id=\\"task-(\d+)\\"')  # inside the JSON string: quotes escaped
FRAME_HEAD = re.compile(r'\{"type": "tasks", "seq": (?P<seq>\d+), "at": (?P<at>[\d.e+-]+)')
SQLITE_PATH = ROOT / "var" / "board_bench.sqlite3"
os.environ.setdefault("DATABASE_URL", f"sqlite:///{SQLITE_PATH}")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
os.environ["DEBUG"] = "false"


def say(text: str) -> None:
    print(text, flush=True)


def recreate_database() -> None:
    url = os.environ["DATABASE_URL"]
    if url.startswith("sqlite"):
        for suffix in ("", "-wal", "-shm"):
            Path(str(SQLITE_PATH) + suffix).unlink(missing_ok=True)
        return
    db.recreate_database_url(url)


def fill(total: int) -> None:
    """Bring the board to ``total`` tasks (bulk inserts; ranks spaced as the services space them)."""
    from board.models import Campaign, Task
    from board.services import RANK_STEP
    from sessions_app.models import Agent, AgentSession

    agents = [Agent.objects.get_or_create(slug=f"agent-{i}", defaults={"emoji": "🤖"})[0] for i in range(8)]
    campaigns = [Campaign.objects.get_or_create(name=f"Campaign {i}", type="bench")[0] for i in range(5)]
    sessions = [
        AgentSession.objects.get_or_create(
            id=f"bench-session-{i}", defaults={"agent": agents[i % 8], "status": "waiting_for_input"}
        )[0]
        for i in range(20)
    ]
    have = Task.objects.count()
    statuses = Task.Status.values
    Task.objects.bulk_create(
        [
            Task(
                title=f"Benchmark task {i}: a title of a usual length for a card",
                status=statuses[i % len(statuses)],
                priority=f"P{i % 4}",
                rank=(i + 1) * RANK_STEP,
                labels=["bench", f"area-{i % 12}"],
                assignee=agents[i % 8] if i % 2 else None,
                campaign=campaigns[i % 5] if i % 3 == 0 else None,
                session=sessions[i % 20] if i % 2 else None,
            )
            for i in range(have, total)
        ],
        batch_size=1000,
    )


def board_user():
    from django.contrib.auth.models import Group, User

    from config.pages import PRODUCT_OWNERS

    user, _ = User.objects.get_or_create(username="bench-po")
    user.groups.add(Group.objects.get_or_create(name=PRODUCT_OWNERS)[0])
    return user


def part_render(sizes: list[int], runs: int = 20) -> list[dict]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="localhost")
    client.force_login(board_user())
    rows = []
    for size in sizes:
        fill(size)
        from board import cards

        cards._cards.clear()  # the first render after a restart: every card rendered by the template
        start = time.perf_counter()
        assert client.get("/").status_code == 200
        cold = (time.perf_counter() - start) * 1000
        assert client.get("/").status_code == 200
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            response = client.get("/")
            times.append((time.perf_counter() - start) * 1000)
        with CaptureQueriesContext(connection) as queries:
            client.get("/")
        row = {
            "tasks": size,
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(percentile(times, 95), 1),
            "cold_ms": round(cold, 1),
            "queries": len(queries),
            "kb": round(len(response.content) / 1024),
        }
        rows.append(row)
        say(
            f"render  {size:>6} tasks: p50 {row['p50_ms']} ms  p95 {row['p95_ms']} ms  (cold {row['cold_ms']} ms)  {row['queries']} queries, {row['kb']} KiB"
        )
    return rows


def part_push(clients: int, changes: int, rate: float, lanes: int, warmup: int) -> dict:
    import httpx
    import websockets
    from django.contrib.sessions.backends.db import SessionStore  # noqa: F401 - the default engine
    from django.test import Client

    from board.models import Task

    fill(200)
    browser = Client()
    browser.force_login(board_user())
    session_id = browser.cookies["sessionid"].value
    port = free_port()
    log_path = ROOT / "var" / "board_bench_server.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={**os.environ},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_healthz(base, server, log_path, timeout=30)
        movers = list(Task.objects.filter(status__in=["backlog", "ready"]).values_list("pk", flat=True)[:20])
        return asyncio.run(
            _push_run(base, port, session_id, clients, changes, rate, lanes, warmup, movers, websockets, httpx)
        )
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


async def _push_run(base, port, session_id, clients, changes, rate, lanes, warmup, movers, websockets, httpx) -> dict:
    cookie = f"sessionid={session_id}"
    received: list[dict[int, tuple[float, int]]] = [{} for _ in range(clients)]
    gaps = [0] * clients
    committed_ms: list[tuple[float, float]] = []  # (the server's after-commit send "at", ms to receipt)
    hello: list[int] = [0] * clients
    ready = asyncio.Event()
    connected = 0

    async def listen(index: int) -> None:
        nonlocal connected
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/ws/board/",
            additional_headers={"Cookie": cookie, "Origin": base},
            max_size=None,
        ) as socket_:
            first = json.loads(await socket_.recv())
            hello[index] = last = first["seq"]
            connected += 1
            if connected == clients:
                ready.set()
            async for frame in socket_:
                now = time.perf_counter()
                # Only the head of the frame: the loader shares the 2 cores with the server, and a
                # hundred clients decoding whole frames would measure the loader, not the pushes.
                head = FRAME_HEAD.match(frame)
                seq, at = int(head["seq"]), float(head["at"])
                committed_ms.append((at, (time.time() - at) * 1000))
                if seq != last + 1:
                    gaps[index] += 1
                last = seq
                first_card = CARD_ID.search(frame, head.end(), head.end() + 200)
                received[index][seq] = (now, int(first_card.group(1)) if first_card else 0)

    listeners = [asyncio.create_task(listen(i)) for i in range(clients)]
    await asyncio.wait_for(ready.wait(), 60)
    # ``lanes`` movers on disjoint cards, each waiting for its answer: more lanes keep the rate
    # when one move takes longer than 1/rate. A message is matched to its move by the card it
    # carries: the k-th message with card X is the k-th move of X.
    # The first ``warmup`` moves (caches, connections, the JIT-less first renders) are not measured.
    sent: dict[tuple[int, int], tuple[float, bool]] = {}
    request_ms: list[float] = []
    async with httpx.AsyncClient(base_url=base, cookies={"sessionid": session_id}, timeout=30) as http:
        page = await http.get("/")
        token = page.text.split('"X-CSRFToken": "', 1)[1].split('"', 1)[0]
        start = time.perf_counter()
        measured_from = time.time() + warmup / rate

        async def mover(lane: int, lanes: int) -> None:
            mine = movers[lane::lanes]
            moves_of: dict[int, int] = {}
            for k in range(lane, warmup + changes, lanes):
                due = start + k / rate
                await asyncio.sleep(max(0, due - time.perf_counter()))
                task_id = mine[(k // lanes) % len(mine)]
                status = "ready" if moves_of.get(task_id, 0) % 2 == 0 else "backlog"
                t0 = time.perf_counter()
                sent[(task_id, moves_of.get(task_id, 0))] = (t0, k >= warmup)
                moves_of[task_id] = moves_of.get(task_id, 0) + 1
                response = await http.post(
                    f"/tasks/{task_id}/move/", data={"status": status}, headers={"X-CSRFToken": token, "Origin": base}
                )
                request_ms.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.text[:300]

        await asyncio.gather(*(mover(lane, lanes) for lane in range(lanes)))
        elapsed = time.perf_counter() - start - warmup / rate
        await asyncio.sleep(2)
    for task in listeners:
        task.cancel()
    latencies = []
    missing = 0
    for index in range(clients):
        seen: dict[int, int] = {}
        matched = 0
        for seq in sorted(received[index]):
            at, task_id = received[index][seq]
            k = seen.get(task_id, 0)
            seen[task_id] = k + 1
            t0, measured = sent.get((task_id, k), (None, False))
            if t0 is not None and measured:
                latencies.append((at - t0) * 1000)
                matched += 1
        missing += sum(measured for _, measured in sent.values()) - matched
    committed = [ms for at, ms in committed_ms if at >= measured_from]
    result = {
        "clients": clients,
        "changes": changes,
        "rate_per_s": rate,
        "achieved_per_s": round(changes / elapsed, 1),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "warmup_moves": warmup,
        "commit_to_received_p50_ms": round(statistics.median(committed), 1),
        "commit_to_received_p99_ms": round(percentile(committed, 99), 1),
        "move_request_p50_ms": round(statistics.median(request_ms), 1),
        "gaps": sum(gaps),
        "missing": missing,
    }
    say(
        f"push    {clients} clients, {changes} moves at {result['achieved_per_s']}/s: committed -> received"
        f" p50 {result['commit_to_received_p50_ms']} ms  p99 {result['commit_to_received_p99_ms']} ms;"
        f" move sent -> received p50 {result['p50_ms']} ms  p99 {result['p99_ms']} ms"
        f"  (move request p50 {result['move_request_p50_ms']} ms)"
        f"  gaps {result['gaps']}  missing {missing}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="render,push")
    parser.add_argument("--sizes", default="200,2000,10000")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--lanes", type=int, default=3, help="concurrent movers (each waits for its answer)")
    parser.add_argument("--warmup", type=int, default=150, help="moves made first and not measured")
    add_option(parser)  # --no-record
    args = parser.parse_args()
    recorder = Recorder("board_bench.py", enabled=not args.no_record)
    (ROOT / "var").mkdir(exist_ok=True)
    say(
        f"database {os.environ['DATABASE_URL']}  channel layer {'redis' if os.environ.get('REDIS_URL') else 'in-memory'}"
    )
    recreate_database()
    db.django_setup()
    parts = args.parts.split(",")
    if "push" in parts:
        recorder.start()
        push = part_push(args.clients, args.changes, args.rate, args.lanes, args.warmup)
        # figures.json keeps the embedded default's push and the Redis layer's apart.
        layer = "push_redis" if os.environ.get("REDIS_URL") else "push"
        complete = {"no gap": push["gaps"] == 0, "no change missing": push["missing"] == 0}
        recorder.record(f"board.{layer}.p50", push["commit_to_received_p50_ms"], conditions=complete)
        recorder.record(f"board.{layer}.p99", push["commit_to_received_p99_ms"], conditions=complete)
    if "render" in parts:
        recorder.start()
        rows = part_render([int(size) for size in args.sizes.split(",")])
        if os.environ["DATABASE_URL"].startswith("sqlite"):  # the render figures are SQLite's
            for row in rows:
                if f"board.render.{row['tasks']}" in CATALOGUE:
                    recorder.record(f"board.render.{row['tasks']}", row["p95_ms"])
    say(recorder.note())


if __name__ == "__main__":
    main()
