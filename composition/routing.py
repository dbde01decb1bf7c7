"""Websocket routes: the board's and the session pages' consumers (issue 5). The websocket
counterpart of config/urls.py, named by ``settings.WEBSOCKET_URLCONF`` as ROOT_URLCONF names that
one; here in the top layer because it wires consumers of several apps."""

from django.urls import re_path

from board.consumers import BoardConsumer
from composition.consumers import SessionConsumer

websocket_urlpatterns: list = [
    re_path(r"^ws/board/$", BoardConsumer.as_asgi()),
    re_path(r"^ws/sessions/(?P<session_id>[A-Za-z0-9][A-Za-z0-9._:-]{0,127})/$", SessionConsumer.as_asgi()),
]
