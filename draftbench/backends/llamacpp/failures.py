"""Why llama-server exited before it was ready, named from its log (patterns checked on build 11434)."""

from __future__ import annotations

from ...common.errors import ServerError, ServerErrorKind
from ..exit_reasons import explain_exit_from_log

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


def explain_exit(returncode: int | None, log_tail: str, port: int, log_path: str | None) -> ServerError:
    return explain_exit_from_log(_FAILURES, "llama-server", "see the log lines below; a corrupt model or an "
                                 "assertion in llama.cpp are the usual causes", returncode, log_tail, port, log_path)
