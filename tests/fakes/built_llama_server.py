"""The llama-server tests/fakes/fake_cmake.py "builds": it serves ``/health`` and ``/completion`` as the real one
does for tools/llama_build.py's smoke check — unless it was built natively (no ``-DGGML_NATIVE=OFF``) and
``FAKE_NATIVE_CRASHES=1``: then it dies by SIGSEGV at warm-up, as llama.cpp's AMX kernels do (llama.cpp#20824).
Every start is counted in ``$FAKE_CMAKE_LOG``."""

from __future__ import annotations

import json
import os
import sys

from crashing_llama_server import main as crash


def main(args: list[str]) -> None:
    configured = json.loads(os.environ["FAKE_CONFIGURED"])
    if "--version" in args:
        print("version: 0.6.0-dev (build 0, commit unknown)")
        return
    if "--help" in args:
        print("-m,    --model FNAME    model path\n--port PORT    port to listen")
        return
    with open(os.environ["FAKE_CMAKE_LOG"], "a") as fh:
        fh.write(json.dumps({"started": configured}) + "\n")
    if os.environ.get("FAKE_NATIVE_CRASHES") == "1" and "-DGGML_NATIVE=OFF" not in configured:
        crash(args)
        return
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fakes.http_stub import StubServer
    port = int(args[args.index("--port") + 1])
    StubServer({"GET /health": (200, {"status": "ok"}),
                "POST /completion": (200, {"content": " Paris.", "tokens_predicted": 8})}, port=port).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
