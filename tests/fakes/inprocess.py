"""An in-process backend: the sweep's logic without processes, ports or HTTP.

``FakeBackend`` implements the backend contract (``draftbench.backends.base.Backend``) with
servers that answer instantly from a script: tokens per second per model, acceptance per draft,
failures on demand. Runner and session tests use it the way hyperfine tests its runner with a
``MockExecutor``; the real-server tests (test_cli_sweep_cli_llama.py, test_sweep_session_faults.py) keep covering the rest.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import ClassVar

from draftbench.backends.base import Backend, CountsSource, DraftCounts, Launched, LaunchSpec, Server, SpeculationStatus
from draftbench.backends.http.client import StreamedResponse
from draftbench.common.errors import ModelProblem, RequestError, ServerError, ServerErrorKind
from draftbench.results.memory import ServerMemory


@dataclass
class Script:
    """How the fake servers behave, per model path."""

    tps: dict[str, float] = field(default_factory=dict)            # target path -> tok/s alone
    speedup: dict[str, float] = field(default_factory=dict)        # draft path -> factor on the target's tok/s
    acceptance: dict[str, float] = field(default_factory=dict)     # draft path -> accepted / drafted
    missing: set[str] = field(default_factory=set)                 # model paths that "do not exist"
    fail_launch: dict[str, ServerError] = field(default_factory=dict)   # target or draft path -> launch error
    fail_request_after: dict[str, int] = field(default_factory=dict)    # draft/target path -> requests before failing
    inactive: set[str] = field(default_factory=set)                # drafts the server silently drops
    incompatible: set[str] = field(default_factory=set)            # drafts whose vocabulary differs
    interrupt_on: set[str] = field(default_factory=set)            # paths whose launch raises KeyboardInterrupt
    per_stream: dict[str, dict[int, float]] = field(default_factory=dict)  # draft/target path -> {N: tok/s factor}
    tokens: int = 64
    full_speedup: dict[str, float] = field(default_factory=dict)   # draft path -> factor at synthetic full acceptance
    k: int = 4                                                     # draft positions when draft_max is not set
    noise: dict[str, float] = field(default_factory=dict)          # draft path -> ± relative tok/s, by seed
    per_length: dict[str, dict[int, float]] = field(default_factory=dict)  # draft/target path -> {length: factor}
    trained_context: dict[str, int] = field(default_factory=dict)  # model path -> its trained context length
    prefill_tps: float = 2000.0                                    # prompt tokens per second (the target alone)
    weights_mib: dict[str, float] = field(default_factory=dict)    # model path -> MiB its weights take (default 50)
    no_counters: set[str] = field(default_factory=set)             # drafts whose server reports no draft counters
    reported_prompt_tokens: int | None = None     # long prompts: usage.prompt_tokens a lying server reports
    tokenizer_share: float = 1.0                  # a lying /tokenize: this share of the real count (0.5: half)
    per_temperature: dict[str, dict[float, float]] = field(default_factory=dict)   # draft path -> {temperature: factor}
    acceptance_at: dict[str, dict[float, float]] = field(default_factory=dict)     # draft path -> {temperature: rate}
    probabilistic: dict[float, float] = field(default_factory=dict)   # temperature -> factor with draft_sampling
    noise_at: dict[float, float] = field(default_factory=dict)        # temperature -> every draft's noise there


class WordTokenizer:
    """A stand-in for a server's tokenizer: a token per word or run of spaces, a chat template of 7 tokens."""

    vocab: ClassVar[dict[str, int]] = {}     # shared: every fake server has the same tokenizer

    @staticmethod
    def _pieces(text: str) -> list[str]:
        return re.findall(r"\s+|\S+", text)

    def tokenize(self, text: str) -> list[int]:
        return [self.vocab.setdefault(p, len(self.vocab)) for p in self._pieces(text)]

    def detokenize(self, tokens) -> str:
        words = {i: w for w, i in self.vocab.items()}
        return "".join(words[t] for t in tokens)

    def prompt_tokens(self, messages) -> int:
        return sum(len(self._pieces(m["content"])) for m in messages) + 7


class ShareTokenizer(WordTokenizer):
    """A tokenizer that counts ``share`` of the real tokens of a chat prompt (a lying ``/apply-template``)."""

    def __init__(self, share: float):
        self.share = share

    def prompt_tokens(self, messages) -> int:
        return round(super().prompt_tokens(messages) * self.share)


