"""ServerBench: the set-up the API benchmarks share, around the measurements each adds as parts.

A fresh database (dropped at the end unless --keep-db), Redis flushed, migrations, agent keys,
the production-style server, and a scratch folder for everything the app writes; figures and
details collected for the table and the JSON result file. ``args`` carries bench/run.py's
set-up options (--db, --pg-*, --redis-url, --settings, --server, --workers, --port,
--no-reuse-port, --quiet-wait, --quiet-pct, --keep-db, --no-record).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from harness import RESULTS_DIR, db, figures, load, report, server, stamp


class ServerBench:
    key_prefix = "bench-agent-"  # agents <prefix>00 (agent + orchestrate scopes), <prefix>01, ...
    quiet_poll = 4.0  # seconds between looks at the machine while waiting for quiet

    def __init__(self, args, *, workdir_prefix: str = "switchyard-bench-", workdir_parent: str | None = None):
        self.args = args
        self.stamp = stamp()
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix=workdir_prefix, dir=workdir_parent))
        self.pg = db.Pg.from_args(args)
        self.env = self.server_env()
        self.server: server.Server | None = None
        self.keys: list[str] = []
        self.figures: list[dict] = []
        self.details: dict = {}
        # bench/figures.json, for the script run (sys.argv[0]): only its own figures, unless --no-record.
        self.recorder = figures.Recorder(enabled=not getattr(args, "no_record", False))

    def server_env(self) -> dict:
        return server.server_env(
            settings=self.args.settings,
            database_url=self.pg.url(),
            redis_url=self.args.redis_url,
            var_dir=self.workdir / "var",
        )

    # set-up ----------------------------------------------------------------------------------------
    def check_services(self) -> None:
        self.details["postgres_version"] = self.pg.version()
        db.redis_flush(self.args.redis_url)

    def manage(self, *argv: str) -> str:
        return server.manage(self.env, *argv)

    def setup_database(self, agents: int) -> None:
        """A fresh database, migrated, with ``agents`` agent keys in self.keys."""
        server.say(f"recreating database {self.pg.db!r} on {self.pg.host}:{self.pg.port}")
        self.pg.recreate_database()
        server.say("manage.py migrate")
        self.manage("migrate", "--noinput")
        self.keys = server.create_agent_keys(self.env, self.key_prefix, agents)

    def start_server(self, log_path: Path | None = None) -> None:
        self.server = server.Server(self.args, self.env, log_path or RESULTS_DIR / f"{self.stamp}-server.log")
        self.server.start()

    # measuring -------------------------------------------------------------------------------------
    def wait_for_quiet(self, label: str) -> float:
        return load.wait_for_quiet(label, wait=self.args.quiet_wait, busy_pct=self.args.quiet_pct, poll=self.quiet_poll)

    def add_figure(self, **figure) -> None:
        self.figures.append(figure)

    # output ------------------------------------------------------------------------------------------
    def table(self) -> str:
        return report.figure_table(self.figures)

    def cleanup(self) -> None:
        if self.server:
            self.server.stop()
        self.pg.close_control()
        if not self.args.keep_db:
            try:
                self.pg.drop_database()
            except Exception as exc:  # the run's own outcome matters more than a failed drop
                server.say(f"could not drop database {self.pg.db!r}: {exc}")
        shutil.rmtree(self.workdir, ignore_errors=True)
