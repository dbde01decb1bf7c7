import pytest
from django.test import Client

from config.pages import ENGINEERS, PRODUCT_OWNERS
from tests.page_users import user_in


@pytest.fixture
def engineer(db):
    return user_in(ENGINEERS, username="eng")


@pytest.fixture
def engineer_client(engineer) -> Client:
    client = Client()
    client.force_login(engineer)
    return client


@pytest.fixture
def product_owner_client(db) -> Client:
    client = Client()
    client.force_login(user_in(PRODUCT_OWNERS, username="po"))
    return client
