"""The app's own cost per request, without a server: Django's test client in one thread.

Complements bench/run.py. The same requests (single event, batches of 100 and 1,000, claim-next)
go straight into Django, one at a time, over one persistent database connection; the script
prints wall and CPU milliseconds per request and the SQL queries each one makes. Whatever
bench/run.py measures above these figures is the server's share (ASGI, threads, connections).

    .venv/bin/python bench/inprocess.py [--settings config.settings.production] [--profile part]

It drops and recreates the database switchyard_bench_inproc (PostgreSQL on 127.0.0.1:5432, user
postgres) and uses Redis db 14, like bench/run.py. --profile prints a pyinstrument profile of one
part (event, batch100, batch1000 or claim) if pyinstrument is installed.
"""

import argparse
import os
import sys
import time

from harness.db import django_setup, drop_database_url, recreate_database_url
from harness.server import manage

DB = "switchyard_bench_inproc"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="config.settings.production")
    parser.add_argument("--profile", choices=["event", "batch100", "batch1000", "claim", "wt_refused", "wt_pair"])
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    args = parser.parse_args()

    env = {
        "DJANGO_SETTINGS_MODULE": args.settings,
        "SECRET_KEY": "bench-inprocess-" + "x" * 50,
        "DATABASE_URL": f"{args.pg}/{DB}",
        "REDIS_URL": args.redis_url,
        "ALLOWED_HOSTS": "testserver",
        "SECURE_SSL_REDIRECT": "0",
    }
    recreate_database_url(env["DATABASE_URL"])
    manage({**os.environ, **env}, "migrate", "-v0")
    django_setup(env, migrate=False)  # migrated above, in a process of its own
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from sessions_app.keys import agent_get_or_create, api_key_create

    key = api_key_create(agent=agent_get_or_create(slug="inprocess"), scopes=["agent", "orchestrate"]).key
    client = Client(headers={"Authorization": f"Bearer {key}"})
    session = client.post("/api/v1/sessions/", {"intent": "in-process bench"}, content_type="application/json")
    session_id = session.json()["id"]
    task = client.post("/api/v1/tasks/", {"title": "bench task 0"}, content_type="application/json").json()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'board_task' "
            "AND table_schema = current_schema() AND column_name <> 'id' ORDER BY ordinal_position"
        )
        names = [row[0] for row in cursor.fetchall()]
        select = ", ".join({"rank": "1024 * (g + 1)", "title": "'bench task ' || g"}.get(c, f't."{c}"') for c in names)
        cursor.execute(
            f"INSERT INTO board_task ({', '.join(names)}) SELECT {select} FROM board_task t, "
            "generate_series(1, 5000) g WHERE t.id = %s",
            [task["id"]],
        )
        cursor.execute("ANALYZE board_task")

    # Worktree claims (issue 3): rows only, the claim path runs no git. "other" holds worktree 1, so
    # our claim on it is the refusal that most claims under contention get; worktree 2 is claimed
    # and released in turn.
    from workspaces.models import Repository, Worktree

    other = Client(headers={"Authorization": "Bearer " + api_key_create(agent=agent_get_or_create(slug="other")).key})
    repository = Repository.objects.create(name="bench", path="/nonexistent/bench")
    held, free = (
        Worktree.objects.create(
            repository=repository, type="feat", name=f"w{i}", branch=f"feat-w{i}", real_path=f"/nonexistent/w{i}"
        )
        for i in (1, 2)
    )
    other.post(f"/api/v1/worktrees/{held.pk}/claim/", {}, content_type="application/json")

    def wt_pair():
        """A grant and the release after it: the two writes of a claim that wins."""
        claimed = client.post(f"/api/v1/worktrees/{free.pk}/claim/", {}, content_type="application/json")
        released = client.post(f"/api/v1/worktrees/{free.pk}/release/", {}, content_type="application/json")
        return released if claimed.status_code == 200 else claimed

    event = {"type": "log", "payload": {"line": "client 0: compiling module 42 of 97, 3 warnings so far"}}
    url = f"/api/v1/sessions/{session_id}/events/"
    parts = {
        "event": (300, lambda: client.post(url, event, content_type="application/json"), 201),
        "batch100": (30, lambda: client.post(url, [event] * 100, content_type="application/json"), 201),
        "batch1000": (5, lambda: client.post(url, [event] * 1000, content_type="application/json"), 201),
        "claim": (300, lambda: client.post("/api/v1/tasks/claim-next/", "", content_type="application/json"), 200),
        "wt_refused": (
            300,
            lambda: client.post(f"/api/v1/worktrees/{held.pk}/claim/", {}, content_type="application/json"),
            409,
        ),
        "wt_pair": (300, wt_pair, 200),  # two requests per call
    }
    print(f"settings {args.settings}; one thread, Django test client, persistent connection")
    for name, (count, call, expected) in parts.items():
        connection.queries_log.clear()  # request_started empties it; the context must start from 0 too
        with CaptureQueriesContext(connection) as queries:
            response = call()
        query_count = len(queries.captured_queries)  # read now: later requests empty the log
        if response.status_code != expected:
            sys.exit(f"{name}: answered {response.status_code}: {response.content[:300]!r}")
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            call()
        wall, cpu = (time.perf_counter() - wall) / count, (time.process_time() - cpu) / count
        print(f"{name:10s} {1000 * wall:8.2f} ms wall {1000 * cpu:8.2f} ms CPU per request; {query_count} queries")
    if args.profile:
        from pyinstrument import Profiler

        count, call, _ = parts[args.profile]
        profiler = Profiler(interval=0.0005)
        profiler.start()
        for _ in range(count):
            call()
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, time="percent_of_total"))
    connection.close()
    drop_database_url(env["DATABASE_URL"])


if __name__ == "__main__":
    main()
