"""The embedded default that `make run` uses: debug on, everything under var/."""

from config.env import env_bool

from .base import *  # noqa: F403

DEBUG = env_bool("DEBUG", True)
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}  # noqa: F405
# Serve static files from the apps' folders, no collectstatic needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
