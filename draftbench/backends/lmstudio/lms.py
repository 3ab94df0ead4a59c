"""LM Studio's ``lms`` CLI, and what both ways of reaching LM Studio share (port, identifier, log).

Facts this relies on (LM Studio documentation; see docs/backends.md): one server per machine
(default port 1234); ``lms server start --port N`` starts it and returns, ``lms server stop``
stops it; ``lms load KEY --identifier ID --context-length N --gpu off|max|0-1`` loads a model and
``lms unload ID`` unloads it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

from ...common.errors import BinaryNotFoundError, ServerError, ServerErrorKind
from ...common.files import open_for_append
from ...common.redact_secrets import command_line
from ...config.settings import Settings
from ...lifetime.capture import run_capped
from ...lifetime.process import tail_file
from ..base import LaunchSpec
from ..executables import find_executable
from .settings import LMStudioSettings

LMS_OUTPUT_MAX_BYTES = 16 * 10**6    # what one lms command may print before it is stopped
IDENTIFIER = "draftbench-target"      # the identifier we give the target in LM Studio (lms load / the SDK)

HOW_TO_GET = ("install LM Studio and its CLI (`npx lmstudio install-cli`, or run ~/.lmstudio/bin/lms bootstrap), "
              "or set settings.lms_bin / --lms-bin to the `lms` executable")


def find_lms(explicit: str | None = None) -> str | None:
    """Locate ``lms``: explicit path (must exist), $DRAFTBENCH_LMS, PATH, ~/.lmstudio/bin. None if absent."""
    exe = "lms.exe" if sys.platform == "win32" else "lms"
    return find_executable("lms", explicit, env_var="DRAFTBENCH_LMS", setting="settings.lms_bin / --lms-bin",
                           how_to_get=HOW_TO_GET, candidates=(Path.home() / ".lmstudio" / "bin" / exe,))


def gpu_value(settings: Settings) -> str:
    """``lms load --gpu``: settings.lmstudio_gpu, else off for gpu_layers 0 and max otherwise."""
    explicit = LMStudioSettings.of(settings).lmstudio_gpu
    if explicit:
        return str(explicit)
    return "off" if settings.gpu_layers == 0 else "max"


def load_command(lms: str, spec: LaunchSpec) -> list[str]:
    """The exact ``lms load`` command for a combination's target."""
    return [lms, "load", spec.target, "--identifier", IDENTIFIER, "--context-length", str(spec.ctx_size),
            "--gpu", gpu_value(spec.settings), *spec.extra_args]



class LMStudioLog:
    """Our own log for LM Studio (its server is not our child): every lms command or SDK call, and its output."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, text: str) -> None:
        try:     # never through a symlink planted in the logs folder
            fd = open_for_append(self.path)
        except OSError:
            return
        try:
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError:
            pass


def run_lms(cmd: list[str], log: LMStudioLog, timeout_s: float) -> subprocess.CompletedProcess:
    log.write("$ " + command_line(cmd))
    try:    # what lms prints is read up to a cap: a CLI that never stops printing cannot fill our memory
        run = run_capped(cmd, timeout_s=timeout_s, max_bytes=LMS_OUTPUT_MAX_BYTES)
    except OSError as exc:
        raise BinaryNotFoundError(f"cannot run {cmd[0]}: {exc}", HOW_TO_GET) from None
    if run.output.strip():
        log.write(run.output)
    if run.timed_out:
        log.write(f"(no answer within {timeout_s:g} s)")
        raise ServerError(f"`{' '.join(cmd[1:3])}` did not finish within {timeout_s:g} s",
                          "check LM Studio (is it waiting for a dialog?), or raise settings.startup_timeout_s",
                          log_path=str(log.path), kind=ServerErrorKind.TIMEOUT)
    if run.over_cap:
        log.write(f"(stopped: printed more than {LMS_OUTPUT_MAX_BYTES // 10**6} MB)")
        raise ServerError(f"`{' '.join(cmd[1:3])}` printed more than {LMS_OUTPUT_MAX_BYTES // 10**6} MB and was "
                          "stopped", "check the lms installation (run the command yourself)", log_path=str(log.path),
                          kind=ServerErrorKind.INSTALL)
    log.write(f"(exit code {run.returncode})")
    return subprocess.CompletedProcess(cmd, run.returncode if run.returncode is not None else -1, run.output, "")



def quietly(action) -> None:
    try:
        action()
    except Exception:   # cleanup must not hide the real outcome; the log has the details
        pass



LOAD_FAILURES = (
    (r"out of memory|insufficient|not enough memory|exceeds.*memory|guardrail", ServerErrorKind.OOM,
     "LM Studio could not load {target}: not enough memory",
     "lower settings.ctx_size, set settings.lmstudio_gpu to a fraction such as \"0.5\", or use a smaller quantisation"),
    (r"not found|no model|cannot find|could not find|unknown model", ServerErrorKind.MODEL, "LM Studio has no model {target!r}",
     "use a model key from `lms ls`"),
)



def load_failure(proc: subprocess.CompletedProcess, target: str, log: LMStudioLog) -> ServerError:
    output = (proc.stdout or "") + (proc.stderr or "")
    for pattern, kind, message, fix in LOAD_FAILURES:
        if re.search(pattern, output, re.IGNORECASE):
            return ServerError(message.format(target=target) + f" (`lms load` exit code {proc.returncode})", fix,
                               log_tail=log_tail(log), log_path=str(log.path), kind=kind)
    return ServerError(f"`lms load {target}` failed (exit code {proc.returncode})", "see the log lines below",
                       log_tail=log_tail(log), log_path=str(log.path), kind=ServerErrorKind.MODEL)


def check_models(available: Collection[str], spec: LaunchSpec, log: LMStudioLog) -> None:
    """The target and the draft are among the model keys LM Studio lists, or a named error."""
    for ref, kind in ((spec.target, ServerErrorKind.MODEL), (spec.draft, ServerErrorKind.DRAFT_MODEL)):
        if ref is not None and ref not in available:
            known = ", ".join(sorted(available)[:12]) or "none"
            raise ServerError(f"LM Studio has no model {ref!r}", f"use a model key from `lms ls` (LM Studio "
                              f"lists: {known})", log_path=str(log.path), kind=kind)


def log_tail(log: LMStudioLog, lines: int = 20) -> str:
    return tail_file(log.path, lines)
