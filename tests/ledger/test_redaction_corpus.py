"""The redaction rules on their own: every shape of the corpus goes, ordinary text stays."""

import pytest

from config.redaction import REDACTED, is_secret_name, redact_json, redact_text, summarize
from tests.ledger.secret_corpus import AFTER, BEFORE, CORPUS, ORDINARY


def test_the_corpus_has_at_least_thirty_shapes():
    assert len(CORPUS) >= 30
    assert len({name for name, _, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(("name", "text", "secret"), CORPUS, ids=[c[0] for c in CORPUS])
def test_every_shape_is_redacted_and_the_words_around_it_stay(name, text, secret):
    redacted = redact_text(text)

    assert secret not in redacted
    assert REDACTED in redacted
    assert redacted.startswith(BEFORE + " ")
    assert redacted.endswith(" " + AFTER)


@pytest.mark.parametrize(("name", "text", "secret"), CORPUS, ids=[c[0] for c in CORPUS])
def test_every_shape_is_redacted_inside_json_and_in_summaries(name, text, secret):
    value = {"steps": [{"output": text, "exit_code": 0}]}

    redacted = redact_json(value)

    assert secret not in repr(redacted)
    assert redacted["steps"][0]["exit_code"] == 0
    assert secret not in summarize(value, max_chars=10_000)
    assert value == {"steps": [{"output": text, "exit_code": 0}]}  # the input is not changed in place


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_kept_as_it_is(text):
    assert redact_text(text) == text
    value = {"line": text, "files": [text]}
    assert redact_json(value) is value


@pytest.mark.parametrize(
    "key",
    ["password", "DB_PASSWORD", "passwd", "apiKey", "x-api-key", "Authorization", "client_secret", "accessToken",
     "SecretAccessKey", "private_key", "PGPASSWORD", "MYSQL_PWD", "Cookie", "sessionid", "session_token",
     "credentials", "auth"],
)  # fmt: skip
def test_secret_key_names(key):
    assert is_secret_name(key)
    assert redact_json({key: "v4lue-of-it", "other": "kept"}) == {key: REDACTED, "other": "kept"}


@pytest.mark.parametrize(
    "key",
    ["author", "pwd", "input_tokens", "max_tokens", "token_type", "token_count", "password_file", "key",
     "session", "session_id", "signature", "monkey", "tokenizer_name", "secret_name"],
)  # fmt: skip
def test_names_that_only_look_like_secrets(key):
    assert not is_secret_name(key)
    assert redact_json({key: "v4lue-of-it"}) == {key: "v4lue-of-it"}


def test_under_a_secret_key_every_string_goes_and_numbers_stay():
    value = {"credentials": {"user": "bob", "keys": ["a1", "b2"], "ttl": 3600, "active": True}, "tokens": 12}

    assert redact_json(value) == {
        "credentials": {"user": REDACTED, "keys": [REDACTED, REDACTED], "ttl": 3600, "active": True},
        "tokens": 12,
    }


def test_a_clean_value_is_returned_as_the_same_object():
    value = {"line": "ok", "nested": [{"a": 1}]}

    assert redact_json(value) is value
