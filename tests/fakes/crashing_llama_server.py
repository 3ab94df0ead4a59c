"""A llama-server that loads its model and dies by SIGSEGV in its warm-up run, as the AMX build does on a CPU that
advertises AMX (issue 42, llama.cpp#20824): it prints the start-up lines b11434 prints at its default verbosity,
up to "init: llama threadpool init", then crashes. ``--help`` and ``--version`` answer as a server's do.

``FAKE_CRASH_ONLY_WITH_DRAFT=1``: it crashes only when given a draft model; otherwise (``--help`` included) it
is the real llama-server (``FAKE_REAL_LLAMA_SERVER``), so one candidate fails and the rest of the sweep runs.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time

HELP = """----- common params -----
-h,    --help, --usage                  print usage and exit
--version                               show version and build info
-m,    --model FNAME                    model path to load
-md,   --model-draft FNAME              draft model for speculative decoding (default: unused)
-c,    --ctx-size N                     size of the prompt context
-ngl,  --gpu-layers N                   max. number of layers to store in VRAM
-np,   --parallel N                     number of server slots
-nr,   --no-repack                      disable weight repacking
--host HOST                             ip address to listen
--port PORT                             port to listen (default: 8080)
"""

START_UP = """0.00.002.798 I srv  llama_server: initializing ...
0.00.004.083 I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)
0.00.018.039 I srv    load_model: loading model '{model}'
0.00.423.525 I cmn          init: llama threadpool init, n_threads = 2
"""


DRAFT_FLAGS = ("-md", "--model-draft", "--spec-draft-model")


def main(args: list[str]) -> None:
    if os.environ.get("FAKE_CRASH_ONLY_WITH_DRAFT") == "1" and not set(DRAFT_FLAGS) & set(args):
        real = os.environ["FAKE_REAL_LLAMA_SERVER"]       # its --help too: the command is built from it
        os.execv(real, [real, *args])
    if "--help" in args:
        print(HELP)
        return
    if "--version" in args:
        print("version: 0.6.0-dev (build 0, commit unknown)\nbuilt with GNU 12.2.0 for Linux x86_64")
        return
    model = args[args.index("-m") + 1] if "-m" in args else "?"
    sys.stderr.write(START_UP.format(model=model))
    sys.stderr.flush()
    time.sleep(0.2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))      # no core file from the crash below
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)


if __name__ == "__main__":
    main(sys.argv[1:])
