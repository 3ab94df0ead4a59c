"""An outside noise model, written against the backend contract alone — the kind ``benchmarks/verdicts.py
--world MODULE:FACTORY`` runs the guarantees on (``--world simulation.outside_world:factory``).

It shares nothing with :mod:`world` but the truth it is given: its servers answer at the truth's speed
times a log-normal session offset (2.5%), a Laplace request noise (3%) and a machine that slows by 4% in
bursts; draft counters follow the truth's bound. A factory gets (grid, truth, candidate names by (draft
path, methods), prompts, rng) and returns a backend; a ``clock`` attribute makes the sweep run on its time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from draftbench.backends.base import Backend, CountsSource, DraftCounts, Launched, LaunchSpec, Server, SpeculationStatus
from draftbench.backends.http.client import StreamedResponse
from draftbench.config.prompts import Prompt
from draftbench.measure.sequential import request_seed

from .world import Grid, Truth


class _Server(Server):
    def __init__(self, spec: LaunchSpec, owner: OutsideBackend, candidate: str):
        super().__init__("http://outside", model=spec.target,
                         launched=Launched(command=["outside", candidate or "target"], port=spec.port,
                                           version="outside", load_time_s=3.0))
        self.owner, self.candidate = owner, candidate
        self.offset = math.exp(owner.rng.gauss(0, 0.025))
        owner.now += 3.0
        self.prompt = 0

    def machine_reading(self) -> None:
        return None               # an outside world: not this machine's load

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        owner = self.owner
        self.prompt = owner.prompt_of.get(body["seed"], 0)
        tps = owner.truth.base_tps[self.prompt] * self.offset
        if self.candidate:
            tps *= owner.truth.speedup[self.candidate][self.prompt]
        laplace = owner.rng.expovariate(1 / 0.03) * (1 if owner.rng.random() < 0.5 else -1)
        tps *= math.exp(laplace) * (0.96 if int(owner.now / 600) % 2 else 1.0)     # slower every other 10 minutes
        n = body["max_tokens"]
        start = owner.now
        owner.now = start + 0.05 + (n - 1) / tps + 0.001
        return StreamedResponse(t_start=start, t_first=start + 0.05, t_last=owner.now - 0.001, t_end=owner.now,
                                text="answer", usage={"completion_tokens": n, "prompt_tokens": 20}, finish_reason="length")

    def draft_counts(self, response: StreamedResponse, before) -> DraftCounts:
        if not self.candidate:
            return DraftCounts()
        n = response.completion_tokens or 0
        accepted = round(n * (1 - 1 / self.owner.truth.bound[self.candidate][self.prompt]))
        return DraftCounts(drafted=max(accepted, round(accepted / 0.6)), accepted=accepted, steps=n - accepted,
                           source=CountsSource.TIMINGS)

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        return SpeculationStatus(requested, "")

    def stop(self) -> None:
        pass


class OutsideBackend(Backend):
    name = "outside"
    config_name = "llamacpp"
    owns_port = False

    def __init__(self, truth: Truth, names: dict, prompts: Sequence[Prompt], rng: random.Random, seed: int = 42):
        self.truth, self.names, self.rng = truth, names, rng
        self.now = 0.0
        self.prompt_of = {request_seed(seed, run, i): i for i in range(len(prompts)) for run in range(64)}

    def clock(self) -> float:
        return self.now

    def model_problem(self, ref: str):
        return None

    def size_label(self, ref: str) -> str | None:
        return None

    def side_by_side(self, settings, target: str, draft: str | None) -> str | None:
        return None

    def launch(self, spec: LaunchSpec) -> _Server:
        candidate = self.names[(spec.draft, tuple(spec.method))] if (spec.draft or spec.method) else ""
        return _Server(spec, self, candidate)


def factory(grid: Grid, truth: Truth, names: dict, prompts: Sequence[Prompt], rng: random.Random) -> Backend:
    return OutsideBackend(truth, names, prompts, rng)
