"""Why llama-server exited before it was ready, named from its log (patterns checked on build 11434)."""

from __future__ import annotations

import re
import signal

from ...common.cpu_flags import has_amx
from ...common.errors import ServerError, ServerErrorKind
from ..exit_reasons import explain_exit_from_log, signal_name

RPC_LOST = r"Remote RPC server crashed or returned malformed response|Failed to connect to \S+|RPC handshake failed[^\n]*"
RPC_LOST_FIX = ("restart the ggml-rpc-server at that endpoint (python server.py rpc-server --port N on its host) and run "
                "the same command again: rows that failed are measured then")

_FAILURES = (
    # (regex on the log, kind, message, fix)
    (RPC_LOST, ServerErrorKind.UNREACHABLE, "an RPC endpoint stopped answering while llama-server loaded", RPC_LOST_FIX),
    (r"couldn't bind HTTP server socket", ServerErrorKind.PORT_IN_USE, "port {port} is already in use",
     "stop the program using it, or set settings.port to another port (0 = any free port)"),
    (r"the argument has been removed", ServerErrorKind.FLAGS, "this llama-server rejected a removed flag",
     "remove it from extra_args; the log line below names its replacement"),
    (r"error: invalid argument|unknown argument", ServerErrorKind.FLAGS, "this llama-server does not know one of the arguments",
     "check extra_args against `llama-server --help`"),
    (r"failed to load draft model|failed to load the draft", ServerErrorKind.DRAFT_MODEL, "llama-server could not load the draft",
     "check the draft file (corrupt or incomplete download?)"),
    (r"invalid magic|not within the file bounds|failed to open GGUF|failed to read|model is corrupted|"
     r"unknown model architecture|error loading model", ServerErrorKind.MODEL, "llama-server could not load the model",
     "check the model file (corrupt, incomplete, or an architecture this llama.cpp build does not know)"),
    (r"out of memory|failed to allocate|cudaMalloc failed|unable to allocate|ErrorOutOfDeviceMemory|"
     r"insufficient memory", ServerErrorKind.OOM, "llama-server ran out of memory",
     "lower settings.gpu_layers or settings.ctx_size, or use a smaller quantisation"),
)


# The last lines llama-server logs before its warm-up run (b11434): "init: llama threadpool init" at the default
# verbosity, "warming up the model with an empty run" at -lv 4; "model loaded" once it is over.
_WARM_UP = re.compile(r"warming up the model|llama threadpool init")
AMX_MESSAGE = "llama.cpp's AMX kernels crash on this CPU (llama.cpp#20824)"
AMX_FIX = ("add `-- --no-repack` to the command (in a sweep: \"--no-repack\" in settings.extra_args), or rebuild "
           "without AMX (`make llama-server` does)")


def at_warm_up(log_tail: str) -> bool:
    """Did llama-server stop in its warm-up run, after loading the model and before it was ready?"""
    lines = [line for line in log_tail.splitlines() if line.strip()]
    warm = [i for i, line in enumerate(lines) if _WARM_UP.search(line)]
    return bool(warm) and not any("model loaded" in line for line in lines[warm[-1]:])


def known_crash(number: int, log_tail: str) -> tuple[str, str, ServerErrorKind] | None:
    """The crashes llama-server's signal and log name: a binary built for another CPU (an illegal instruction),
    and ggml's AMX kernels at the warm-up run on a CPU that advertises AMX (llama.cpp#20824). Both fail every
    server this binary starts here (kind BINARY)."""
    if number == signal.SIGILL:
        return (f"llama-server crashed ({signal_name(number)}: an illegal instruction): it was built for another CPU",
                "rebuild it on this machine (`make llama-server` builds one and proves it with a generation), or "
                "use a build made for this CPU", ServerErrorKind.BINARY)
    if number in (signal.SIGSEGV, signal.SIGBUS) and at_warm_up(log_tail) and has_amx():
        return (f"llama-server crashed ({signal_name(number)}) in its warm-up run: {AMX_MESSAGE}", AMX_FIX,
                ServerErrorKind.BINARY)
    if at_warm_up(log_tail):
        return (f"llama-server crashed ({signal_name(number)}) in its warm-up run, its first computation on the "
                "loaded model", "see the log lines below; a build made for another machine, or a bug in llama.cpp "
                "(try the model with a build of llama.cpp made here: `make llama-server`)", ServerErrorKind.CRASH)
    return None


def explain_exit(returncode: int | None, log_tail: str, port: int, log_path: str | None) -> ServerError:
    return explain_exit_from_log(_FAILURES, "llama-server", "see the log lines below; a corrupt model or an "
                                 "assertion in llama.cpp are the usual causes", returncode, log_tail, port, log_path,
                                 known_crash)
