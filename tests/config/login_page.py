"""A person's login through the real server's page, as a browser does it (tests of the lockout)."""

import re

import httpx

LOCKED = "Too many failed attempts"


def login(base: str, username: str, password: str, forwarded_for: str | None = None) -> httpx.Response:
    """The login form (with its CSRF token), then the post; ``forwarded_for`` as an X-Forwarded-For header."""
    with httpx.Client(base_url=base, timeout=15) as client:
        form = client.get("/accounts/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
        data = {"username": username, "password": password, "csrfmiddlewaretoken": token}
        return client.post("/accounts/login/", data=data, headers=headers)


def login_status(response: httpx.Response) -> str:
    if response.status_code == 302:
        return "logged in"
    if response.status_code == 429 and LOCKED in response.text:
        return "locked"
    return f"refused {response.status_code}"
