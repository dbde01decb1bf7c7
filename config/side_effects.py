"""The one way to cause a side effect from a service: after the transaction commits.

A browser or a worker must never see a change that was rolled back, so Celery tasks and
channel-layer broadcasts are queued with ``transaction.on_commit``.

A broadcast to a group nobody has joined is skipped. With channels_redis the members of a group
are a sorted set in Redis; one ZCARD on it (config/speed/group_members.py) is cheaper than
``group_send``, and on the API's hot paths there usually is no page open. A page that has joined
is counted, so it gets every message sent after it joined; one that joins later misses the
message either way (``group_send`` reads the members at the moment it runs too).
"""

from collections.abc import Callable
from importlib import import_module

from django.db import transaction

from config.celery_app import app as celery_app
from config.speed.group_members import group_joined


def after_commit(func: Callable[[], object]) -> None:
    transaction.on_commit(func, robust=True)


def enqueue_task(task, *args, **kwargs) -> None:
    """Queue ``task`` (a Celery task, or the name it is registered under) after commit."""
    after_commit(lambda: registered_task(task).delay(*args, **kwargs))


def registered_task(task):
    """The task registered under ``task``'s name (a task passes through as it is).

    A service names the tasks of its own app instead of importing them: the app's ``tasks``
    module imports the service, so an import back would close a circle. A process that has not
    imported the task's module yet (a web process: autodiscovery runs in workers) imports it
    here, by the module part of the name.
    """
    if not isinstance(task, str):
        return task
    if task not in celery_app.tasks:
        import_module(task.rpartition(".")[0])
    return celery_app.tasks[task]


def broadcast(group: str, message: dict) -> None:
    def send() -> None:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None and group_joined(layer, group):
            async_to_sync(layer.group_send)(group, message)

    after_commit(send)
