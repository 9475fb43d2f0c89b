"""The one redaction of credentials (numerate.kernel.credentials)."""

import base64

import pytest

from numerate.kernel.credentials import redact, register_secret, scrub, url_secrets


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
    basic = base64.b64encode(b"user:p@ss").decode()  # what a server may quote back
    assert url_secrets("http://user:p%40ss@host/v1") == ["p%40ss", basic]
    assert url_secrets("https://t0ken@host/v1")[0] == "t0ken"
    assert url_secrets("http://host/v1") == [] and url_secrets(None) == []
    for secret in url_secrets("http://user:p%40ss-w0rd@host/v1"):
        register_secret(secret)
    assert redact("p%40ss-w0rd and p@ss-w0rd") == "*** and ***"
    quoted = base64.b64encode(b"user:p@ss-w0rd").decode()
    assert redact(f"Invalid key Basic {quoted} presented") == "Invalid key Basic *** presented"
    assert scrub("header was Basic dXNlcjpvdGhlcg==", [], token_shapes=True) == (
        "header was Basic ***"
    )


def test_a_credential_in_a_url_s_query_is_hidden_and_nothing_else():
    said = "at https://gw.example/v1?api_key=abc123&region=eu and http://h/v1;token=t0k#x"
    assert (
        scrub(said, [])
        == "at https://gw.example/v1?api_key=***&region=eu and http://h/v1;token=***#x"
    )
    assert scrub("Answer: 7 (a&key=5 is no URL)", []) == "Answer: 7 (a&key=5 is no URL)"


def test_the_colon_after_a_hidden_query_value_is_kept():
    """The colon that ends the URL in a message is not part of the value (it was hidden with
    it: `?api_key=*** ConnectError`); one inside the value is."""
    said = "cannot reach at http://h:9/v1?api_key=abc123: ConnectError: refused"
    assert scrub(said, []) == "cannot reach at http://h:9/v1?api_key=***: ConnectError: refused"
    assert scrub("http://h/?token=a:b&c=1 and http://h/?sig=x:", []) == (
        "http://h/?token=***&c=1 and http://h/?sig=***:"
    )


def test_a_bearer_token_ends_before_the_bracket_and_colon_of_the_message():
    """Before: `(held by ... Bearer abcSECRET): nothing is lost` became `Bearer *** nothing is
    lost`, the `):` hidden with the token."""
    said = "(held by PID 1: x -H Bearer abcdefSECRET): nothing is lost"
    assert scrub(said, [], token_shapes=True) == "(held by PID 1: x -H Bearer ***): nothing is lost"


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("run --api-key sk-LEAK1234567890abcdef now", "run --api-key *** now"),
        ("run --token=xyz123 --password hunter2 -v", "run --token=*** --password *** -v"),
        ("run http://u:pw@h/v1 --key-file keys.txt", "run http://***@h/v1 --key-file keys.txt"),
        ("curl -H Bearer abcdefSECRET x", "curl -H Bearer *** x"),
        ("numerate run --config nightly.yaml", "numerate run --config nightly.yaml"),
        # the words a URL's query parameter is hidden by (one list for both)
        ("x --signature abc --sig=def --design y", "x --signature *** --sig=*** --design y"),
    ],
)  # fmt: skip
def test_another_process_s_command_line_is_shown_without_its_secrets(command, shown):
    from numerate.kernel.credentials import scrub_command_line

    assert scrub_command_line(command) == shown


def test_a_key_quoted_back_escaped_or_percent_encoded_is_hidden_too():
    """Before: only the key as it is was hidden; a server that quoted it URL-encoded or
    JSON-escaped had it stored in `raw_text`."""
    import base64
    import json
    from urllib.parse import quote, quote_plus

    key = 'Tok/en+Secret=Value"x y'
    forms = [key, json.dumps(key)[1:-1], quote(key, safe=""), quote_plus(key, safe=""),
             quote(key), base64.b64encode(key.encode()).decode(),
             base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")]  # fmt: skip
    for form in forms:  # corpus G: base64 and Python's default quote() were stored
        assert scrub(f"echo: {form} .", [key]) == "echo: *** ."
    assert scrub("[Bearer abcdefSECRET]", [], token_shapes=True) == "[Bearer ***]"
    assert scrub("EMPTY", ["EMPTY"]) == "EMPTY"  # a placeholder is no secret, in any form


def test_a_key_quoted_back_in_an_html_page_is_hidden():
    """Corpus H: a server that escaped the header as HTML (`&` as `&amp;`) kept the key's
    tail past the `;` where the bearer shape ends, in the error, the database and Prefect's."""
    import html

    key = "Zq/+=&<AbC7xyz'LEAK\"99"
    for form in (html.escape(key), html.escape(key, quote=False)):
        said = scrub(f"bad Bearer {form} seen", [key], token_shapes=True)
        assert said == "bad Bearer *** seen", said


def test_a_key_quoted_back_as_a_python_repr_is_hidden():
    """Corpus I: a server that quoted the key with `{key!r}` doubled its backslash (and
    escaped a quote), and the key was stored whole."""
    key = "sk-abc\\def\"ghi'jkl"
    for form in (repr(key), repr(key)[1:-1], key.replace("\\", "\\\\")):
        said = scrub(f"invalid key {form}", [key])
        assert "def" not in said and "jkl" not in said, said


def test_a_password_that_breaks_its_url_is_hidden_all_the_same():
    """Corpus K: `http://u:PW/LEAK88@host` is no well-formed URL (its `/` ends the host), and
    the password was shown in clear wherever the URL was quoted."""
    for text in ("at http://u:PW/LEAK88@127.0.0.1:1/api now", "http://u:PW#LEAK88@h/api"):
        assert "LEAK88" not in scrub(text, []) and "http://***@" in scrub(text, [])
    assert scrub("https://registry.npmjs.org/@scope/pkg", []).endswith("/@scope/pkg")
