"""The one redaction of credentials (numerate.kernel.credentials)."""

import pytest

from numerate.kernel.credentials import redact, register_secret, scrub, url_secret


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("reach http://user:pa55word@host:8/v1: no", "reach http://***@host:8/v1: no"),
        ("base_url = 'https://tok3n@gw.example/v1'", "base_url = 'https://***@gw.example/v1'"),
        ("header value b'Bearer my-own-key-1234\\n'", "header value b'Bearer ***\\n'"),
        ("key my-own-key-1234 refused", "key *** refused"),
        ("an email a@b.org is no URL", "an email a@b.org is no URL"),
        ("nothing secret here", "nothing secret here"),
    ],
)  # fmt: skip
def test_scrub_hides_known_secrets_and_url_userinfo(text, shown):
    assert scrub(text, ["my-own-key-1234", "pa55word"]) == shown


def test_token_shapes_only_when_asked():
    """Errors from a server may quote keys we never registered; a model's answer is left as
    it is but for the secrets we know (its words could look like tokens)."""
    text = "HTTP 401: bad key sk-abcdefghijklmnop; Authorization: Bearer abc.def-ghi"
    shown = "HTTP 401: bad key sk-***; Authorization: Bearer ***"
    assert scrub(text, [], token_shapes=True) == shown
    assert scrub("Bearer of good news", []) == "Bearer of good news"


def test_short_strings_and_placeholders_are_not_blanked_out():
    assert scrub("EMPTY keys and abc", ["EMPTY", "abc"]) == "EMPTY keys and abc"


def test_the_registry_and_url_secrets():
    register_secret("  reg1stered-secret-value\n")  # stripped and raw forms alike
    assert redact("said reg1stered-secret-value.") == "said ***."
    assert url_secret("http://user:p%40ss@host/v1") == "p%40ss"
    assert url_secret("https://t0ken@host/v1") == "t0ken"
    assert url_secret("http://host/v1") is None and url_secret(None) is None
    register_secret(url_secret("http://user:p%40ss-w0rd@host/v1"))
    assert redact("p%40ss-w0rd and p@ss-w0rd") == "*** and ***"
