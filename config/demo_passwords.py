"""Production refuses to start while a demo account still has its demo password.

``setup_demo`` (run by ``make run``) makes admin/admin and owner/owner for a first look on one's own
machine. A database copied to a server, or a server started once with ``make run``, would keep
them: anyone could log in as an engineer. With ``REFUSE_DEMO_PASSWORDS`` on (production settings)
the system check below fails every management command that runs checks (``check --deploy``,
``migrate``, ``observe``, ``runserver``) and ``config.asgi`` raises before serving, naming the
accounts and the fix. ``changepassword`` and ``createsuperuser`` run no checks, so the fix still works.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

# username -> the password setup_demo gives it.
DEMO_ACCOUNTS = {"admin": "admin", "owner": "owner"}
CHECK_ID = "switchyard.E001"


def demo_password_users() -> list[str]:
    """Usernames, sorted, of the demo accounts that still log in with their demo password."""
    try:
        users = list(get_user_model().objects.filter(username__in=DEMO_ACCOUNTS, is_active=True))
    except DatabaseError:
        return []  # no users table yet (the first migrate): no account to refuse
    return sorted(user.username for user in users if user.check_password(DEMO_ACCOUNTS[user.username]))


def refusal_message(usernames: list[str]) -> tuple[str, str]:
    names = ", ".join(usernames)
    message = f"Demo account(s) {names} still have the demo password from setup_demo (make run)."
    hint = (
        "Production refuses to start with them. Set a real password with "
        + " and ".join(f"`python manage.py changepassword {name}`" for name in usernames)
        + ", or delete the account(s) in the admin, then start again."
    )
    return message, hint


@register()
def demo_passwords_check(app_configs=None, **kwargs) -> list[Error]:
    if not settings.REFUSE_DEMO_PASSWORDS:
        return []
    usernames = demo_password_users()
    if not usernames:
        return []
    message, hint = refusal_message(usernames)
    return [Error(message, hint=hint, id=CHECK_ID)]


def refuse_demo_passwords() -> None:
    """For servers that run no system checks (gunicorn): the same refusal, raised."""
    if not settings.REFUSE_DEMO_PASSWORDS:
        return
    usernames = demo_password_users()
    if usernames:
        message, hint = refusal_message(usernames)
        raise ImproperlyConfigured(f"{message} {hint}")


def refuse_demo_passwords_at_startup() -> None:
    """``refuse_demo_passwords`` for a server's import of the ASGI application: the connection it
    opened on the importing thread is closed, so that it does not sit idle (or hold a pool slot)
    while requests run on other threads."""
    if not settings.REFUSE_DEMO_PASSWORDS:
        return
    try:
        refuse_demo_passwords()
    finally:
        connections.close_all()
