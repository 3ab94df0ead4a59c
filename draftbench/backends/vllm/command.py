"""How vLLM is found and started, and what its failures and counters look like: the command for one
combination (``vllm serve TARGET --speculative-config JSON``), the log patterns that name a failed start,
and the Prometheus counter names. Facts and sources: docs/backends.md."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ...common.errors import BinaryNotFoundError, ServerError, ServerErrorKind
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

_HOW_TO_GET = ("install vLLM on this machine (`pip install vllm`), activate the environment that has it, "
               "or set settings.vllm_bin / --vllm-bin to the `vllm` executable")


def find_vllm(explicit: str | None = None) -> str:
    """Locate the ``vllm`` executable: explicit path, $DRAFTBENCH_VLLM, PATH, next to this Python."""
    found = find_executable("vllm", explicit, env_var="DRAFTBENCH_VLLM", setting="settings.vllm_bin / --vllm-bin",
                            how_to_get=_HOW_TO_GET,
                            # a virtualenv that is used but not activated
                            candidates=(Path(sys.executable).parent / "vllm",))
    if found is None:
        raise BinaryNotFoundError("the vllm executable was not found (searched PATH and this Python's bin folder)",
                                  _HOW_TO_GET)
    return found


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


def build_command(binary: str, spec: LaunchSpec) -> list[str]:
    """The exact ``vllm serve`` command for one combination."""
    cmd = [binary, "serve", spec.target, "--host", spec.host, "--port", str(spec.port),
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
