#!/usr/bin/env python3
"""A stand-in for LM Studio's ``lms`` CLI, for fast tests.

Follows the ``lms`` documentation (lmstudio.ai/docs/cli: ``lms server start [--port N]``,
``lms server stop``, ``lms load <model_key> [--identifier ID] [--context-length N] [--gpu off|max|0-1]``,
``lms unload <key>|--all``): one-shot commands that return once done; the server keeps running
after ``lms server start`` exits. Here the "server" is fake_lmstudio_server.py, started detached.

Environment:
  FAKE_LMS_STATE   folder for argv.jsonl (every invocation, one JSON list per line), server.json
                   ({"port", "pid"}) and server.log
  FAKE_LMS_LOAD    ok (default) | oom (``lms load`` fails with an out-of-memory message)
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def state_dir():
    return os.environ["FAKE_LMS_STATE"]


def running(pid):
    """Is pid running? (A killed server whose parent exited may stay a zombie for a while.)"""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def read_server():
    try:
        with open(os.path.join(state_dir(), "server.json")) as fh:
            info = json.load(fh)
    except (OSError, ValueError):
        return None
    return info if running(info["pid"]) else None


def post(path, obj):
    info = read_server()
    if info is None:
        print("Error: LM Studio server is not running. Start it with `lms server start`.", file=sys.stderr)
        sys.exit(1)
    req = urllib.request.Request(f"http://127.0.0.1:{info['port']}{path}", data=json.dumps(obj).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def option(args, name, default=None):
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else default


def main():
    args = sys.argv[1:]
    os.makedirs(state_dir(), exist_ok=True)
    with open(os.path.join(state_dir(), "argv.jsonl"), "a") as fh:
        fh.write(json.dumps(args) + "\n")
    if args[:2] == ["server", "start"]:
        running = read_server()
        if running:
            print(f"The server is already running on port {running['port']}.")
            return 0
        port = int(option(args, "--port", "1234"))
        log = open(os.path.join(state_dir(), "server.log"), "ab")
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_lmstudio_server.py"), "--port", str(port)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        with open(os.path.join(state_dir(), "server.json"), "w") as fh:
            json.dump({"port": port, "pid": proc.pid}, fh)
        deadline = time.time() + 10
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    print(f"Success! Server is now running on port {port}")
                    return 0
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        print(f"Error: failed to start the server on port {port}", file=sys.stderr)
        return 1
    if args[:2] == ["server", "stop"]:
        info = read_server()
        if info is None:
            print("The server is not running.")
            return 0
        os.kill(info["pid"], signal.SIGTERM)
        for _ in range(500):
            if not running(info["pid"]):
                break
            time.sleep(0.01)
        os.remove(os.path.join(state_dir(), "server.json"))
        print(f"Stopped the server on port {info['port']}.")
        return 0
    if args and args[0] == "load":
        key = args[1]
        if os.environ.get("FAKE_LMS_LOAD") == "oom":
            print(f"Error: Failed to load model {key}: insufficient system resources (out of memory)",
                  file=sys.stderr)
            return 1
        ident = option(args, "--identifier", key)
        status, answer = post("/__fake__/load", {"key": key, "identifier": ident,
                                                 "context_length": option(args, "--context-length"),
                                                 "gpu": option(args, "--gpu")})
        if status != 200:
            print(f"Error: {answer.get('error')}", file=sys.stderr)
            return 1
        print(f"Model loaded successfully as \"{ident}\".")
        return 0
    if args and args[0] == "unload":
        status, answer = post("/__fake__/unload", {"identifier": args[1]})
        if status != 200:
            print(f"Error: {answer.get('error')}", file=sys.stderr)
            return 1
        print(f"Model \"{args[1]}\" unloaded.")
        return 0
    if args and args[0] == "version":
        print("lms - LM Studio CLI - v0.0.47 (fake)")
        return 0
    print(f"Error: unknown command {' '.join(args)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
