"""Production: PostgreSQL and Redis, served by an ASGI server behind TLS."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_str

from .base import *  # noqa: F403

DEBUG = False
SECRET_KEY = env_str("SECRET_KEY", "")
if len(SECRET_KEY) < 50 or SECRET_KEY.startswith("insecure"):
    raise ImproperlyConfigured("SECRET_KEY must be set to a random string of at least 50 characters in production.")

# No SECURE_PROXY_SSL_HEADER: it would believe X-Forwarded-Proto from any client. The web server
# takes the scheme from X-Forwarded-Proto only when the proxy is named in FORWARDED_ALLOW_IPS
# (config/http_limits.py), and Django reads the scheme the server gives it.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# Health probes come over plain HTTP from the load balancer.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Refuse to start while a demo account (setup_demo: admin/admin, owner/owner) keeps its password.
REFUSE_DEMO_PASSWORDS = True
