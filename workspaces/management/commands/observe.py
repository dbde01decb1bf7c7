import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from workspaces.files.ephemeral import SHUTDOWN_SIGNALS, workspace_shared_clear
from workspaces.files.observer import DEFAULT_QUEUE_LIMIT, FileObserver
from workspaces.files.reconcile import workspace_reconcile


class Command(BaseCommand):
    help = (
        "Watch WORKSPACE_ROOT and STATE_DIR (inotify). A file closed or moved into a session's "
        "work_products/ becomes an artifact version with a verified backup in SAVED_REPORTS_ROOT; "
        "search_results/, media/ and workbench_activity/ become artifacts of their kind; every file "
        "of the flat shared workspace is a backed-up work product; a changed snapshot in "
        "STATE_DIR/session-*/ queues sync-to-db. Reconciles the folders against the database on "
        "start, every OBSERVER_RECONCILE_SECONDS and after lost events. On SIGTERM, SIGINT or "
        "SIGHUP it stops, then backs up and empties the shared workspace if it is marked ephemeral."
    )

    def add_arguments(self, parser):
        parser.add_argument("--workers", type=int, help="Worker threads (default 4 on PostgreSQL, 2 on SQLite).")
        parser.add_argument(
            "--queue-limit",
            type=int,
            default=DEFAULT_QUEUE_LIMIT,
            help="Paths that may wait at once; beyond it the observer falls back to a full reconcile.",
        )
        parser.add_argument("--once", action="store_true", help="Run one reconcile pass and exit.")
        parser.add_argument(
            "--no-reconcile-on-start", action="store_true", help="Skip the reconcile pass when starting."
        )

    def handle(self, *args, workers, queue_limit, once, no_reconcile_on_start, **options):
        if workers is not None and workers < 1:
            raise CommandError("--workers must be at least 1.")
        if once:
            report = workspace_reconcile()
            self.stdout.write(f"Reconciled: {report.summary()}")
            return
        stop = threading.Event()
        received: list[int] = []

        def on_signal(signum, frame):
            # Only a flag: the main thread may be anywhere, so the work happens below.
            received.append(signum)
            stop.set()

        previous = {signum: signal.signal(signum, on_signal) for signum in SHUTDOWN_SIGNALS}
        observer = FileObserver(
            workers=workers, queue_limit=queue_limit, reconcile_on_start=not no_reconcile_on_start
        ).start()
        if options["verbosity"] >= 1:
            self.stdout.write(f"Observing {observer.workspace_root} and {observer.state_dir}.")
        self.stdout.flush()
        failed = False
        try:
            while not stop.wait(1.0):
                if not observer.alive():
                    failed = True
                    break
        finally:
            observer.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if failed:
            raise CommandError("The watcher stopped (was a watched folder removed?); restart the observer.")
        cleared = workspace_shared_clear()
        if cleared is not None:
            self.stdout.write(
                f"Cleared the ephemeral shared workspace: {len(cleared.removed)} removed, "
                f"{len(cleared.kept)} kept" + "".join(f"\n  kept {line}" for line in cleared.kept)
            )
        name = signal.Signals(received[0]).name if received else "stop"
        self.stdout.write(f"Stopped ({name}); counts: {dict(observer.counts)}")
