"""A stand-in ``cmake`` for tools/get-llama-server.sh's tests: no compiler runs, and the "built" llama-server
behaves as the CMake arguments it was configured with would on a CPU whose AMX kernels crash.

``cmake -S SRC -B DIR ARGS…`` records ARGS (one configure per line in ``$FAKE_CMAKE_LOG``);
``cmake --build DIR …`` writes ``DIR/bin/llama-server`` and ``DIR/bin/ggml-rpc-server``. The llama-server it
writes is ``tests/fakes/built_llama_server.py``, told the arguments of the last configure: with
``FAKE_NATIVE_CRASHES=1`` in its environment, a build without ``-DGGML_NATIVE=OFF`` dies by SIGSEGV at warm-up.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(args: list[str]) -> int:
    log = Path(os.environ["FAKE_CMAKE_LOG"])
    if "--build" in args:
        folder = Path(args[args.index("--build") + 1])
        bin_dir = folder / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        configured = (folder / "configured.json").read_text()
        server = bin_dir / "llama-server"
        server.write_text(f"#!/bin/sh\nFAKE_CONFIGURED={shlex.quote(configured)} exec {shlex.quote(sys.executable)} "
                          f"{shlex.quote(str(HERE / 'built_llama_server.py'))} \"$@\"\n")
        rpc = bin_dir / "ggml-rpc-server"
        rpc.write_text("#!/bin/sh\nexit 0\n")
        for path in (server, rpc):
            path.chmod(0o755)
        with open(log, "a") as fh:
            fh.write(json.dumps({"build": str(folder)}) + "\n")
        return 0
    folder = Path(args[args.index("-B") + 1])
    folder.mkdir(parents=True, exist_ok=True)
    configured = [a for a in args if a.startswith("-D")]
    (folder / "configured.json").write_text(json.dumps(configured))
    with open(log, "a") as fh:
        fh.write(json.dumps({"configure": configured}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
