"""A ``llama_bin`` that escapes its process group: it double-forks, and the grandchild (in a session
of its own, ``setsid``) serves — a wrapper that puts the real server in the background.

``python daemon_server.py [--mode stay|leave] ... --port N -m MODEL`` (any other llama-server
arguments are accepted and ignored). ``stay``: the launcher keeps running in the foreground (the
sweep measures the escaped grandchild, as it did the day it was found); ``leave``: the launcher exits
0 at once, as a daemonising wrapper does. The grandchild answers ``/health``, ``/props`` (naming the
model) and ``/slots``, streams a short completion, and writes its pid to ``<port>.pid`` beside
``--pid-dir`` when given.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import time

args = sys.argv[1:]
if "--help" in args:
    print("  -m, --model FNAME\n  --port PORT\n  --host HOST\n  -c, --ctx-size N\n  -ngl N\n  -np, --parallel N")
    sys.exit(0)
if "--version" in args:
    print("version: daemon-fake")
    sys.exit(0)
mode = args[args.index("--mode") + 1] if "--mode" in args else os.environ.get("DAEMON_MODE", "stay")
port, model = int(args[args.index("--port") + 1]), args[args.index("-m") + 1]
n_ctx = int(args[args.index("-c") + 1]) if "-c" in args else 4096     # /slots says the context it was given
pid_dir = os.environ.get("DAEMON_PID_DIR")


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.reply({"status": "ok"})
        elif self.path == "/props":
            self.reply({"model_path": model, "build_info": "daemon-fake"})
        else:
            self.reply([{"id": 0, "n_ctx": n_ctx, "is_processing": False, "speculative": False}])

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in ("Hello", " there", "."):
            self.wfile.write(b"data: " + json.dumps({"choices": [{"delta": {"content": word}}]}).encode() + b"\n\n")
        usage = {"choices": [{"delta": {}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 3},
                 "timings": {"predicted_n": 3, "predicted_per_second": 100.0, "prompt_n": 5}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, *a):
        pass


def serve() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    if pid_dir:
        with open(os.path.join(pid_dir, f"{port}.pid"), "w") as fh:
            fh.write(str(os.getpid()))
    server.serve_forever()


child = os.fork()
if child == 0:
    os.setsid()                   # out of the launcher's process group and session
    if os.fork() == 0:
        os.closerange(3, 256)
        serve()
    os._exit(0)                   # the middle process: the grandchild is an orphan now
os.waitpid(child, 0)
if mode == "leave":
    sys.exit(0)
while True:                       # the launcher stays in the foreground until it is stopped
    time.sleep(3600)
