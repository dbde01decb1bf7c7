import pytest

from config.redaction import REDACTED, summarize


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("curl -H 'Authorization: Bearer eyAbc123456789xyz' https://x", "eyAbc123456789xyz"),
        ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234", "sk-proj-abcdefghijklmnop1234"),
        ("key sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaa", "sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaa"),
        ("mysql -u root --password=hunter2 db", "hunter2"),
        ("DB_PASSWORD: s3cr3t!", "s3cr3t!"),
        (
            "git clone https://user:ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        ("postgres://app:pa55word@db:5432/x", "pa55word"),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA", "b3BlbnNzaC1rZXktdjEAAAA"),
        ("use sy_0a1b2c3d_AbCdEfGhIjKlMnOpQrStUvWxYz0123 here", "AbCdEfGhIjKlMnOpQrStUvWxYz0123"),
        ({"password": "hunter2", "user": "bob"}, "hunter2"),
        ({"headers": {"Authorization": "Basic dXNlcjpwYXNz"}}, "dXNlcjpwYXNz"),
        ({"nested": [{"client_secret": "abc"}]}, "abc"),
    ],
)
def test_secrets_never_survive(value, secret):
    text = summarize(value, max_chars=10_000)

    assert secret not in text
    assert REDACTED in text


def test_ordinary_text_is_kept():
    text = summarize({"command": "pytest -q tests/", "cwd": "/repo"}, max_chars=10_000)

    assert text == '{"command": "pytest -q tests/", "cwd": "/repo"}'


def test_cap_keeps_the_length_and_says_how_much_was_cut():
    text = summarize("a" * 1000, max_chars=100)

    assert len(text) <= 100
    assert text == "a" * 81 + "… [919 more chars]"


def test_none_is_empty():
    assert summarize(None, max_chars=100) == ""
