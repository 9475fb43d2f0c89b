"""kernel.http: one bounded HTTP question (Prefect's health, the model hub)."""

import http.server
import threading
import time

import pytest

from numerate.kernel.http import Unanswered, answer


@pytest.fixture
def server():
    """A local server: /ok answers "true", /missing 404, /trickle one byte every 0.3 s."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/missing":
                self.send_error(404)
                return
            if self.path == "/whoami":
                said = self.headers.get("Authorization", "none").encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(said)))
                self.end_headers()
                self.wfile.write(said)
                return
            body = b"true" if self.path == "/ok" else b"x" * 100
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.path == "/ok":
                self.wfile.write(body)
                return
            for byte in body:  # each read gets a byte before its own timeout: never "timed out"
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.3)

        def log_message(self, *args):
            pass

    running = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    running.daemon_threads = True
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{running.server_address[1]}"
    running.shutdown()


def test_an_answer_and_an_error_status_are_both_answers(server):
    assert answer(f"{server}/ok", 5) == (200, b"true")
    assert answer(f"{server}/missing", 5)[0] == 404


def test_a_trickle_is_no_answer_within_the_time_in_all(server):
    """Each read's own timeout never fires on a server that sends a byte every 0.3 s: the
    time is counted for the whole answer."""
    started = time.monotonic()
    with pytest.raises(Unanswered) as unanswered:
        answer(f"{server}/trickle", 1.0)
    assert unanswered.value.timed_out and str(unanswered.value) == "no answer within 1 s"
    assert time.monotonic() - started < 3


def test_no_server_and_no_url_say_why():
    with pytest.raises(Unanswered) as refused:
        answer("http://127.0.0.1:9/health", 5)
    assert not refused.value.timed_out and "refused" in refused.value.reason
    with pytest.raises(Unanswered) as nonsense:
        answer("nonsense", 5)
    assert not nonsense.value.timed_out and "unknown url type" in nonsense.value.reason


def test_a_user_and_password_in_the_url_go_as_basic_authentication(server):
    """Before: urllib took `u:pw@127.0.0.1` for a host name, and the answer blamed the DNS
    ("Name or service not known") for a server that was there."""
    import base64

    with_user = server.replace("http://", "http://u%40x:p%3Aw@")
    status, said = answer(f"{with_user}/whoami", 5)
    assert status == 200 and said == b"Basic " + base64.b64encode(b"u@x:p:w")
    assert answer(f"{server}/whoami", 5) == (200, b"none")


def test_a_url_that_is_none_is_no_answer_at_once_and_no_thread_traceback(monkeypatch):
    """Corpus K: http.client's InvalidURL (no ValueError) escaped the probe thread as a
    traceback, and the answer was "no answer within 5 s", given after 1 s."""
    escaped = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    started = time.monotonic()
    with pytest.raises(Unanswered) as raised:
        answer("http://u:PW/LEAK88@127.0.0.1:1/api/health", 5)
    assert not raised.value.timed_out and "within" not in raised.value.reason
    assert time.monotonic() - started < 4 and escaped == []
