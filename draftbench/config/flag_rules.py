"""The one rule table for every route into a server's command or environment: a config's ``extra_args``,
``bench.py --target --`` and ``server.py --``, vLLM's ``--speculative-config`` keys (from
``settings.vllm_speculative_config`` and a candidate's ``params``), and the ``LLAMA_ARG_*`` variables of the
environment we inherit (each stands for a flag, :mod:`.server_env`).

Each rule says what a flag changes: what draftbench sets itself and records (the model, the draft, its length,
the speculation, the port, where layers run), what a setting owns (``-ngl`` is ``settings.gpu_layers``), what
changes the model or its output without a setting to record it (``--lora``, vLLM's ``--load-format``), and
what draftbench reads to prove what ran (``--no-slots`` blinds ``/slots``). A flag no rule covers is free: it
changes speed, not what is measured (``--threads``). Each command line (:class:`EntryPoint`) says which kinds
it refuses and names its own option to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class FlagKind(str, Enum):
    PORT = "port"
    HOST = "host"
    RPC = "rpc"
    TARGET = "target"
    DRAFT = "draft"
    DRAFT_LENGTH = "draft_length"
    SPECULATION = "speculation"
    CONFIG_FILE = "config_file"
    OWNED = "owned"                          # a setting owns it (rule.setting): it is recorded and checked there
    OUTPUT = "output"                        # changes the model or its output, with no setting that records it
    EVIDENCE = "evidence"                    # turns off what draftbench reads to prove what the server ran
    API_KEY = "api_key"
    DRAFT_PLACEMENT = "draft_placement"      # how the draft runs (threads, devices): allowed, like --threads


@dataclass(frozen=True)
class FlagRule:
    kind: FlagKind
    changes: str                            # what the flag changes, in words
    names: tuple[str, ...] = ()             # every spelling (llama-server's aliases, vLLM's names)
    prefixes: tuple[str, ...] = ()          # and every long flag starting with one of these
    setting: str | None = None              # OWNED: the settings key that owns it
    backends: tuple[str, ...] = ()          # the servers that read it so (empty: every one); "-n" differs


LLAMA, VLLM = ("llamacpp",), ("vllm",)


def _owned(setting: str, changes: str, *names: str, backends: tuple[str, ...] = ()) -> FlagRule:
    return FlagRule(FlagKind.OWNED, changes, names, setting=setting, backends=backends)


# The vendored llama-server (build 11434, `llama-server --help`) and vLLM 0.32 (`vllm serve --help`).
RULES: tuple[FlagRule, ...] = (
    FlagRule(FlagKind.PORT, "the port the server listens on", ("--port",)),
    FlagRule(FlagKind.HOST, "the address the server listens on", ("--host",)),
    FlagRule(FlagKind.RPC, "where the target's layers run (llama.cpp RPC endpoints)", ("--rpc",)),
    FlagRule(FlagKind.TARGET, "the model measured",
             ("-m", "--model", "-mu", "--model-url", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-dr",
              "--docker-repo", "--models-dir", "--models-preset",
              # llama-server's presets download and load a model of their own (one with a draft, too)
              "--embd-gemma-default", "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default",
              "--fim-qwen-7b-spec", "--fim-qwen-14b-spec", "--fim-qwen-30b-default", "--gpt-oss-20b-default",
              "--gpt-oss-120b-default", "--vision-gemma-4b-default", "--vision-gemma-12b-default")),
    FlagRule(FlagKind.DRAFT, "the draft model",
             ("-md", "--model-draft", "--spec-draft-model", "-hfd", "-hfrd", "--hf-repo-draft", "--spec-draft-hf",
              "--spec-model", "--speculative-model")),
    FlagRule(FlagKind.DRAFT_LENGTH, "the draft length k",
             ("--spec-draft-n-max", "--draft", "--draft-n", "--draft-max", "--spec-tokens",
              "--num-speculative-tokens")),
    FlagRule(FlagKind.DRAFT_PLACEMENT, "where and how fast the draft runs",
             ("-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft", "-devd", "--device-draft",
              "--spec-draft-device", "-td", "--threads-draft", "--spec-draft-threads", "-tbd", "--threads-batch-draft",
              "--spec-draft-threads-batch", "-ctkd", "--cache-type-k-draft", "--spec-draft-type-k", "-ctvd",
              "--cache-type-v-draft", "--spec-draft-type-v", "-otd", "--override-tensor-draft",
              "--spec-draft-override-tensor", "-Cd", "--cpu-mask-draft", "--spec-draft-cpu-mask", "-Cbd",
              "--cpu-mask-batch-draft", "--spec-draft-cpu-mask-batch", "-Crd", "--cpu-range-draft",
              "--spec-draft-cpu-range", "-Crbd", "--cpu-range-batch-draft", "--spec-draft-cpu-range-batch",
              "--cpu-strict-draft", "--spec-draft-cpu-strict", "--cpu-strict-batch-draft",
              "--spec-draft-cpu-strict-batch", "--poll-draft", "--spec-draft-poll", "--poll-batch-draft",
              "--spec-draft-poll-batch", "--prio-draft", "--spec-draft-prio", "--prio-batch-draft",
              "--spec-draft-prio-batch", "-cmoed", "--cpu-moe-draft", "--spec-draft-cpu-moe", "-ncmoed",
              "--n-cpu-moe-draft", "--spec-draft-n-cpu-moe", "--spec-draft-ncmoe")),
    FlagRule(FlagKind.SPECULATION, "how the server speculates",
             ("-sc", "--speculative-config", "--spec-type", "--spec-default", "--spec-method"),
             prefixes=("--spec-", "--draft-", "--speculative-", "--no-spec-")),
    FlagRule(FlagKind.CONFIG_FILE, "any option at all, read from a file draftbench does not check (vLLM's --config)",
             ("--config",)),
    # a setting owns these: its value is recorded with the results and a resume is checked against it
    _owned("gpu_layers", "the layers offloaded to the GPU", "-ngl", "--gpu-layers", "--n-gpu-layers",
           backends=LLAMA),
    _owned("ctx_size", "the context size", "-c", "--ctx-size", "--max-model-len"),
    _owned("concurrency", "how many requests the server serves at once", "-np", "--parallel", "--max-num-seqs"),
    _owned("max_tokens", "how long an answer may be (a request that does not say takes it)", "-n",
           "--n-predict", "--predict", backends=LLAMA),
    _owned("vllm_prefix_caching", "whether a repeated prompt skips its prefill (which flatters TTFT)",
           "--enable-prefix-caching", "--no-enable-prefix-caching", backends=VLLM),
    _owned("vllm_tensor_parallel_size", "how the model is split over GPUs", "-tp", "--tensor-parallel-size",
           backends=VLLM),
    _owned("vllm_pipeline_parallel_size", "how the model is split over GPUs", "-pp", "--pipeline-parallel-size",
           backends=VLLM),
    _owned("vllm_data_parallel_size", "how many replicas serve", "-dp", "--data-parallel-size", backends=VLLM),
    _owned("vllm_distributed_executor_backend", "how vLLM runs its workers", "--distributed-executor-backend",
           backends=VLLM),
    _owned("vllm_nnodes", "how many nodes serve", "-n", "--nnodes", backends=VLLM),
    _owned("vllm_per_request_metrics", "where acceptance is read from", "--per-request-spec-decode-metrics",
           backends=VLLM),
    FlagRule(FlagKind.OUTPUT, "the model's weights or its output, with no setting that records it",
             ("--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled", "--control-vector-layer-range",
              "--override-kv", "--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale",
              "--yarn-orig-ctx", "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast",
              "--chat-template", "--chat-template-file", "--grammar", "--grammar-file", "-j", "--json-schema",
              "-jf", "--json-schema-file", "--ignore-eos", "-l", "--logit-bias", "--repeat-penalty",
              "--presence-penalty", "--frequency-penalty",
              # vLLM
              "--load-format", "--hf-overrides", "--revision", "--code-revision", "--tokenizer",
              "--tokenizer-revision", "--quantization", "-q", "--override-generation-config", "--generation-config",
              "--hf-config-path")),
    FlagRule(FlagKind.EVIDENCE, "what the server reports about itself, which draftbench reads to prove what ran "
             "(llama-server's /slots, vLLM's /metrics counters)", ("--no-slots", "--disable-log-stats")),
    FlagRule(FlagKind.EVIDENCE, "the paths the server answers on (draftbench asks /health, /slots, /v1/…)",
             ("--api-prefix",)),
    FlagRule(FlagKind.API_KEY, "the key its clients must send", ("--api-key", "--api-key-file")),
)
# Covered flags that take no value: what follows them is an argument of its own.
SWITCHES = frozenset({"--spec-default", "--spec-draft-backend-sampling", "--cpu-strict-draft",
                      "--spec-draft-cpu-strict", "--cpu-strict-batch-draft", "--spec-draft-cpu-strict-batch",
                      "-cmoed", "--cpu-moe-draft", "--spec-draft-cpu-moe", "--enable-prefix-caching",
                      "--ignore-eos", "--disable-log-stats"})
# How argparse's cut-short long names (vLLM) are resolved when several rules match: the gravest first.
SEVERITY = (FlagKind.TARGET, FlagKind.DRAFT, FlagKind.RPC, FlagKind.CONFIG_FILE, FlagKind.DRAFT_LENGTH,
            FlagKind.SPECULATION, FlagKind.OUTPUT, FlagKind.OWNED, FlagKind.EVIDENCE, FlagKind.PORT, FlagKind.HOST,
            FlagKind.API_KEY, FlagKind.DRAFT_PLACEMENT)

# vLLM's --speculative-config keys that draftbench sets itself (from the candidate and its draft) or that change
# the draft model: the same rules hold there, whether the object comes from extra_args ("-sc"),
# settings.vllm_speculative_config or a candidate's params.
SPECULATIVE_CONFIG_KEYS: Mapping[str, FlagKind] = {
    "model": FlagKind.DRAFT, "num_speculative_tokens": FlagKind.DRAFT_LENGTH, "method": FlagKind.SPECULATION,
    "quantization": FlagKind.OUTPUT, "revision": FlagKind.OUTPUT, "code_revision": FlagKind.OUTPUT,
    "tokenizer": FlagKind.OUTPUT,
}


@dataclass(frozen=True)
class EntryPoint:
    """How one command line answers each kind of flag: refused (``instead``: the option to use), or checked
    like its own field (``--host``, ``--rpc`` behind ``allow_flag``); kinds in neither are passed on.
    ``owned``: the option to use for each setting that owns a flag (None: every one, as ``settings.KEY``);
    a setting it does not list is passed on."""

    instead: Mapping[FlagKind, str]
    allow_flag: str                     # the switch that lets a server or an endpoint leave this machine
    checks_rpc: bool = False            # --rpc held to targets[].rpc's checks (else it is in ``instead``)
    owned: Mapping[str, str] | None = None
    backend: str | None = None          # the server the arguments go to (None: a sweep's, given per check)

    def refusal(self, rule: FlagRule) -> str | None:
        """The option to use instead of a flag under ``rule``, or None when this command line passes it on."""
        if rule.kind is FlagKind.OWNED and rule.setting is not None:
            if self.owned is None:
                return f"settings.{rule.setting} instead" + (" (settings.context_tokens sizes it itself)"
                                                             if rule.setting == "ctx_size" else "")
            return self.owned.get(rule.setting)
        return self.instead.get(rule.kind)


_NO_CONFIG_FILE = "its options themselves, where each is checked"
_OUTPUT = ("nothing: a row names the model at the target's path and the answers it gave as configured (merge "
           "an adapter into a model file of its own and measure that as a target)")
_EVIDENCE = "nothing: draftbench reads it to prove what the server ran"
SWEEP = EntryPoint({
    FlagKind.PORT: "settings.port instead (0 = any free port)",
    FlagKind.RPC: "the target's \"rpc\": [\"host:port\", …] instead (draftbench probes the endpoints first and records "
                  "the split)",
    FlagKind.TARGET: "the target's \"path\" instead",
    FlagKind.DRAFT: "a \"drafts\" entry (or a candidate's \"draft\") instead",
    FlagKind.DRAFT_LENGTH: "settings.draft_max or a candidate's \"params\": {\"draft_max\": K} instead",
    FlagKind.SPECULATION: "a candidate's \"method\" and \"params\" instead (e.g. \"params\": "
                          "{\"spec_ngram_mod_n_match\": 24}; vLLM: settings.vllm_speculative_config)",
    FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
    FlagKind.OUTPUT: _OUTPUT,
    FlagKind.EVIDENCE: _EVIDENCE,
}, allow_flag="settings.allow_remote")
AB = EntryPoint({
    FlagKind.PORT: "nothing: the A/B picks a free port for each server",
    FlagKind.RPC: "a sweep config's targets[].rpc instead (draftbench probes the endpoints first and records the "
                  "split)",
    FlagKind.TARGET: "--target instead",
    FlagKind.DRAFT: "--draft instead",
    FlagKind.DRAFT_LENGTH: "--draft-max instead",
    FlagKind.SPECULATION: "--spec-type instead (other parameters: a sweep config's candidate \"params\")",
    FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
    FlagKind.OUTPUT: _OUTPUT,
    FlagKind.EVIDENCE: _EVIDENCE,
}, allow_flag="server.py --allow-remote (then bench.py --url)",
    owned={"gpu_layers": "--gpu-layers instead", "ctx_size": "--ctx-size (or --context-tokens) instead",
           "max_tokens": "--max-tokens instead", "concurrency": "nothing: the A/B measures one stream"},
    backend="llamacpp")
_SERVER_PORT = "server.py's --port instead (0 = any free port)"
SERVER = {      # server.py, by backend: its own options replace these; a server for people runs any output flag
    "llamacpp": EntryPoint({
        FlagKind.PORT: _SERVER_PORT, FlagKind.TARGET: "--model-path instead", FlagKind.DRAFT: "--draft-path instead",
        FlagKind.DRAFT_LENGTH: "--draft-max instead", FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
        FlagKind.EVIDENCE: _EVIDENCE,
    }, allow_flag="--allow-remote", checks_rpc=True,
        owned={"gpu_layers": "--gpu-layers instead", "ctx_size": "--ctx-size instead", "concurrency": "--parallel "
               "instead"}, backend="llamacpp"),
    "vllm": EntryPoint({
        FlagKind.PORT: _SERVER_PORT, FlagKind.TARGET: "--model instead", FlagKind.DRAFT: "--draft-model instead",
        FlagKind.DRAFT_LENGTH: "--num-speculative-tokens instead",
        FlagKind.SPECULATION: "--method, --draft-model and --num-speculative-tokens instead",
        FlagKind.RPC: "nothing: vLLM has no llama.cpp RPC", FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
        FlagKind.EVIDENCE: _EVIDENCE,
    }, allow_flag="--allow-remote", owned={"ctx_size": "--max-model-len instead",
                                           "vllm_per_request_metrics": "--per-request-metrics instead"},
        backend="vllm"),
    "lmstudio": EntryPoint({
        FlagKind.PORT: _SERVER_PORT, FlagKind.TARGET: "--model instead", FlagKind.DRAFT: "--draft-model instead",
        FlagKind.RPC: "nothing: LM Studio has no llama.cpp RPC", FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
    }, allow_flag="--allow-remote", owned={}, backend="lmstudio"),
}
