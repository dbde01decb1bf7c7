"""What-if for A/B runs of bench/run.py (--server gunicorn-wsgi); the app does not use it.

The same Django project behind a WSGI server (gunicorn's gthread workers): every request runs
in a reused thread with a reused database connection and no sync/async hand-offs. Production
needs ASGI for websockets; this measures what the REST API alone would cost under WSGI.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_wsgi_application()
