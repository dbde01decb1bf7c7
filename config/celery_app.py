"""The Celery app. Its settings are the CELERY_* block of config/settings/base.py:

JSON only (a pickled message is refused, never unpickled), hard and soft time limits,
acks_late with reject_on_worker_lost (a task whose worker dies is delivered again, so every
task is idempotent), prefetch 1, and on Redis a visibility timeout longer than the hard time
limit. Tasks are thin ``*_task`` adapters over services, queued only after commit through
config.side_effects.enqueue_task; periodic ones are listed in config/schedules.py.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("switchyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _ensure_embedded_broker_folders() -> None:
    # kombu's filesystem transport expects its folders to exist; the embedded default
    # keeps them under var/, which a fresh checkout does not have yet.
    from pathlib import Path

    options = app.conf.broker_transport_options or {}
    folders = [
        options[key]
        for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
        if options.get(key)
    ]
    backend = app.conf.result_backend or ""
    if backend.startswith("file://"):
        folders.append(backend[len("file://") :])
    for folder in folders:
        Path(folder).mkdir(parents=True, exist_ok=True)


@app.on_after_configure.connect
def _on_configure(sender, **kwargs):
    _ensure_embedded_broker_folders()


@app.task(name="switchyard.ping")
def ping_task(token: str = "") -> str:
    """Answers at once; tests and operators use it to see a worker is consuming."""
    return f"pong {token}".strip()
