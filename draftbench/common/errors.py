"""Errors that reach the user. Each names the cause, where it happened, and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class DraftbenchError(Exception):
    """An expected failure with a message for a person, not a traceback."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}\n  Fix: {self.fix}" if self.fix else self.message


@dataclass(frozen=True)
class Problem:
    """One problem in a config file: where (a JSON path such as ``$.settings.runs``), what, and the fix."""

    path: str
    message: str
    fix: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" + (f" — {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class ModelProblem:
    """Why a model cannot be used before any server starts. ``missing``: the file is not there yet
    (skipped, so adding it and resuming measures it) rather than broken (an error)."""

    message: str
    fix: str | None = None
    missing: bool = False

    def __str__(self) -> str:
        return self.message + (f" — fix: {self.fix}" if self.fix else "")


class ConfigError(DraftbenchError):
    exit_code = 2

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = list(problems)
        n = len(self.problems)
        lines = [f"{source}: {n} problem{'s' if n != 1 else ''} in the config (nothing was started)"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))

    def __str__(self) -> str:
        return self.message


class UsageError(DraftbenchError):
    exit_code = 2


class ModelFileError(DraftbenchError):
    def __init__(self, path: str, problem: str, fix: str | None = None):
        self.path = path
        self.problem = problem
        super().__init__(f"model file {path} {problem}", fix)


class BinaryNotFoundError(DraftbenchError):
    pass


class ServerErrorKind(str, Enum):
    """Why a server failed. A ``str`` enum, so a kind is written to results files as its plain value."""

    SERVER = "server"              # exited while loading, cause not recognised
    PORT_IN_USE = "port_in_use"    # the port was taken (the sweep retries elsewhere)
    MODEL = "model"                # the target could not be loaded
    DRAFT_MODEL = "draft_model"    # the draft could not be loaded or is incompatible
    FLAGS = "flags"                # the binary rejected an argument
    OOM = "oom"
    CRASH = "crash"                # killed by a signal
    BINARY = "binary"              # the binary cannot run on this machine (another CPU's build, AMX kernels): all fail
    DIED = "died"                  # exited during the benchmark
    TIMEOUT = "timeout"            # never became ready
    FOREIGN = "foreign"            # the port answers, but not as the server we started
    AUTH = "auth"                  # the server wants a token we do not have
    UNREACHABLE = "unreachable"
    DEVICE = "device"              # no usable accelerator
    INSTALL = "install"            # the server's installation is broken
    LEFTOVER = "leftover"          # a server from an earlier crashed run still runs (nothing else started)


class ServerError(DraftbenchError):
    """The server failed to start, died, or misbehaved. ``log_tail`` holds its last log lines."""

    def __init__(self, message: str, fix: str | None = None, log_tail: str = "", log_path: str | None = None,
                 kind: ServerErrorKind = ServerErrorKind.SERVER):
        super().__init__(message, fix)
        self.log_tail = log_tail
        self.log_path = log_path
        self.kind = ServerErrorKind(kind)

    def __str__(self) -> str:
        text = super().__str__()
        if self.log_tail:
            text += "\n  Last lines of the server log" + (f" ({self.log_path})" if self.log_path else "") + ":\n"
            text += "\n".join("    | " + line for line in self.log_tail.splitlines())
        return text


class RequestError(DraftbenchError):
    """A benchmark request failed (HTTP error, stall, malformed stream)."""


class ResultsFileError(DraftbenchError):
    pass