class FakeServer(Server):
    def __init__(self, spec: LaunchSpec, script: Script, log: list):
        command = ["fake-server", spec.target] + (["--draft", spec.draft] if spec.draft else [])
        super().__init__(f"http://fake:{spec.port}", model=spec.target,
                         launched=Launched(command=command, port=spec.port, version="fake 1.0", load_time_s=0.01))
        self.spec, self.script, self.log = spec, script, log
        self.requests = 0
        self.temperature = 0.0                 # the last request's
        self.stopped = False
        self.lock = threading.Lock()           # concurrency levels send from several threads

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        with self.lock:
            self.requests += 1
            count = self.requests
        key = self.spec.draft or self.spec.target
        limit = self.script.fail_request_after.get(key)
        if limit is not None and count > limit:
            raise RequestError("the connection broke mid-stream (fake)")
        tps = self.script.tps.get(self.spec.target, 50.0)
        if self.spec.draft and self.spec.draft not in self.script.inactive:
            tps *= self.script.speedup.get(self.spec.draft, 1.0)
            if self.synth_len is not None and self.synth_len >= self.k + 1:
                tps = self.script.tps.get(self.spec.target, 50.0) * self.script.full_speedup.get(self.spec.draft, 1.0)
        tps *= self.script.per_stream.get(key, {}).get(self.spec.concurrency, 1.0)
        tps *= self.script.per_length.get(key, {}).get(self.spec.context_tokens or 0, 1.0)
        self.temperature = float(body.get("temperature") or 0.0)
        tps *= self.script.per_temperature.get(key, {}).get(self.temperature, 1.0)
        if self.spec.params.get("draft_sampling") == "probabilistic":
            tps *= self.script.probabilistic.get(self.temperature, 1.0)
        prompt_tokens = WordTokenizer().prompt_tokens(body["messages"])
        # a draft model prefills the prompt too (at ten times the target's rate, before the first token)
        prefill_s = prompt_tokens / self.script.prefill_tps * (1.1 if self.spec.draft else 1.0)
        # a tiny per-request wobble, so confidence intervals have a width
        tps *= 1 + 0.001 * (body["seed"] % 7)
        noise = self.script.noise.get(self.spec.draft or "", self.script.noise_at.get(self.temperature))
        if self.spec.draft and noise is not None:   # a deterministic spread, so a race has to look twice
            spread = (body["seed"] * 7919 + zlib.crc32(self.spec.draft.encode())) % 11 - 5   # differs per draft
            tps *= 1 + noise * spread / 5
        start = time.perf_counter()
        n = self.script.tokens
        first = start + 0.01 + (prefill_s if self.spec.context_tokens else 0.0)
        response = StreamedResponse(t_start=start, t_first=first, t_last=first + (n - 1) / tps,
                                    t_end=first + 0.01 + (n - 1) / tps, text=f"answer to seed {body['seed'] % 1000}",
                                    usage={"completion_tokens": n, "prompt_tokens": (
                                        self.script.reported_prompt_tokens or prompt_tokens) if
                                           self.spec.context_tokens else 10}, finish_reason="length",
                                    timings={"prompt_ms": prefill_s * 1000, "prompt_per_second":
                                             prompt_tokens / prefill_s})
        return response

    def machine_reading(self):
        """None: a simulated server's speed owes nothing to the machine, so no request of it reads the machine's
        load (it did, and another test worker's load left pairs out of in-process sweeps: issue 42)."""
        return None

    def server_prefill(self, response: StreamedResponse) -> tuple[float | None, float | None]:
        prompt_ms = response.timing_rate("prompt_ms")
        return (prompt_ms / 1000 if prompt_ms is not None else None), response.timing_rate("prompt_per_second")

    def tokenizer(self) -> WordTokenizer:
        return ShareTokenizer(self.script.tokenizer_share) if self.script.tokenizer_share != 1.0 else WordTokenizer()

    def memory_use(self) -> ServerMemory:
        """A llama-server on the CPU: the models' weights, a KV cache growing with the prompts, compute buffers."""
        kv = (self.spec.context_tokens or 0) * 0.05 * (2 if self.spec.draft else 1)
        weights = sum(self.script.weights_mib.get(m, 50.0) for m in (self.spec.target, self.spec.draft) if m)
        cpu = {"model_mib": weights, "kv_mib": round(kv, 2), "compute_mib": 10.0}
        return ServerMemory(peak_rss_mib=round(50 + weights + kv, 1), kv_mib=round(kv, 2), devices={"CPU": cpu},
                            source="fake")

    @property
    def k(self) -> int:
        return self.spec.draft_max or self.script.k

    @property
    def synth_len(self) -> float | None:
        """llama.cpp's synthetic acceptance (a ceiling run): the mean accepted length asked for."""
        value = self.spec.params.get("synth_len")
        return float(value) if value is not None else None

    def draft_counts(self, response: StreamedResponse, before) -> DraftCounts:
        if not self.spec.draft or self.spec.draft in self.script.no_counters:
            return DraftCounts()
        if self.spec.draft in self.script.inactive:
            return DraftCounts(drafted=0, accepted=0, source=CountsSource.TIMINGS)
        steps = 10
        drafted = steps * self.k
        if self.synth_len is not None:
            accepted = round((self.synth_len - 1) * steps)
        else:
            rate = self.script.acceptance_at.get(self.spec.draft, {}).get(self.temperature)
            accepted = round(drafted * (rate if rate is not None else self.script.acceptance.get(self.spec.draft, 0.7)))
        # front-loaded: accepting a position needs every position before it
        per_pos = tuple(max(0, min(steps, accepted - steps * i)) for i in range(self.k))
        return DraftCounts(drafted=drafted, accepted=accepted, steps=steps, source=CountsSource.TIMINGS,
                           accepted_per_pos=per_pos)

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        return SpeculationStatus(requested, "")

    def draft_sampling(self) -> tuple[str, str] | None:
        return (self.spec.params.get("draft_sampling", "greedy"), "the fake's parameters") if self.spec.draft else None

    def stop(self) -> None:
        self.stopped = True
        self.log.append(("stop", self.spec.target, self.spec.draft))


