import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("reader", "name", "value"),
    [
        (lambda: env.env_bool("X_FLAG"), "X_FLAG", "maybe"),
        (lambda: env.env_int("X_NUM", 1), "X_NUM", "ten"),
        (lambda: env.env_int("X_NUM", 1, minimum=1), "X_NUM", "0"),
        (lambda: env.env_path("X_ROOT", Path("/tmp")), "X_ROOT", "relative/path"),
        (lambda: env.env_paths("X_ROOTS", []), "X_ROOTS", "/ok:relative"),
        (lambda: env.env_database("X_DB", {}), "X_DB", "mysql://u@h/db"),
        (lambda: env.env_database("X_DB", {}), "X_DB", "not a url"),
        (lambda: env.env_redis_url("X_REDIS"), "X_REDIS", "http://localhost:6379"),
        (lambda: env.env_rate("X_RATE", "1/s"), "X_RATE", "fast"),
    ],
)
def test_malformed_values_name_the_variable(monkeypatch, reader, name, value):
    monkeypatch.setenv(name, value)

    with pytest.raises(ImproperlyConfigured) as error:
        reader()

    assert name in str(error.value)


def test_well_formed_values_are_read(monkeypatch):
    monkeypatch.setenv("X_FLAG", "yes")
    monkeypatch.setenv("X_NUM", " 42 ")
    monkeypatch.setenv("X_DB", "postgres://u@127.0.0.1:5432/app")
    monkeypatch.setenv("X_ROOTS", "/a:/b")

    assert env.env_bool("X_FLAG") is True
    assert env.env_int("X_NUM", 1) == 42
    assert env.env_database("X_DB", {})["NAME"] == "app"
    assert env.env_paths("X_ROOTS", []) == [Path("/a"), Path("/b")]


def test_unset_values_fall_back_to_defaults(monkeypatch):
    monkeypatch.delenv("X_UNSET", raising=False)

    assert env.env_int("X_UNSET", 7) == 7
    assert env.env_redis_url("X_UNSET") is None


def _manage(*args: str, **extra_env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    environment.update(extra_env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_start_up_stops_on_a_malformed_database_url():
    result = _manage("check", DATABASE_URL="mysql://nobody@nowhere/db")

    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_production_settings_pass_the_deploy_check_with_the_documented_environment(tmp_path):
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY="x" * 20 + "production-secret-key-for-the-deploy-check-0123456789",
        ALLOWED_HOSTS="switchyard.example.com",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/switchyard",
        REDIS_URL="redis://127.0.0.1:6379/0",
        SWITCHYARD_VAR_DIR=str(tmp_path),
    )

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_production_believes_no_forwarded_scheme_from_any_client(tmp_path):
    # X-Forwarded-Proto is believed by the web server, from the proxies FORWARDED_ALLOW_IPS names only;
    # Django's own SECURE_PROXY_SSL_HEADER would take it from anyone who sends it.
    result = _manage(
        "shell",
        "-c",
        "from django.test import RequestFactory; "
        "print(RequestFactory().get('/', HTTP_X_FORWARDED_PROTO='https', SERVER_NAME='localhost').is_secure())",
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY="x" * 20 + "production-secret-key-for-the-deploy-check-0123456789",
        ALLOWED_HOSTS="localhost",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/switchyard",
        SWITCHYARD_VAR_DIR=str(tmp_path),
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"  # after the shell's "N objects imported" line


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    result = _manage(
        "check",
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY="",
        SWITCHYARD_VAR_DIR=str(tmp_path),
    )

    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
