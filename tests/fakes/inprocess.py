"""An in-process backend: the sweep's logic without processes, ports or HTTP.

``FakeBackend`` implements the backend contract (``draftbench.backends.base.Backend``) with
servers that answer instantly from a script: tokens per second per model, acceptance per draft,
failures on demand. Runner and session tests use it the way hyperfine tests its runner with a
``MockExecutor``; the real-server tests (test_cli_sweep_cli_llama.py, test_sweep_session_faults.py) keep covering the rest.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field

from draftbench.backends.base import Backend, CountsSource, DraftCounts, LaunchSpec, Server, SpeculationStatus
from draftbench.backends.http.client import StreamedResponse
from draftbench.common.errors import ModelProblem, RequestError, ServerError, ServerErrorKind


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


class FakeServer(Server):
    def __init__(self, spec: LaunchSpec, script: Script, log: list):
        super().__init__(f"http://fake:{spec.port}", model=spec.target, command=["fake-server", spec.target]
                         + (["--draft", spec.draft] if spec.draft else []), version="fake 1.0", port=spec.port,
                         load_time_s=0.01)
        self.spec, self.script, self.log = spec, script, log
        self.requests = 0
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
        # a tiny per-request wobble, so confidence intervals have a width
        tps *= 1 + 0.001 * (body["seed"] % 7)
        if self.spec.draft in self.script.noise:   # a deterministic spread, so a race has to look twice
            spread = (body["seed"] * 7919 + zlib.crc32(self.spec.draft.encode())) % 11 - 5   # differs per draft
            tps *= 1 + self.script.noise[self.spec.draft] * spread / 5
        start = time.perf_counter()
        n = self.script.tokens
        response = StreamedResponse(t_start=start, t_first=start + 0.01, t_last=start + 0.01 + (n - 1) / tps,
                                    t_end=start + 0.02 + (n - 1) / tps, text=f"answer to seed {body['seed'] % 1000}",
                                    usage={"completion_tokens": n, "prompt_tokens": 10}, finish_reason="length")
        return response

    @property
    def k(self) -> int:
        return self.spec.draft_max or self.script.k

    @property
    def synth_len(self) -> float | None:
        """llama.cpp's synthetic acceptance (a ceiling run): the mean accepted length asked for."""
        value = self.spec.params.get("synth_len")
        return float(value) if value is not None else None

    def draft_counts(self, response: StreamedResponse, before) -> DraftCounts:
        if not self.spec.draft:
            return DraftCounts()
        if self.spec.draft in self.script.inactive:
            return DraftCounts(drafted=0, accepted=0, source=CountsSource.TIMINGS)
        steps = 10
        drafted = steps * self.k
        if self.synth_len is not None:
            accepted = round((self.synth_len - 1) * steps)
        else:
            accepted = round(drafted * self.script.acceptance.get(self.spec.draft, 0.7))
        # front-loaded: accepting a position needs every position before it
        per_pos = tuple(max(0, min(steps, accepted - steps * i)) for i in range(self.k))
        return DraftCounts(drafted=drafted, accepted=accepted, steps=steps, source=CountsSource.TIMINGS,
                           accepted_per_pos=per_pos)

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        return SpeculationStatus(requested, "")

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
