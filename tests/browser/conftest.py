"""Browser tests: Playwright driving Debian's Chromium against the app served by uvicorn.

Chromium comes from Debian (`apt-get install chromium`; .ci/run installs it): Playwright's own
browser download can't work on these machines. Where it is missing the tests are skipped with
the reason, unless REQUIRE_BROWSER is set (CI sets it), where they fail instead.
"""

import os
import shutil
from pathlib import Path

import pytest

from config.pages import ENGINEERS, PRODUCT_OWNERS
from tests.browser.server import module_server
from tests.page_users import user_in
from tests.worker import FILE_ROOTS

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
PASSWORD = "browser-test-pw-1"

pytestmark = pytest.mark.browser


def _chromium_or_skip() -> str:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    reason = f"Chromium not found at {CHROMIUM}: apt-get install chromium"
    if os.environ.get("REQUIRE_BROWSER"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser_type():
    executable = _chromium_or_skip()
    from playwright.sync_api import expect, sync_playwright

    # An expectation waits up to 15 s, not Playwright's 5: a page's first fragment took longer with both
    # suites side by side on a slow hour. A deadline, not a timing: a met expectation returns at once.
    expect.set_options(timeout=15_000)

    # Playwright's sync API keeps an event loop running in this thread while it is open; the
    # ORM calls a test makes between browser steps are still plain sync code. Only for as long
    # as the browser is open: the rest of the suite keeps Django's check.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def module_app(django_db_setup, django_db_blocker, tmp_path_factory):
    """One server for a module's browser tests (a web process's start is 2-3 s of CPU), with file
    roots of its own that each test starts empty (``file_roots`` below)."""
    server = module_server(django_db_blocker, tmp_path_factory, "browser")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def file_roots(settings, module_app):
    """The module's server's roots, emptied (tests/conftest.py's ``file_roots``, for a server that
    outlives the test): what a test writes there is what the server reads."""
    roots = module_app.roots
    for name, path in roots.items():
        for child in path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        if name in FILE_ROOTS:
            setattr(settings, name, path)
    settings.EXPORT_ROOTS = [roots["EXPORT_ROOT"]]
    return roots


@pytest.fixture
def live_app(transactional_db, module_app):
    """The app on a free localhost port, against this test's database (the module's server: the
    database is emptied between tests, and its live pages join their topics again)."""
    return module_app


def person(*groups: str, username: str):
    user = user_in(*groups, username=username)
    user.is_staff = ENGINEERS in groups
    user.set_password(PASSWORD)
    user.save()
    return user


@pytest.fixture
def product_owner(transactional_db):
    return person(PRODUCT_OWNERS, username="olivia")


@pytest.fixture
def engineer(transactional_db):
    return person(ENGINEERS, username="erin")


@pytest.fixture
def new_page(live_app, browser_type):
    """Open a fresh browser context (its own cookies) logged in as ``user``."""
    contexts = []

    def open_as(user, *, width: int = 1280, height: int = 900):
        context = browser_type.new_context(viewport={"width": width, "height": height}, base_url=live_app.url)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda url: "/accounts/login/" not in url)
        return page

    yield open_as
    for context in contexts:
        context.close()


def screenshot(page, name: str) -> Path:
    """Keep a screenshot as a test artefact under var/screenshots/ (not in git)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def element_screenshot(locator, name: str) -> Path:
    """Keep a screenshot of one element, as screenshot() does a page's.

    A polled element (the run watch) is replaced whole by each answer; a shot that a swap lands in
    the middle of fails with "not attached", and is taken again from the new element."""
    from playwright.sync_api import Error

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    for attempt in range(3):
        try:
            locator.screenshot(path=str(path))
            return path
        except Error as error:
            if "not attached" not in str(error) or attempt == 2:
                raise
    return path
