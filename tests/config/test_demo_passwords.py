"""Production refuses to start while a demo account of `make run` keeps its demo password.

Before, production settings started happily with admin/admin in the database.
"""

import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.core.checks import Error
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from config.demo_passwords import DEMO_ACCOUNTS, demo_passwords_check, refuse_demo_passwords
from tests.worker import ROOT, worker_environment

BOTH_MESSAGE = "Demo account(s) admin, owner still have the demo password from setup_demo (make run)."
BOTH_HINT = (
    "Production refuses to start with them. Set a real password with `python manage.py changepassword admin` "
    "and `python manage.py changepassword owner`, or delete the account(s) in the admin, then start again."
)


def _setup_demo():
    call_command("setup_demo", "--port", "9001", stdout=StringIO())


def _set_password(username: str, password: str = "a-real-password-42") -> None:
    user = get_user_model().objects.get(username=username)
    user.set_password(password)
    user.save()


@pytest.mark.django_db
def test_production_check_names_the_demo_accounts_and_the_fix(settings):
    # given production's setting and the accounts `make run` makes
    settings.REFUSE_DEMO_PASSWORDS = True
    _setup_demo()

    # when / then the system check fails, naming both and how to fix it
    assert demo_passwords_check() == [Error(BOTH_MESSAGE, hint=BOTH_HINT, id="switchyard.E001")]
    with pytest.raises(SystemCheckError) as refused:
        call_command("check", stdout=StringIO(), stderr=StringIO())
    assert f"?: (switchyard.E001) {BOTH_MESSAGE}" in str(refused.value)
    with pytest.raises(ImproperlyConfigured) as raised:
        refuse_demo_passwords()
    assert str(raised.value) == f"{BOTH_MESSAGE} {BOTH_HINT}"


@pytest.mark.django_db
def test_production_check_names_only_the_accounts_still_on_their_demo_password(settings):
    settings.REFUSE_DEMO_PASSWORDS = True
    _setup_demo()
    _set_password("owner")

    [error] = demo_passwords_check()

    assert error.msg == "Demo account(s) admin still have the demo password from setup_demo (make run)."
    assert "`python manage.py changepassword admin`, or delete" in error.hint


@pytest.mark.django_db
def test_production_check_passes_once_the_passwords_are_changed(settings):
    settings.REFUSE_DEMO_PASSWORDS = True
    _setup_demo()
    _set_password("admin")
    _set_password("owner")

    assert demo_passwords_check() == []
    call_command("check", stdout=StringIO())  # no SystemCheckError
    refuse_demo_passwords()  # no ImproperlyConfigured


@pytest.mark.django_db
def test_the_embedded_default_keeps_its_demo_accounts(settings):
    # given the local settings (REFUSE_DEMO_PASSWORDS off) and the demo accounts
    settings.REFUSE_DEMO_PASSWORDS = False
    _setup_demo()

    # then nothing refuses
    assert demo_passwords_check() == []
    refuse_demo_passwords()


def test_production_settings_turn_the_refusal_on():
    script = "from config.settings import production; print(production.REFUSE_DEMO_PASSWORDS)"
    env = {"SECRET_KEY": "p" * 60, "DJANGO_SETTINGS_MODULE": "config.settings.production"}
    result = _run([sys.executable, "-c", script], env)
    assert result.stdout.strip() == "True", result.stderr


def _store_as_make_run(username: str, password: str) -> None:
    hasher = PBKDF2PasswordHasher()
    get_user_model().objects.filter(username=username).update(password=hasher.encode(password, hasher.salt()))


def _run(args: list[str], extra: dict) -> subprocess.CompletedProcess:
    env = worker_environment({"SECRET_KEY": "s" * 60, **extra})
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.django_db(transaction=True)
def test_the_production_server_and_the_deploy_check_refuse_to_start(tmp_path):
    # given the demo accounts in a database the production settings point at, hashed as `make run`
    # hashes them (test settings use MD5, which production settings would not even read)
    _setup_demo()
    for username, password in DEMO_ACCOUNTS.items():
        _store_as_make_run(username, password)
    production = {"DJANGO_SETTINGS_MODULE": "config.settings.production", "SWITCHYARD_VAR_DIR": str(tmp_path)}

    # when the ASGI application is loaded as gunicorn's workers load it, and when check --deploy runs
    server = _run([sys.executable, "-c", "import config.asgi"], production)
    check = _run([sys.executable, "manage.py", "check", "--deploy"], production)

    # then both refuse, naming the accounts
    assert server.returncode == 1
    assert f"django.core.exceptions.ImproperlyConfigured: {BOTH_MESSAGE} {BOTH_HINT}" in server.stderr
    assert check.returncode == 1
    assert f"?: (switchyard.E001) {BOTH_MESSAGE}" in check.stderr

    # and once the passwords are changed, both start
    for username in DEMO_ACCOUNTS:
        _store_as_make_run(username, "a-real-password-42")
    server = _run([sys.executable, "-c", "import config.asgi; print('loaded')"], production)
    check = _run([sys.executable, "manage.py", "check", "--deploy"], production)
    assert server.returncode == 0, server.stderr
    assert server.stdout.strip() == "loaded"
    assert check.returncode == 0, check.stderr
    assert "switchyard.E001" not in check.stderr
