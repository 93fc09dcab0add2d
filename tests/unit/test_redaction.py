"""Redaction of sensitive payload fields: case-insensitive substrings (separators ignored) and glob
patterns, a configurable list."""

from __future__ import annotations

import pytest

from qsim.engine.payload import DEFAULT_REDACT, REDACTED, is_sensitive, normalize_fields, redact, scrub_text

DEFAULTS = normalize_fields(DEFAULT_REDACT)


@pytest.mark.parametrize("key", [
    "password", "PASSWORD", "db_password", "dbPassword", "passwd", "access_token", "refreshToken",
    "client_secret", "ClientSecret", "X-Api-Key", "api_key", "apiKey", "API-KEY", "Authorization",
    "proxy-authorization", "aws_secret_access_key", "session_token", "private_key", "credentials", "Cookie",
])
def test_default_patterns_catch_common_spellings(key: str) -> None:
    assert is_sensitive(key, DEFAULTS)
    data = {"user": "bob", key: "s3cr3t-value", "nested": [{key: {"deep": 1}}]}
    assert redact(data, DEFAULTS) == {"user": "bob", key: REDACTED, "nested": [{key: REDACTED}]}


@pytest.mark.parametrize("key", ["user", "order_id", "amount", "author", "description", "tenant"])
def test_ordinary_fields_are_kept(key: str) -> None:
    assert not is_sensitive(key, DEFAULTS)


def test_the_list_is_configurable_with_substrings_and_glob_patterns() -> None:
    fields = normalize_fields(["ssn", "card_*", "*_pin"])
    assert is_sensitive("SSN", fields) and is_sensitive("customer_ssn", fields)
    assert is_sensitive("card_number", fields) and is_sensitive("Card_CVC", fields)
    assert is_sensitive("atm_pin", fields) and not is_sensitive("pinned", fields)
    assert not is_sensitive("password", fields)  # a list given replaces the defaults
    assert not is_sensitive("password", normalize_fields([]))
    with pytest.raises(ValueError, match="redact field names must be non-empty strings"):
        normalize_fields(["ok", ""])
    with pytest.raises(ValueError, match="redact must be a sequence"):
        normalize_fields("password")


def test_secret_values_are_scrubbed_from_error_text() -> None:
    data = {"user": "bob", "X-Api-Key": "key-DDD444", "db": {"db_password": "pw-CCC333"}, "access_token": 12345}
    text = "failed for key-DDD444 with pw-CCC333 (token 12345), user bob"
    assert scrub_text(text, data, DEFAULTS) == "failed for *** with *** (token ***), user bob"
