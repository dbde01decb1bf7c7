"""The Procfile's gunicorn worker: uvicorn's, with the HTTP limits of config/http_limits.py.

gunicorn's own request limits (--limit-request-fields and the like) do not reach an ASGI worker;
uvicorn's Config is where they go, through CONFIG_KWARGS. These override gunicorn's --keep-alive.
"""

from uvicorn_worker import UvicornWorker as BaseUvicornWorker

from config.http_limits import uvicorn_config_kwargs


class UvicornWorker(BaseUvicornWorker):
    CONFIG_KWARGS = {**BaseUvicornWorker.CONFIG_KWARGS, **uvicorn_config_kwargs()}
