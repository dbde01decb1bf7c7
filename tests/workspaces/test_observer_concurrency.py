"""Two observers at once, or one restarted, never duplicate a version (SPEC §7: work is idempotent).

Real threads on their own database connections: on SQLite the IMMEDIATE transactions queue
the writers, on PostgreSQL the artifact row lock does.
"""

import hashlib
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from ledger.models import Event
from tests.worker import wait_for
from workspaces.files.observer import FileObserver
from workspaces.files.reconcile import artifact_observe
from workspaces.files.services import workspace_create_for_session
from workspaces.models import Artifact, ArtifactVersion

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def session_ws(transactional_db):
    return workspace_create_for_session(folder_name="session_20260101_120000_abcd1234")


def idle(*observers: FileObserver) -> bool:
    return all(o.idle() for o in observers) and (time.sleep(0.3) or all(o.idle() for o in observers))


def assert_one_version_per_distinct_content() -> None:
    for artifact in Artifact.objects.all():
        numbers = list(artifact.versions.order_by("number").values_list("number", flat=True))
        assert numbers == list(range(1, len(numbers) + 1)), artifact.path
        digests = list(artifact.versions.order_by("number").values_list("sha256", flat=True))
        assert all(a != b for a, b in zip(digests, digests[1:], strict=False)), artifact.path
    assert Event.objects.filter(name="artifact.created").count() == ArtifactVersion.objects.count()
    assert Event.objects.filter(name="artifact.backed_up").count() == ArtifactVersion.objects.count()
    assert not ArtifactVersion.objects.filter(backup_location="").exists()


def test_two_observers_watching_the_same_files_record_each_version_once(session_ws):
    # given two observers on the same folders
    work = Path(session_ws.root_path) / "work_products"
    first = FileObserver(settle_ms=20, workers=3).start()
    second = FileObserver(settle_ms=20, workers=3).start()
    try:
        wait_for(lambda: idle(first, second), message="both idle")

        # when files are written, some of them twice with new bytes
        for n in range(150):
            (work / f"race-{n:03d}.md").write_bytes(f"first {n}".encode())
        for n in range(0, 150, 3):
            (work / f"race-{n:03d}.md").write_bytes(f"second {n}".encode())

        # then
        wait_for(
            lambda: (
                Artifact.objects.count() == 150
                and ArtifactVersion.objects.filter(sha256=sha(b"second 147")).exclude(backup_location="").exists()
            ),
            timeout=120,
        )
        wait_for(lambda: idle(first, second), timeout=60, message="both idle")
    finally:
        first.stop()
        second.stop()
    assert_one_version_per_distinct_content()
    for n in range(0, 150, 3):
        latest = ArtifactVersion.objects.filter(artifact__path=f"work_products/race-{n:03d}.md").first()
        assert latest.sha256 == sha(f"second {n}".encode())


@pytest.mark.parametrize("round_", range(3))
def test_sixteen_threads_observing_one_new_file_add_one_version(session_ws, round_):
    path = Path(session_ws.root_path) / "work_products" / "contested.md"
    path.write_bytes(f"contested {round_}".encode())
    time.sleep(0.03)
    barrier = threading.Barrier(16)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def observe():
        try:
            barrier.wait(timeout=30)
            outcomes.append(
                artifact_observe(workspace=session_ws, parts=("work_products", "contested.md"), settle_ns=0).outcome
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=observe) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert sorted(outcomes) == ["recorded"] + ["unchanged"] * 15
    assert ArtifactVersion.objects.count() == 1
    assert_one_version_per_distinct_content()


def test_a_restarted_observer_adds_nothing_for_files_it_already_recorded(session_ws):
    work = Path(session_ws.root_path) / "work_products"
    observer = FileObserver(settle_ms=20).start()
    try:
        for n in range(20):
            (work / f"kept-{n:02d}.md").write_bytes(f"kept {n}".encode())
        wait_for(lambda: ArtifactVersion.objects.exclude(backup_location="").count() == 20)
    finally:
        observer.stop()
    events = Event.objects.count()
    time.sleep(2.1)  # older than the reconcile's quiet time, so the start pass reads them all

    restarted = FileObserver(settle_ms=20).start()
    try:
        wait_for(lambda: restarted.counts["reconciles"] >= 1 and idle(restarted), message="the start reconcile")
    finally:
        restarted.stop()

    assert restarted.last_reconcile.files == 20
    assert restarted.last_reconcile.unchanged == 20
    assert ArtifactVersion.objects.count() == 20
    assert Event.objects.count() == events
