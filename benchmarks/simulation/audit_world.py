"""A second noise model, written apart from :mod:`world` (issue 43's audit), so that the guarantees are checked
on a machine the first model's author did not imagine. Run it with ``benchmarks/verdicts.py --world
simulation.audit_world:session3`` (or ``session5``) and ``--prompts 96``.

It takes from the trial only each candidate's truth on prompts like these (``truth.population``: what the
scoring compares with) and the grid's candidates; everything else it draws itself, with its own code:

* a prompt's difficulty (log sd 12%), shared by every server that answers it;
* correlated prompt × candidate effects: a prompt's *draftability* z (one per prompt) moves every draft
  together — each candidate's log effect is 6% × (0.7 z + 0.71 w), w its own per prompt — around the
  candidate's truth;
* a per-server session effect (log sd 3% or 5%: :func:`session3`, :func:`session5`), drawn at each launch;
* request noise: Student-t with 3 degrees of freedom, scaled to a 3% sd, and 2% of requests slowed to 0.6×;
* drift: 2% per simulated half hour, and a 4% step at a time drawn in the first 40 minutes;
* other programs' CPU share read around every request (0.01–0.05), so the pairing's rule is live; a
  candidate with its own helper load (``Cand.helper_rate``: a process outside its server's tree) adds the
  helper's share to its requests and runs them ``helper_factor`` times as fast — its truth includes that;
* counters consistent with the truth: a request's speed-up never exceeds tokens / (tokens − accepted).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from draftbench.backends.base import Backend, CountsSource, DraftCounts, Launched, LaunchSpec, Server, SpeculationStatus
from draftbench.backends.http.client import StreamedResponse
from draftbench.config.prompts import Prompt
from draftbench.measure.sequential import request_seed

STEP_WITHIN_S = 2400.0


@dataclass(frozen=True)
class Noise:
    session_sd: float
    request_sd: float = 0.03
    tail_df: int = 3
    outlier_rate: float = 0.02
    outlier_factor: float = 0.6
    difficulty_sd: float = 0.12
    effect_sd: float = 0.06
    draftability: float = 0.7          # the share of a candidate's per-prompt effect (as a loading) all drafts share
    drift_per_half_hour: float = 0.02
    step: float = 0.04
    load_s: float = 4.0
    base_tps: float = 28.0


class AuditBackend(Backend):
    """The backend contract over this model's machine: every launch is a new server session."""

    name = "audit"
    config_name = "llamacpp"
    owns_port = False

    def __init__(self, noise: Noise, grid, truth, names: dict, prompts: Sequence[Prompt], rng: random.Random,
                 seed: int = 42):
        self.noise, self.names, self.rng = noise, names, rng
        self.now = 0.0
        self.step_at = rng.uniform(0.0, STEP_WITHIN_S)
        self.prompt_of = {request_seed(seed, run, i): i for i in range(len(prompts)) for run in range(-1, 64)}
        n = len(prompts)
        self.difficulty = [math.exp(rng.gauss(0.0, noise.difficulty_sd)) for _ in range(n)]
        draftable = [rng.gauss(0.0, 1.0) for _ in range(n)]
        rest = math.sqrt(1.0 - noise.draftability ** 2)
        self.cands = {c.name: c for c in grid.candidates}
        self.gain: dict[str, list[float]] = {}
        for c in grid.candidates:
            centre = truth.population[c.name] / (c.helper_factor ** c.helper_rate if c.helper_rate else 1.0)
            self.gain[c.name] = [centre * math.exp(noise.effect_sd * (noise.draftability * z + rest * rng.gauss(0, 1)))
                                 for z in draftable]

    def clock(self) -> float:
        return self.now

    def model_problem(self, ref: str):
        return None

    def size_label(self, ref: str) -> str | None:
        return None

    def launch(self, spec: LaunchSpec) -> AuditServer:
        candidate = self.names[(spec.draft, tuple(spec.method))] if (spec.draft or spec.method) else ""
        self.now += self.noise.load_s
        return AuditServer(spec, self, candidate)

    def machine_speed(self) -> float:
        n = self.noise
        return (1.0 + n.drift_per_half_hour * self.now / 1800.0) * (1.0 + n.step if self.now >= self.step_at else 1.0)

    def request_noise(self) -> float:
        n, rng = self.noise, self.rng
        chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(n.tail_df))
        t = rng.gauss(0, 1) / math.sqrt(chi2 / n.tail_df)
        factor = math.exp(n.request_sd * t / math.sqrt(n.tail_df / (n.tail_df - 2)))
        return factor * (n.outlier_factor if rng.random() < n.outlier_rate else 1.0)


class AuditServer(Server):
    def __init__(self, spec: LaunchSpec, owner: AuditBackend, candidate: str):
        super().__init__("http://audit", model=spec.target,
                         launched=Launched(command=["audit", candidate or "target"], port=spec.port, version="audit",
                                           load_time_s=owner.noise.load_s))
        self.owner, self.candidate = owner, candidate
        self.session = math.exp(owner.rng.gauss(0.0, owner.noise.session_sd))
        self.prompt = 0
        self.share = 0.0

    def machine_reading(self) -> None:
        return None

    def others_share(self, first) -> float:
        return self.share

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        owner, rng = self.owner, self.owner.rng
        self.prompt = owner.prompt_of.get(body["seed"], 0)
        tps = owner.noise.base_tps * owner.difficulty[self.prompt] * self.session * owner.machine_speed()
        tps *= owner.request_noise()
        self.share = rng.uniform(0.01, 0.05)
        own = owner.cands.get(self.candidate)
        if own is not None:
            tps *= owner.gain[self.candidate][self.prompt]
            if own.helper_rate and (own.helper_rate >= 1.0 or rng.random() < own.helper_rate):
                tps *= own.helper_factor
                self.share = min(1.0, self.share + own.helper_share)
        n = body["max_tokens"]
        start = owner.now
        first = start + 0.08
        owner.now = first + (n - 1) / tps + 0.002
        return StreamedResponse(t_start=start, t_first=first, t_last=owner.now - 0.002, t_end=owner.now,
                                text="answer", usage={"completion_tokens": n, "prompt_tokens": 24},
                                finish_reason="length")

    def draft_counts(self, response: StreamedResponse, before) -> DraftCounts:
        own = self.owner.cands.get(self.candidate)
        if own is None:
            return DraftCounts()
        n = response.completion_tokens or 0
        bound = max(1.2, 1.25 * self.owner.gain[self.candidate][self.prompt])     # a verify step's cost on top
        accepted = min(n - 1, round(n * (1 - 1 / bound)))
        drafted = max(accepted, round(accepted / max(0.05, own.acceptance)))
        return DraftCounts(drafted=drafted, accepted=accepted, steps=n - accepted, source=CountsSource.TIMINGS)

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        return SpeculationStatus(requested, "")

    def stop(self) -> None:
        pass


def session3(grid, truth, names: dict, prompts: Sequence[Prompt], rng: random.Random) -> Backend:
    """The audit's model with a 3% per-server session effect."""
    return AuditBackend(Noise(session_sd=0.03), grid, truth, names, prompts, rng)


def session5(grid, truth, names: dict, prompts: Sequence[Prompt], rng: random.Random) -> Backend:
    """The audit's model with a 5% per-server session effect."""
    return AuditBackend(Noise(session_sd=0.05), grid, truth, names, prompts, rng)
