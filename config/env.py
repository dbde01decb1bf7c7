"""Reading settings from the environment, in one place.

Every reader fails at start-up with ``ImproperlyConfigured`` naming the variable
when a value is present but malformed, so a typo never becomes a silent default.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is not None and "\x00" in value:
        raise ImproperlyConfigured(f"{name} contains a NUL byte.")
    return value


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0, true/false, yes/no, on/off; got {value!r}.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer; got {value!r}.") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {number}.")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_path(name: str, default: Path) -> Path:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ImproperlyConfigured(f"{name} must be an absolute path; got {value!r}.")
    return path


def env_paths(name: str, default: list[Path]) -> list[Path]:
    value = _raw(name)
    if value is None:
        return default
    paths = []
    for item in value.split(os.pathsep):
        if not item.strip():
            continue
        path = Path(item.strip()).expanduser()
        if not path.is_absolute():
            raise ImproperlyConfigured(f"{name} must list absolute paths separated by '{os.pathsep}'; got {item!r}.")
        paths.append(path)
    return paths


def env_database(name: str, default: dict) -> dict:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        config = dj_database_url.parse(value.strip())
    except (ValueError, KeyError) as exc:
        raise ImproperlyConfigured(f"{name} is not a valid database URL: {exc}") from None
    if config.get("ENGINE") not in {"django.db.backends.postgresql", "django.db.backends.sqlite3"}:
        raise ImproperlyConfigured(f"{name} must be a postgres:// or sqlite:// URL; got {value!r}.")
    if not config.get("NAME"):
        raise ImproperlyConfigured(f"{name} names no database; got {value!r}.")
    if config["ENGINE"] == "django.db.backends.postgresql":
        # Under ASGI every request runs on a fresh thread, so persistent per-thread
        # connections are never reused and pile up; a process-wide pool is.
        config["CONN_MAX_AGE"] = 0
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": env_int("DATABASE_POOL_MIN", 2, minimum=0),
            "max_size": env_int("DATABASE_POOL_MAX", 10, minimum=1),
            "timeout": 10,
        }
        # Only the statements config/speed/prepared.py asks for are prepared (Django's own cursors bind
        # on the client and never prepare); Django's None would turn those off too.
        config["OPTIONS"]["prepare_threshold"] = 5 if env_bool("DATABASE_PREPARED_STATEMENTS", True) else None
    return config


def env_redis_url(name: str) -> str | None:
    value = _raw(name)
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    if not value.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"{name} must start with redis://, rediss:// or unix://; got {value!r}.")
    return value


def env_rate(name: str, default: str) -> str:
    """A throttle rate such as ``2000/s`` or ``60000/min``."""
    value = (_raw(name) or default).strip()
    number, _, period = value.partition("/")
    if not number.isdigit() or period not in {"s", "sec", "m", "min", "h", "hour", "d", "day"}:
        raise ImproperlyConfigured(f"{name} must look like 2000/s or 60000/min; got {value!r}.")
    return value
