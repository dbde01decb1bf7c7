"""Logging in through the real page, in a real browser."""

import re

from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD, screenshot


def test_login_lands_on_the_board_with_the_navigation(new_page, product_owner):
    page = new_page(product_owner)
    expect(page).to_have_url(re.compile(r"^http://127\.0\.0\.1:\d+/$"))
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Board")).to_be_visible()
    expect(nav.get_by_role("link", name="Priorities")).to_be_visible()
    # Product owners don't get the engineering links.
    expect(nav.get_by_role("link", name="Sessions")).to_have_count(0)


def test_wrong_password_is_refused(browser_type, live_app, product_owner):
    context = browser_type.new_context(base_url=live_app.url)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(product_owner.username)
    page.get_by_label("Password").fill(PASSWORD + "x")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    context.close()


def test_product_owner_gets_a_403_page_for_engineering_pages(new_page, product_owner):
    page = new_page(product_owner)
    response = page.goto("/sessions/")
    assert response.status == 403
    expect(page.get_by_role("heading", name="You may not open this page")).to_be_visible()


def test_repeated_wrong_passwords_lock_the_login_through_the_real_server(browser_type, live_app, product_owner):
    # given the default limit (5) of wrong passwords from this browser: the fifth answer is the lockout
    context = browser_type.new_context(base_url=live_app.url)
    page = context.new_page()
    for attempt in range(1, 6):
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(product_owner.username)
        page.get_by_label("Password").fill("not-the-password")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_contain_text("didn't match" if attempt < 5 else "Too many failed attempts")

    # when the right password comes
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(product_owner.username)
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_response(lambda r: r.url.endswith("/accounts/login/") and r.request.method == "POST") as answer:
        page.get_by_role("button", name="Log in").click()

    # then the lockout page answers, and the board is still out of reach
    assert answer.value.status == 429
    expect(page.get_by_role("heading", name="Too many failed attempts")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text("Too many failed attempts — try again in 15 minutes.")
    screenshot(page, "login_locked_out")
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    context.close()
