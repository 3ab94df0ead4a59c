#!/usr/bin/env python3
"""A deliberately hostile OpenAI-style streaming server, for tests of the client's bounds.

Everything is written with raw socket writes, so a test decides chunking, newlines and timing
byte by byte. It speaks just enough of two real servers to be driven through the real CLIs:

* llama-server: ``GET /props`` (with ``build_info``, so ``bench.py --url`` detects llama.cpp and
  reads ``timings``), ``/slots`` (``speculative: true``), ``/health``; streamed chunks carry
  ``timings`` with ``draft_n``/``draft_n_accepted`` as llama-server's do.
* ``vllm serve MODEL --port P [--speculative-config JSON] …`` (run as a `vllm` executable): ``/health``,
  ``/v1/models``, ``/version``, ``/metrics`` with spec-decode counters when speculating; the mode
  of a draft comes from ``HOSTILE_DRAFT_MODES`` (JSON {draft model: mode}); the baseline is ``ok``.

``POST /v1/chat/completions`` answers according to the mode:

  ok                a good stream (chunked): role chunk, ``tokens`` content events ``interval_s``
                    apart after ``first_delay_s``, a finish chunk, usage + timings, ``[DONE]``
  ok-close          the same without chunked encoding: ``Connection: close``, body until EOF
  huge-line         one 100 MB ``data:`` line, sent as fast as the client takes it
  endless-line      a ``data: {…`` line that never ends (1 KB every 20 ms)
  pings             ``: ping`` comments every 50 ms, forever
  trickle-events    valid empty ``data:`` events every 50 ms, forever (never finishes)
  silent            response headers, then nothing
  no-response       accepts the request, sends nothing at all
  not-utf8          an event with bytes that are not UTF-8
  not-json          an event that is not JSON
  deep-json         an event nested 100 000 arrays deep
  choices-dict      ``choices`` is an object;  delta-list: ``delta`` is a list
  content-number    ``content: 5``
  usage-list        ``usage`` is a list
  tokens-string     ``usage.completion_tokens: "8"``;  tokens-huge: ``1e30``
  draft-string      ``timings.draft_n: "30"``;  draft-negative: ``-10``
  pps-nan           ``timings.predicted_per_second: NaN``
  accepted-gt-drafted  ``draft_n: 10, draft_n_accepted: 50`` (and the same in vLLM's per-request metrics)
  truncated         content events, then the connection closes (no chunked encoding): no finish
                    reason, no ``[DONE]``;  cut: the same inside chunked encoding (no last chunk)
  no-done           finish reason and usage, then the connection closes without ``[DONE]`` (valid)
  split-surrogates  content "\\ud83d" then "\\ude00" (one emoji split across events), then a lone "\\udc00"
  redirect          307 to another path on this server;  redirect-away: 302 to another host (GET
                    /props and /v1/models too)
  error-endless     HTTP 500 whose body never ends

Run as a script: ``hostile_server.py MODE [PORT]`` (prints the URL) or ``hostile_server.py serve
MODEL --port P …`` (the vLLM stand-in; ``HOSTILE_PIDS``: folder for ``<pid>.pid``).
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import sys
import threading
import time

MODES = ("ok", "ok-close", "huge-line", "endless-line", "pings", "trickle-events", "silent", "no-response",
         "not-utf8", "not-json", "deep-json", "choices-dict", "delta-list", "content-number", "usage-list",
         "tokens-string", "tokens-huge", "draft-string", "draft-negative", "pps-nan", "accepted-gt-drafted",
         "truncated", "cut", "no-done", "split-surrogates", "redirect", "redirect-away", "error-endless",
         "endless-probe")
FOREVER_S = 120.0   # "forever" ends here, so a broken test cannot leave a thread writing for ever


class HostileServer:
    """One server on 127.0.0.1 in background threads. ``sent`` records (what, perf_counter time)
    right after each content event went out; ``requests`` counts chat requests received."""

    def __init__(self, mode: str = "ok", *, port: int = 0, model: str = "hostile-model", tokens: int = 8,
                 first_delay_s: float = 0.0, interval_s: float = 0.0, draft_modes: dict | None = None,
                 speculative_k: int = 0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.model = model
        self.tokens = tokens
        self.first_delay_s = first_delay_s
        self.interval_s = interval_s
        self.speculative_k = speculative_k
        self.sent: list[tuple[str, float]] = []
        self.requests = 0
        self.stopping = threading.Event()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                try:
                    owner._handle(self.request)
                except OSError:
                    pass   # the client gave up (that is what most modes are for)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", port), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    # -- HTTP plumbing ------------------------------------------------------------------------
    def _handle(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        request_line = reader.readline(65536).decode("latin-1").split()
        if len(request_line) < 2:
            return
        method, path = request_line[0], request_line[1]
        headers = {}
        while True:
            line = reader.readline(65536)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = reader.read(int(headers.get("content-length") or 0)) if method == "POST" else b""
        if method == "GET":
            self._get(sock, path)
        elif self.mode == "endless-probe" and path == "/api/v0/chat/completions":
            self._endless(sock)      # an unstreamed answer (LM Studio's native-blocking path) that never ends
        elif path == "/v1/chat/completions":
            self.requests += 1
            self._chat(sock, json.loads(body or b"{}"))
        else:
            self._reply(sock, 404, {"error": "not found"})

    @staticmethod
    def _reply(sock, status: int, obj, content_type: str = "application/json", extra: str = "") -> None:
        body = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
        sock.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n{extra}\r\n".encode() + body)

    def _get(self, sock, path: str) -> None:
        if self.mode == "endless-probe" and path in ("/props", "/slots", "/v1/models", "/version", "/api/v0/models",
                                                     "/lmstudio-greeting"):
            self._endless(sock)
            return
        if self.mode == "redirect-away" and path in ("/props", "/v1/models"):
            self._reply(sock, 302, "", "text/plain", f"Location: http://elsewhere.invalid{path}\r\n")
        elif path == "/props":
            self._reply(sock, 200, {"build_info": "hostile-1", "model_path": "/models/hostile.gguf",
                                    "endpoint_metrics": False})
        elif path == "/slots":
            self._reply(sock, 200, [{"id": 0, "speculative": True}])
        elif path == "/health":
            self._reply(sock, 200, {"status": "ok"})
        elif path == "/v1/models":
            self._reply(sock, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        elif path == "/version":
            self._reply(sock, 200, {"version": "0.0.0+hostile"})
        elif path == "/metrics":
            lines = []
            if self.speculative_k:
                for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
                    lines.append(f'vllm:spec_decode_{name}_total{{engine="0",model_name="{self.model}"}} 0.0')
            self._reply(sock, 200, "\n".join(lines) + "\n", "text/plain")
        elif path.startswith("/moved"):
            self._reply(sock, 200, {"moved": True})
        else:
            self._reply(sock, 404, {"error": "not found"})

    def _endless(self, sock) -> None:
        """A JSON body that never ends, one byte at a time: a reader must give up on its own deadline."""
        sock.sendall(b"HTTP/1.1 200 X\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"x\": \"")
        for _ in self._forever():
            try:
                sock.sendall(b"y")
            except OSError:
                return
            time.sleep(0.05)

    def _forever(self):
        """Yield until the server stops or FOREVER_S passes."""
        end = time.monotonic() + FOREVER_S
        while not self.stopping.is_set() and time.monotonic() < end:
            yield

    # -- the chat stream ----------------------------------------------------------------------
    def _chat(self, sock, body: dict) -> None:
        mode = self.mode
        if mode == "no-response":
            for _ in self._forever():
                time.sleep(0.05)
            return
        if mode in ("redirect", "redirect-away"):
            target = "/moved/v1/chat/completions" if mode == "redirect" else "http://elsewhere.invalid/v1/chat"
            self._reply(sock, 307 if mode == "redirect" else 302, "", "text/plain", f"Location: {target}\r\n")
            return
        chunked = mode not in ("ok-close", "truncated", "no-done")
        status = "500 Internal Server Error" if mode == "error-endless" else "200 OK"
        framing = "Transfer-Encoding: chunked\r\n" if chunked else "Connection: close\r\n"
        sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\n{framing}\r\n".encode())

        def write(data: bytes) -> None:
            if chunked and data:
                data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            sock.sendall(data)

        def event(obj) -> None:
            write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        base = {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1, "model": self.model}

        def choice(delta=None, finish=None) -> dict:
            return {**base, "choices": [{"index": 0, "delta": {} if delta is None else delta,
                                         "finish_reason": finish}]}

        if mode == "error-endless":
            for _ in self._forever():
                write(b"Internal error " * 64)
                time.sleep(0.01)
            return
        if mode == "silent":
            for _ in self._forever():
                time.sleep(0.05)
            return
        if mode == "huge-line":
            write(b"data: {\"x\": \"")
            piece = b"x" * 2**20
            for _ in range(100):
                write(piece)
            write(b"\"}\n\n")
            return
        if mode == "endless-line":
            write(b"data: {\"choices\": [{\"delta\": {\"content\": \"")
            for _ in self._forever():
                write(b"y" * 1024)
                time.sleep(0.02)
            return
        if mode == "pings":
            for _ in self._forever():
                write(b": ping\n\n")
                time.sleep(0.05)
            return
        if mode == "trickle-events":
            for _ in self._forever():
                event(choice({"role": "assistant"}))
                time.sleep(0.05)
            return

        event(choice({"role": "assistant", "content": ""}))
        bad_content = {"not-utf8": b"data: {\"choices\": [{\"delta\": {\"content\": \"\xff\xfe\"}}]}\n\n",
                       "not-json": b"data: {\"choices\": [{\"delta\": \n\n",
                       "deep-json": b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"}
        if mode in bad_content:
            write(bad_content[mode])
        elif mode == "choices-dict":
            event({**base, "choices": {"0": {"delta": {"content": "a"}}}})
        elif mode == "delta-list":
            event({**base, "choices": [{"index": 0, "delta": ["a"]}]})
        elif mode == "content-number":
            event({**base, "choices": [{"index": 0, "delta": {"content": 5}}]})
        elif mode == "split-surrogates":
            for text in ("\ud83d", "\ude00", "a\udc00"):
                write(b"data: " + json.dumps(choice({"content": text})).encode() + b"\n\n")   # \\uXXXX escapes
        time.sleep(self.first_delay_s)
        n = self.tokens
        for i in range(n):
            if i:
                time.sleep(self.interval_s)
            event(choice({"content": f" w{i}"}))
            self.sent.append(("content", time.perf_counter()))
        if mode in ("truncated", "cut"):
            return
        k = self.speculative_k or 4
        drafted, accepted = (10, 50) if mode == "accepted-gt-drafted" else (k * n, k * n // 2)
        timings = {"prompt_n": 12, "predicted_n": n, "predicted_per_second": 100.0, "draft_n": drafted,
                   "draft_n_accepted": accepted}
        usage: object = {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n}
        if mode == "usage-list":
            usage = [12, n]
        elif mode == "tokens-string":
            usage = {"prompt_tokens": 12, "completion_tokens": str(n)}
        elif mode == "tokens-huge":
            usage = {"prompt_tokens": 12, "completion_tokens": 1e30}
        elif mode == "draft-string":
            timings["draft_n"] = "30"
        elif mode == "draft-negative":
            timings["draft_n"] = -10
        elif mode == "pps-nan":
            timings["predicted_per_second"] = float("nan")
        final = {**choice(finish="length"), "usage": usage, "timings": timings}
        if self.speculative_k:   # vLLM's per-request metrics (--per-request-spec-decode-metrics)
            final["metrics"] = {"speculative_decoding": {"num_draft_tokens": drafted, "num_accepted_draft_tokens":
                                                         accepted, "num_spec_steps": max(1, drafted // k)}}
        write(b"data: " + json.dumps(final).encode() + b"\n\n")   # NaN is written as the bare word NaN
        if mode != "no-done":
            write(b"data: [DONE]\n\n")
        if chunked:
            sock.sendall(b"0\r\n\r\n")


def _serve_like_vllm(argv: list[str]) -> None:
    """``serve MODEL --port P [--speculative-config JSON] …``: the mode follows the draft model."""
    model = argv[1]
    opts = {argv[i]: argv[i + 1] for i in range(2, len(argv) - 1) if argv[i].startswith("--")}
    pids = os.environ.get("HOSTILE_PIDS")
    if pids:
        open(os.path.join(pids, f"{os.getpid()}.pid"), "w").close()
    spec = json.loads(opts.get("--speculative-config", "null"))
    modes = json.loads(os.environ.get("HOSTILE_DRAFT_MODES", "{}"))
    mode = modes.get(spec.get("model") or spec.get("method"), "ok") if spec else "ok"
    print(f"hostile vLLM stand-in: serving {model}, draft {spec}, mode {mode}", flush=True)
    server = HostileServer(mode, port=int(opts.get("--port", 8000)), model=model,
                           speculative_k=int(spec.get("num_speculative_tokens") or 4) if spec else 0)
    with server:
        threading.Event().wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        _serve_like_vllm(sys.argv[1:])
    else:
        chosen = sys.argv[1] if len(sys.argv) > 1 else "ok"
        with HostileServer(chosen, port=int(sys.argv[2]) if len(sys.argv) > 2 else 0) as srv:
            print(srv.url, flush=True)
            threading.Event().wait()
