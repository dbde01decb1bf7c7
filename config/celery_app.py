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
    for key in ("data_folder_in", "data_folder_out", "processed_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


@app.on_after_configure.connect
def _on_configure(sender, **kwargs):
    _ensure_embedded_broker_folders()
