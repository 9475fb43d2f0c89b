"""A loopback OpenAI-compatible endpoint for tests and benchmarks (127.0.0.1 only).

It serves GET /v1/models and POST /v1/chat/completions over HTTP/1.1 keep-alive, answers in
microseconds, and can inject faults: 429 with Retry-After, 500, 400, slow answers (timeouts),
truncated answers (finish_reason "length") and unparseable text. It records every request.

In a test: `with FakeOpenAI() as server: ... server.base_url ...` (a thread of the test
process). Standalone: `python -m tests.fake_openai --port-file F [--delay S]` (a process to
kill, or to benchmark against).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL_ID = "fake-model"
LITELLM_AUTH_ERROR = (
    "Authentication Error, Invalid proxy server token passed. Received API Key = sk-...key, "
    "Key Hash (Token) =e3b0c44298fc. Unable to find token in cache or "
    "`LiteLLM_VerificationTokenTable`"
)


@dataclass
class Reply:
    """What the server does for one request."""

    content: Any = "Answer: 7"
    """The message content (None: JSON null, as some servers send; a list of content parts,
    or any other JSON value, sent as given)."""
    finish_reason: Any = "stop"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error_message: str = "injected failure"
    choices: list[Any] | None = None
    """When set, the body's `choices` as given (e.g. [] for a body with no answer)."""
    raw_body: str | None = None
    """When set, the body is this text served as text/html (a proxy's error page)."""


def prompt_of(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def hashed_answer(body: dict[str, Any]) -> Reply:
    """Default behaviour: a deterministic answer that depends on the prompt."""
    digest = hashlib.sha256(prompt_of(body).encode()).digest()
    return Reply(content=f"Let me think.\nAnswer: {digest[0] % 10}")


class FakeOpenAI:
    """The endpoint. `responder(body) -> Reply` decides each answer; swap it at any time."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Reply] = hashed_answer,
        api_key: str | None = None,
        model_id: str = MODEL_ID,
    ) -> None:
        self.responder = responder
        self.api_key = api_key
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.models_status = 200
        """What GET /models answers (LiteLLM without a database answers 400, transformers
        serve 500)."""
        self.wrong_key = {route: (401, "Incorrect API key provided", "invalid_api_key")
                          for route in ("models", "chat")}  # fmt: skip
        """What each route ("models", "chat") answers a wrong key: status, message, type."""
        self.fixed_reply: bytes | None = None
        """When set, every chat request gets these bytes unparsed and unrecorded: the cheapest
        possible endpoint, for benchmarks."""

    def mimic_litellm(self, chat_refusal: str = LITELLM_AUTH_ERROR) -> None:
        """Answer like a LiteLLM proxy without a database (measured with 1.106): GET /models
        answers 400 "No connected db.", and a wrong key gets HTTP 400, not 401 (the chat
        endpoint says `chat_refusal`)."""
        self.models_status = 400
        self.wrong_key = {"models": (400, "No connected db.", "no_db_connection"),
                          "chat": (400, chat_refusal, "auth_error")}  # fmt: skip

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def prompts(self) -> list[str]:
        with self._lock:
            return [prompt_of(b) for b in self.requests]

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if self.fixed_reply is not None and method == "POST":
                    writer.write(self.fixed_reply)
                    continue
                status, payload, extra = await self._route(method, path, headers, body)
                is_raw = isinstance(payload, str)
                data = payload.encode() if is_raw else json.dumps(payload).encode()
                response_headers = {
                    "Content-Type": "text/html" if is_raw else "application/json",
                    "Content-Length": str(len(data)),
                    **extra,
                }
                head_out = f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in response_headers.items()
                )
                writer.write(head_out.encode() + b"\r\n" + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            self._connections.discard(task)

    async def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any] | str, dict[str, str]]:
        authorization = headers.get("authorization", "")
        with self._lock:
            self.authorizations.append(authorization)
        is_listing = method == "GET" and path.rstrip("/").endswith("/models")
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            status, message, kind = self.wrong_key["models" if is_listing else "chat"]
            return status, _error(message, kind), {}
        if is_listing:
            if self.models_status != 200:
                return self.models_status, _error("No connected db.", "no_db_connection"), {}
            return 200, {"object": "list", "data": [{"id": self.model_id, "object": "model"}]}, {}
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            return 404, _error(f"no route {method} {path}", "not_found"), {}
        request = json.loads(body)
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self.responder(request)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
        finally:
            with self._lock:
                self.in_flight -= 1
        if reply.status != 200:
            return reply.status, _error(reply.error_message, "injected"), reply.headers
        if reply.raw_body is not None:
            return 200, reply.raw_body, reply.headers
        words = len(reply.content.split()) if isinstance(reply.content, str) else 0
        choices = reply.choices
        if choices is None:
            message = {"role": "assistant", "content": reply.content}
            choices = [{"index": 0, "message": message, "finish_reason": reply.finish_reason}]
        return (
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", self.model_id),
                "choices": choices,
                "usage": {
                    "prompt_tokens": len(prompt_of(request).split()),
                    "completion_tokens": words,
                    "total_tokens": len(prompt_of(request).split()) + words,
                },
            },
            reply.headers,
        )

    # ------------------------------------------------------------------ lifecycle

    async def serve(self, port: int = 0) -> asyncio.Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self._server

    def __enter__(self) -> FakeOpenAI:
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve())
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        async def stop() -> None:
            server.close()
            for connection in list(self._connections):
                connection.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread:
            self._thread.join(10)
        loop.close()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error"}  # fmt: skip


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code}}


def spawn(workdir: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """The endpoint as its own process (options as for `main`); returns it and its base URL."""
    port_file = workdir / "port"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_openai", "--port-file", str(port_file), *options],
        cwd=Path(__file__).resolve().parent.parent,
    )
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text()):
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("fake OpenAI endpoint did not start")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port_file.read_text()}/v1"


def fixed_reply() -> bytes:
    """A complete HTTP response to a chat request, ready to send."""
    payload = json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL_ID,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Answer: 7"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 2, "total_tokens": 52},
        }
    ).encode()
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback OpenAI-compatible test endpoint")
    parser.add_argument("--port-file", required=True, help="where to write the chosen port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--log", help="append each request's prompt hash to this file")
    parser.add_argument(
        "--fixed",
        action="store_true",
        help="answer every chat request with one precomputed response, without reading it "
        "(the cheapest endpoint: for throughput benchmarks)",
    )
    args = parser.parse_args()

    log = Path(args.log).open("a", buffering=1) if args.log else None  # noqa: SIM115

    def responder(body: dict[str, Any]) -> Reply:
        reply = hashed_answer(body)
        reply.delay_s = args.delay
        if log:
            log.write(hashlib.sha256(prompt_of(body).encode()).hexdigest()[:16] + "\n")
        return reply

    async def run() -> None:
        server = FakeOpenAI(responder)
        if args.fixed:
            server.fixed_reply = fixed_reply()
        await server.serve()
        Path(args.port_file).write_text(str(server.port))
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
