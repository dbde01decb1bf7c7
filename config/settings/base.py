"""Settings shared by every environment. All environment reading happens in config.env."""

import re
from datetime import timedelta
from pathlib import Path

from config.env import (
    env_bool,
    env_database,
    env_int,
    env_list,
    env_path,
    env_paths,
    env_rate,
    env_redis_url,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = env_path("SWITCHYARD_VAR_DIR", BASE_DIR / "var")

SECRET_KEY = env_str("SECRET_KEY", "insecure-local-only-key-change-me-in-production-0123456789")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    # Login lockout (see AXES_* below); before sessions_app, whose admin adds the unlock action.
    "axes",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "channels",
    "django_htmx",
    "sessions_app",
    "ledger",
    "workspaces",
    "board",
    "runners",
    "usage",
    "composition",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # img-src 'self' data: on every HTML page (no tracking pixel in what agents wrote).
    "config.page_csp.PageCspMiddleware",
    "workspaces.files.download_host.DownloadHostMiddleware",
    # WhiteNoise, with an async iterator for its files under ASGI (config/static_files.py).
    "config.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Above CommonMiddleware: API paths get JSON errors, never an APPEND_SLASH redirect or an HTML page.
    "config.api.middleware.ApiJsonErrorsMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Turns a refused login into the lockout page; below every other one, as axes asks.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
# The websocket routes, by name as ROOT_URLCONF (config/asgi.py): the kernel imports no app.
WEBSOCKET_URLCONF = "composition.routing.websocket_urlpatterns"
WSGI_APPLICATION = None
ASGI_APPLICATION = "config.asgi.application"
# Called by config/asgi.py when a web process starts (not by commands or workers), in order.
WEB_STARTUP = [
    # Temporaries of uploads cut short when the last web process died: swept in a thread.
    "workspaces.files.upload_parts.upload_parts_sweep_in_background",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "config.pages.nav",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------
# SQLite is the embedded default. WAL lets readers run beside the writer, and IMMEDIATE
# transactions take the write lock at BEGIN, so concurrent writers queue on busy_timeout
# instead of failing with "database is locked" when a read transaction upgrades.
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
DATABASES = {
    "default": env_database(
        "DATABASE_URL",
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "switchyard.sqlite3",
        },
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
    # Kept open between requests: opening one (the PRAGMAs above, Django's SQL functions) cost
    # ~0.4 ms, twice per board move (its answer and its push). Request threads are pooled
    # (config/speed/request_threads.py), so the connections are reused, not piled up; one a thread
    # leaves behind closes with it. (PostgreSQL has a process-wide pool instead: config/env.py.)
    DATABASES["default"]["CONN_MAX_AGE"] = 600
    # SQLite creates the file but not its folder; a fresh checkout has no var/ yet.
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, Celery, Channels, cache ---------------------------------------------------------
REDIS_URL = env_redis_url("REDIS_URL")
# Messages one websocket may have waiting before the layer drops more (Channels' default is 100):
# a burst of board changes must not cost an open page its messages. A page that still misses one
# sees the gap in the sequence numbers and refetches.
CHANNEL_CAPACITY = 1000

if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": CHANNEL_CAPACITY},
        }
    }
    CACHES = {
        "default": {
            # Django's, with one client per pool and a one-round-trip counter (config/cache.py).
            "BACKEND": "config.cache.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    # The embedded broker is kombu's filesystem transport: it needs no server and still
    # carries messages between the web process and a worker process on the same machine.
    # The host is ignored; naming one keeps kombu from warning "No hostname was supplied" at every start.
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(VAR_DIR / "broker" / "queue"),
        # Fanout (worker control) messages; kombu would otherwise write ./control/ in the cwd.
        "control_folder": str(VAR_DIR / "broker" / "control"),
        "data_folder_out": str(VAR_DIR / "broker" / "queue"),
        "processed_folder": str(VAR_DIR / "broker" / "processed"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = f"file://{VAR_DIR / 'broker' / 'results'}"
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": CHANNEL_CAPACITY}}
    }
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = "UTC"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 1800, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 1500, minimum=1)
if CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"CELERY_TASK_SOFT_TIME_LIMIT ({CELERY_TASK_SOFT_TIME_LIMIT}) must be below "
        f"CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT}): the soft limit lets a task clean up first."
    )
# With acks_late a worker holds one message at a time: a prefetched message would wait behind a
# long task (and, on Redis, be redelivered to another worker once its visibility timeout ran out).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# When the broker connection drops, a running acks_late task's message is redelivered anyway (its
# ack can no longer be sent): cancelling the task keeps two copies from running at once.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_TRACK_STARTED = True
CELERY_RESULT_EXPIRES = 24 * 3600
if REDIS_URL:
    # Redis redelivers an unacknowledged message after the visibility timeout. acks_late keeps a
    # message unacknowledged while its task runs, so the timeout must outlast the longest task
    # (the hard time limit, which no task raises) or a running task would be started a second time.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 600}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# --- File roots (SPEC §4) -----------------------------------------------------------------
WORKSPACE_ROOT = env_path("WORKSPACE_ROOT", VAR_DIR / "workspaces")
SAVED_REPORTS_ROOT = env_path("SAVED_REPORTS_ROOT", VAR_DIR / "saved_reports")
STATE_DIR = env_path("STATE_DIR", VAR_DIR / "compound-state")
LOGS_ROOT = env_path("LOGS_ROOT", VAR_DIR / "logs")
REPORTS_DIR = env_path("REPORTS_DIR", VAR_DIR / "reports")
TASK_DEFS_DIR = env_path("TASK_DEFS_DIR", VAR_DIR / "tasks")
ARCHIVE_ROOT = env_path("ARCHIVE_ROOT", VAR_DIR / "archives")
EXPORT_ROOTS = env_paths("EXPORT_ROOTS", [VAR_DIR / "exports"])

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# People log in on our own page; the admin's login works too (same session).
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "board:board"
LOGOUT_REDIRECT_URL = "login"
# Login lockout (django-axes), on our login page and the admin's alike: after LOGIN_FAILURE_LIMIT
# wrong passwords for one username from one address, that pair is refused (even with the right
# password) until LOGIN_COOLOFF_MINUTES have passed without another try, or an engineer unlocks it
# in the admin (Axes > Access attempts > "Unlock"). By the pair, so that someone hammering a name
# from elsewhere does not lock its owner out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "config.login_lockout.lockout_response"
# Demo accounts (setup_demo: admin/admin, owner/owner) are for the embedded default only: production
# turns this on and then refuses to start while one still has its demo password (config/demo_passwords.py).
REFUSE_DEMO_PASSWORDS = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# --- API ------------------------------------------------------------------------------------
# Size caps. A request body over API_MAX_BODY_BYTES is refused with 413 before it is parsed.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=1024)
API_MAX_BATCH_ITEMS = 1000
# An OTLP export (usage/otlp.py): its body, also once inflated, and its log records, spans or data points.
OTLP_MAX_BODY_BYTES = env_int("OTLP_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1024)
OTLP_MAX_RECORDS = env_int("OTLP_MAX_RECORDS", 10_000, minimum=100)
# ask_product_owner calls of one key waiting for an answer at once over /mcp (sessions_app/mcp_http.py).
MCP_WAITS_PER_KEY = env_int("MCP_WAITS_PER_KEY", 4, minimum=1)
EVENT_PAYLOAD_MAX_BYTES = env_int("EVENT_PAYLOAD_MAX_BYTES", 256 * 1024, minimum=1024)
CHECKPOINT_MAX_BYTES = env_int("CHECKPOINT_MAX_BYTES", 1024 * 1024, minimum=1024)
TOOL_SUMMARY_MAX_CHARS = env_int("TOOL_SUMMARY_MAX_CHARS", 2000, minimum=64)
# Per-key request rate. Generous: a busy agent sends hundreds of requests a second.
API_KEY_THROTTLE_RATE = env_rate("API_KEY_THROTTLE_RATE", "3000/s")
# A key lookup is reused in process memory this long (at most 2 s): a revocation or pause made by
# another process applies within it; one made by this process at once (sessions_app/keys.py).
API_KEY_CACHE_SECONDS = 2
HEARTBEAT_TTL_SECONDS = env_int("HEARTBEAT_TTL_SECONDS", 300, minimum=1)
# Runners (SPEC §8). A run's lease lasts this long past the runner's last heartbeat or poll; when it
# lapses the run goes back to the queue (assigned) or is lost (started), and a runner unseen this
# long is offline. Runners heartbeat every RUNNER_HEARTBEAT_SECONDS, well inside the lease.
RUNNER_LEASE_SECONDS = env_int("RUNNER_LEASE_SECONDS", 60, minimum=5)
# A started run is declared lost only this long after its lease lapsed: by then its runner's watchdog
# has stopped its agent (SIGKILL at the lease's end at the latest, read in whole seconds), so no
# process of the attempt is alive when a new attempt may start (SPEC §8). With beat's expiry pass
# every 15 s, a run whose runner died is lost at most lease + margin + 15 s after its last heartbeat.
RUNNER_LEASE_MARGIN_SECONDS = env_int("RUNNER_LEASE_MARGIN_SECONDS", 5, minimum=2)
RUNNER_HEARTBEAT_SECONDS = env_int("RUNNER_HEARTBEAT_SECONDS", 10, minimum=1)
# A lost run (its runner vanished mid-run) is queued again as a new run that resumes it.
RUNNER_REQUEUE_LOST = env_bool("RUNNER_REQUEUE_LOST", True)
# A run handed out must be acknowledged (moved to starting) within this many seconds, else it goes
# back to the queue. Its lease is not renewed by heartbeats: a runner killed while its long poll was
# open may still be handed a run, and nobody would ever start it.
RUNNER_ASSIGN_ACK_SECONDS = env_int("RUNNER_ASSIGN_ACK_SECONDS", 15, minimum=1)
# A run its runner reports failed before acknowledging it (a runner restarted without its record of
# the run) goes back to the queue too, attempt + 1, up to this attempt; then the failure stands.
RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS = env_int("RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS", 5, minimum=1)
# The longest the server holds a runner's long poll, whatever it asks (at most 30 s): lower it
# when a proxy in front closes idle requests sooner.
RUNNER_POLL_MAX_SECONDS = env_int("RUNNER_POLL_MAX_SECONDS", 30, minimum=0)
# The largest body of one POST /runs/{id}/log/ (streamed to the log, fsynced once at its end): a
# runner ships its whole backlog in one request up to this, so a large log is a few requests, not
# one per MiB. Larger bodies are 413.
RUNNER_LOG_CHUNK_MAX_BYTES = env_int("RUNNER_LOG_CHUNK_MAX_BYTES", 64 * 1024 * 1024, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sessions_app.api.authentication.AgentKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["config.api.permissions.IsAgentOrStaff"],
    "DEFAULT_THROTTLE_CLASSES": ["config.api.throttling.ApiKeyRateThrottle"],
    "DEFAULT_PARSER_CLASSES": ["config.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "config.api.pagination.DefaultPagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "config.api.schema.SwitchyardAutoSchema",
    "EXCEPTION_HANDLER": "config.api.exceptions.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Switchyard API",
    "DESCRIPTION": "The control plane for AI agents: sessions, ledger, tasks and workspaces.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Our PATCH bodies (finishing a tool call) are not partial updates: keep their required fields.
    "COMPONENT_SPLIT_PATCH": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.api.schema.refuse_unknown_request_properties",
        "config.api.schema_constraints.document_empty_query_values",
        "config.api.schema_constraints.document_serializer_rules",
    ],
    "ENUM_NAME_OVERRIDES": {
        "SessionStatusEnum": "sessions_app.models.AgentSession.Status",
        "TaskStatusEnum": "board.models.Task.Status",
        "ToolCallStatusEnum": "ledger.models.ToolInvocation.Status",
        "AgentStatusEnum": "sessions_app.models.Agent.Status",
        "CampaignStatusEnum": "board.models.Campaign.Status",
        "LeadStatusEnum": "board.models.Lead.Status",
        "WorktreeStatusEnum": "workspaces.models.Worktree.Status",
        "RunStatusEnum": "runners.models.Run.Status",
        "RunnerStatusEnum": "runners.models.Runner.Status",
        "ReviewDecisionEnum": "runners.models.TaskReview.Decision",
        "RunKindEnum": "runners.models.Run.Kind",
        # A workspace's kind and status appear in workspaces' WorkspaceOutput and sessions_app's
        # SessionWorkspaceOutput (the same JSON): one enum each, under their long-standing names.
        "WorkspaceOutputKindEnum": "workspaces.models.Workspace.Kind",
        "WorkspaceOutputStatusEnum": "workspaces.models.Workspace.Status",
        # A waiting run's answer (runners/api/serializers.py: RunAnswerInput, DeferredOutput).
        "AnswerDecisionEnum": ["allow", "deny"],
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {
        "contention_refusals": {"()": "config.log_filters.ContentionRefusals"},
        "credentials_masked": {"()": "config.log_filters.CredentialsMasked"},
        "client_errors_without_traceback": {"()": "config.log_filters.ClientErrorsWithoutTraceback"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["credentials_masked", "client_errors_without_traceback"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "django.request": {"filters": ["contention_refusals"]},
        # Django's own console handler (DEBUG only) printed every django.* line a second time.
        "django": {"handlers": [], "level": env_str("LOG_LEVEL", "INFO").upper(), "propagate": True},
        # axes says "AXES: BEGIN ..." at every process start and logs each login at INFO; its
        # warnings (failed logins, lockouts) are what an operator wants on the console.
        "axes": {"level": "WARNING"},
    },
}

# --- Workspaces -----------------------------------------------------------------------------
FILE_UPLOAD_MAX_BYTES = env_int("FILE_UPLOAD_MAX_BYTES", 5 * 1024**3, minimum=1)
# An upload's temporary ``.<name>.<hex>.part`` file not written to for this long belongs to an
# upload that died (a web process killed mid-body): the reconcile and each web start remove it.
UPLOAD_TIMEOUT_SECONDS = env_int("UPLOAD_TIMEOUT_SECONDS", 3600, minimum=60)
# Optional host (e.g. files.example.com) that serves people's file downloads by signed link,
# so no agent-written file is ever opened on Switchyard's own origin (workspaces/files/download_host.py).
DOWNLOAD_HOST = env_str("DOWNLOAD_HOST", "").strip()
if DOWNLOAD_HOST and "*" not in ALLOWED_HOSTS:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, re.sub(r":\d+$", "", DOWNLOAD_HOST)]  # host names match without the port
SHARED_WORKSPACE_NAME = "default"
# A worktree claim is a lease: renewed by the holder's heartbeat, lost after this long without one.
WORKTREE_LEASE_TTL_SECONDS = env_int("WORKTREE_LEASE_TTL_SECONDS", 900, minimum=1)
GIT_BINARY = env_str("GIT_BINARY", "git")
# Shipping (SPEC §10): GitHub's REST API (a GitHub Enterprise server's /api/v3 works too), and how
# often beat asks it for open pull requests' state and fetches to find branches merged elsewhere.
GITHUB_API_URL = env_str("GITHUB_API_URL", "https://api.github.com").rstrip("/")
SHIP_WATCH_SECONDS = env_int("SHIP_WATCH_SECONDS", 300, minimum=10)

# --- Background work (SPEC §2, §4, §7) ------------------------------------------------------
# Sync-to-db: how often beat runs a full pass; a file younger than SYNC_SETTLE_SECONDS that
# does not parse is taken for half-written and retried later, not reported as broken.
SYNC_INTERVAL_SECONDS = env_int("SYNC_INTERVAL_SECONDS", 60, minimum=1)
SYNC_SETTLE_SECONDS = env_int("SYNC_SETTLE_SECONDS", 5, minimum=0)
# File observer: a file must stop growing for OBSERVER_SETTLE_MS before it is recorded;
# a full reconcile of the folders against the database runs every OBSERVER_RECONCILE_SECONDS.
OBSERVER_SETTLE_MS = env_int("OBSERVER_SETTLE_MS", 50, minimum=0)
OBSERVER_RECONCILE_SECONDS = env_int("OBSERVER_RECONCILE_SECONDS", 300, minimum=1)
# Archival: session workspaces whose session ended this many days ago (a workspace's own
# retention_days overrides it); "zstd" or "gzip".
ARCHIVE_AFTER_DAYS = env_int("ARCHIVE_AFTER_DAYS", 14, minimum=0)
ARCHIVE_COMPRESSION = env_str("ARCHIVE_COMPRESSION", "zstd")
if ARCHIVE_COMPRESSION not in ("zstd", "gzip"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"ARCHIVE_COMPRESSION must be zstd or gzip; got {ARCHIVE_COMPRESSION!r}.")
STORAGES["archives"] = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    "OPTIONS": {"location": str(ARCHIVE_ROOT)},
}
# Outbound webhooks: attempts before a delivery is given up, and the first retry delay.
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
WEBHOOK_RETRY_BASE_SECONDS = env_int("WEBHOOK_RETRY_BASE_SECONDS", 10, minimum=1)
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
# The whole delivery (connect, send, the answer's headers and excerpt) ends after this long, however
# slowly a receiver drips its answer: WEBHOOK_TIMEOUT_SECONDS bounds each read, not their sum.
WEBHOOK_DEADLINE_SECONDS = env_int("WEBHOOK_DEADLINE_SECONDS", 10, minimum=1)
# Where people reach this app (https://switchyard.example.com): links in messages sent elsewhere (a
# Slack webhook's "Open the session"). Empty: those messages name the page's path without a link.
PUBLIC_URL = env_str("SWITCHYARD_PUBLIC_URL", "").strip().rstrip("/")
if PUBLIC_URL and not re.match(r"^https?://[^/\s]+", PUBLIC_URL):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"SWITCHYARD_PUBLIC_URL must be an http(s) URL; got {PUBLIC_URL!r}.")
