"""Logging in through the real page, in a real browser."""

import re

from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD


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