class FakeBackend(Backend):
    name = "fake"
    config_name = "llamacpp"      # rows and resume checks behave like llama.cpp's

    def __init__(self, script: Script | None = None):
        self.script = script or Script()
        self.log: list = []
        self.servers: list[FakeServer] = []
        self.specs: list[LaunchSpec] = []

    def model_problem(self, ref: str) -> ModelProblem | None:
        if ref in self.script.missing:
            return ModelProblem(f"model file {ref} does not exist", "check the path", missing=True)
        return None

    def pair_problem(self, target: str, draft: str, method: tuple[str, ...] = ()) -> ModelProblem | None:
        if draft in self.script.incompatible:
            return ModelProblem("the draft cannot speculate for this target: token 100 differs",
                                "use a draft from the same model family")
        return None

    def size_label(self, ref: str) -> str | None:
        return None

    def side_by_side(self, settings: dict, target: str, draft: str | None) -> str | None:
        return None            # in-process servers: any number fit (the interleaved design)

    tokenizes = True

    def context_problem(self, target: str, draft: str | None, prompt_tokens: int, ctx_size: int, settings,
                        slots: int = 1) -> ModelProblem | None:
        for path in (target, draft):
            trained = self.script.trained_context.get(path or "")
            if trained is not None and ctx_size > trained:
                return ModelProblem(f"{prompt_tokens}-token prompts need -c {ctx_size}, more than the {trained} "
                                    f"{path} was trained for", f"use settings.context_tokens of at most "
                                    f"{trained - (ctx_size - prompt_tokens)}")
        return None

    def launch(self, spec: LaunchSpec) -> FakeServer:
        self.log.append(("launch", spec.target, spec.draft, spec.draft_max, spec.port))
        self.specs.append(spec)
        for path in (spec.target, spec.draft):
            if path in self.script.interrupt_on:
                raise KeyboardInterrupt
            if path in self.script.fail_launch:
                raise self.script.fail_launch[path]
        server = FakeServer(spec, self.script, self.log)
        self.servers.append(server)
        return server


def port_in_use_error() -> ServerError:
    return ServerError("port 8080 is already in use", "pick another", kind=ServerErrorKind.PORT_IN_USE)
