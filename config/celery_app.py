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
    folders = [options[key] for key in ("data_folder_in", "data_folder_out", "processed_folder") if options.get(key)]
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
