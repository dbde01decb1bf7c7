"""The one way to cause a side effect from a service: after the transaction commits.

A browser or a worker must never see a change that was rolled back, so Celery tasks and
channel-layer broadcasts are queued with ``transaction.on_commit``.
"""

from collections.abc import Callable

from django.db import transaction


def after_commit(func: Callable[[], object]) -> None:
    transaction.on_commit(func, robust=True)


def enqueue_task(task, *args, **kwargs) -> None:
    after_commit(lambda: task.delay(*args, **kwargs))


def broadcast(group: str, message: dict) -> None:
    def send() -> None:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(group, message)

    after_commit(send)
