"""What-if settings for A/B runs of bench/run.py (--settings bench.settings_conn0); not used by the app.

Production settings with CONN_MAX_AGE=0: Django closes its connection at the end of every
request instead of keeping it for 60 s. Under ASGI each request runs in a thread of its own, so
a kept connection is never reused and piles up (see bench/HISTORY.md).
"""

from config.settings.production import *  # noqa: F403

DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
