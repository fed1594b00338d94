"""ChatClient against a real HTTP server on loopback that fails on purpose."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rubricgym.core.llm import ChatClient, EndpointError, EndpointResponseError
from rubricgym.core.types import Message


class Handler(BaseHTTPRequestHandler):
    fail_first = 0
    seen: list = []

    def log_message(self, *args):
        return

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append(body)
        if len(Handler.seen) <= Handler.fail_first:
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"overloaded")
            return
        if body["model"] == "missing":
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error": "model not found"}')
            return
        reply = {
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "answer", "arguments": '{"value": 3}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    Handler.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_retries_transient_errors_then_parses_tool_calls(server):
    Handler.fail_first = 2
    client = ChatClient(server, "m", backoff_s=0.01, max_retries=3)
    result = asyncio.run(client.chat([Message(role="user", content="hi")], temperature=0, max_tokens=5))
    assert result.attempts == 3 and client.calls == 3
    assert result.message.tool_calls[0].arguments == {"value": 3}
    assert Handler.seen[-1]["temperature"] == 0 and Handler.seen[-1]["messages"][0]["content"] == "hi"


def test_gives_up_after_retries_with_a_clear_error(server):
    Handler.fail_first = 100
    client = ChatClient(server, "m", backoff_s=0.01, max_retries=2)
    with pytest.raises(EndpointError, match="failed after 3 attempt.*HTTP 503"):
        asyncio.run(client.chat([Message(role="user", content="hi")]))


def test_client_errors_are_not_retried(server):
    Handler.fail_first = 0
    client = ChatClient(server, "missing", backoff_s=0.01)
    with pytest.raises(EndpointResponseError, match="404"):
        asyncio.run(client.chat([Message(role="user", content="hi")]))
    assert client.calls == 1


def test_unreachable_endpoint():
    client = ChatClient("http://127.0.0.1:9/v1", "m", backoff_s=0.01, max_retries=1, timeout_s=2)
    with pytest.raises(EndpointError, match="rubricgym model serve"):
        asyncio.run(client.chat([Message(role="user", content="hi")]))
