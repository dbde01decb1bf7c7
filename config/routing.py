"""Websocket routes. The board and session consumers join here (issue 5)."""

from django.urls import re_path

from board.consumers import BoardConsumer
from composition.consumers import SessionConsumer

websocket_urlpatterns: list = [
    re_path(r"^ws/board/$", BoardConsumer.as_asgi()),
    re_path(r"^ws/sessions/(?P<session_id>[A-Za-z0-9][A-Za-z0-9._:-]{0,127})/$", SessionConsumer.as_asgi()),
]
