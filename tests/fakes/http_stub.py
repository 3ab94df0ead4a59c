"""One small HTTP server for every stand-in the tests need: a route table on 127.0.0.1.

A route is ``"METHOD /path"`` (``"GET *"``: any path of that method, ``"*"``: anything) mapped to a
reply ``(status, body)`` — a dict or list is sent as JSON — or to a function of a :class:`Call`, which
can reply, stream server-sent events or hold the connection open. Unmatched requests get 404. Every
request is recorded (``stub.seen``). In a test, use the ``http_stub`` fixture (conftest.py), which
stops its servers afterwards; a stand-in executable runs :meth:`StubServer.serve_forever` instead.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

Body = bytes | str | dict | list | None
Route = tuple | Callable[["Call"], None]


class Call:
    """One request, and the means to answer it."""

    def __init__(self, handler: http.server.BaseHTTPRequestHandler, method: str):
        self.handler = handler
        self.method = method
        self.path = handler.path
        self.headers = handler.headers
        length = int(handler.headers.get("Content-Length") or 0)
        self.body = handler.rfile.read(length) if length else b""

    def json(self) -> Any:
        return json.loads(self.body or b"{}")

    def reply(self, status: int, body: Body = b"", content_type: str | None = None,
              headers: Mapping[str, str] | None = None) -> None:
        if isinstance(body, (dict, list)):
            data, content_type = json.dumps(body).encode(), content_type or "application/json"
        else:
            data = body.encode() if isinstance(body, str) else (body or b"")
        self.handler.send_response(status)
        if content_type:
            self.handler.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.handler.send_header(name, value)
        self.handler.send_header("Content-Length", str(len(data)))
        self.handler.end_headers()
        self.handler.wfile.write(data)

    def start_events(self, content_type: str = "text/event-stream") -> None:
        """Begin a streamed answer (no length: it ends when the connection closes)."""
        self.handler.send_response(200)
        self.handler.send_header("Content-Type", content_type)
        self.handler.end_headers()

    def event(self, data: Body) -> None:
        """One server-sent event: ``data: <JSON or text>`` and a blank line, flushed at once."""
        text = json.dumps(data) if isinstance(data, (dict, list)) else data
        payload = text.encode() if isinstance(text, str) else (text or b"")
        self.handler.wfile.write(b"data: " + payload + b"\n\n")
        self.handler.wfile.flush()


class StubServer:
    """``StubServer({"GET /health": (200, {"status": "ok"})}).start()``; ``.url``, ``.port``, ``.seen``."""

    def __init__(self, routes: Mapping[str, Route] | Callable[[Call], None], *, port: int = 0,
                 host: str = "127.0.0.1"):
        self.routes = routes
        self.seen: list[tuple[str, str]] = []        # (method, path) of every request, in order
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self) -> None:
                call = Call(self, self.command)
                stub.seen.append((call.method, call.path))
                route = stub.route_for(call.method, call.path)
                if route is None:
                    call.reply(404, {"error": f"no route for {call.method} {call.path}"})
                elif callable(route):
                    route(call)
                else:
                    call.reply(*route)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    def route_for(self, method: str, path: str) -> Route | None:
        if callable(self.routes):
            return self.routes
        for key in (f"{method} {path}", f"{method} {path.split('?')[0]}", f"{method} *", "*"):
            if key in self.routes:
                return self.routes[key]
        return None

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> StubServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until the process ends (a stand-in executable's main loop)."""
        self.httpd.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=5)
        self.httpd.server_close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
