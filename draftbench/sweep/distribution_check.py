"""The output-distribution check at temperature > 0, run on servers of its own (``settings.distribution_samples``).

After a target's stages at a temperature above 0, a server of the target alone and then one per measured candidate
each answer a few prompts many times (short answers, one seed each), and :mod:`draftbench.analysis.output_distribution`
tests whether the candidate's answers come from the target's distribution. Why it is built so:

* **its own servers, after the measurement**: repeating a prompt on one server is what a stateful n-gram method
  (``ngram-mod``) learns from — it would replay earlier answers as drafts — so the repeats never reach a server
  that is measured for speed, and nothing here becomes a request record;
* **disjoint seeds**: the target alone's answers use one range of seeds and every candidate's another, so a greedy
  drafter cannot reproduce the target's answers seed for seed (which would flatter the test into a match);
* **the candidate must draft**: its drafted and accepted tokens during the check are recorded, and a candidate that
  drafted nothing is *not checked* (its answers were the target's own sampling);
* **a fixed seed reproduces the target**: the target alone answers its first prompt twice with one seed, and the
  record says whether the two answers matched (what a seeded baseline promises).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..analysis.output_distribution import check, describe
from ..backends.base import Server
from ..common.errors import DraftbenchError
from ..common.numbers import temperature_text
from ..config.prompts import Prompt
from ..measure.sequential import MeasureOptions, measure_one
from ..results.file import Row
from ..results.kinds import Role
from .launcher import Launcher, LaunchFailed
from .plan import Combination
from .store import RowStore
from .target_plan import TargetPlan

PROMPTS = 3                # a few prompts, one per category where the set has several
TOKENS = 8                 # each answer's length: its first three words are what is compared
TARGET_SEEDS = 1_000_000   # the target alone's answers use seeds from here …
CANDIDATE_SEEDS = 2_000_000   # … and every candidate's from here


def check_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    """The prompts the check asks: the first of each category, in order, then the next ones, up to :data:`PROMPTS`."""
    firsts = list({p.category: p for p in reversed(prompts)}.values())[::-1]
    rest = [p for p in prompts if p not in firsts]
    return (firsts + rest)[:PROMPTS]


@dataclass
class Sampled:
    answers: dict[str, list[str]]
    drafted: int | None = None
    accepted: int | None = None
    reproducible: bool | None = None     # the target alone: one seed twice gave one answer


def sample(launcher: Launcher, combo: Combination, prompts: Sequence[Prompt], options: MeasureOptions, samples: int,
           first_seed: int) -> Sampled:
    """``samples`` answers to each prompt from a server of ``combo``'s own, stopped after."""
    session = launcher.open(combo)
    try:
        return sample_server(session.server, prompts, options, samples, first_seed,
                             reproduce=combo.candidate is None)
    finally:
        launcher.stop(session)


def sample_server(server: Server, prompts: Sequence[Prompt], options: MeasureOptions, samples: int, first_seed: int,
                  *, reproduce: bool = False) -> Sampled:
    """``samples`` answers to each prompt (the prompts taken in turn, one seed each); ``reproduce``: then the first
    prompt again with the first seed (the target alone: a fixed seed must give the same answer)."""
    found = Sampled({p.id: [] for p in prompts})
    for i in range(samples):
        for j, prompt in enumerate(prompts):
            record = measure_one(server, prompt, options, seed=first_seed + i * len(prompts) + j, max_tokens=TOKENS)
            found.answers[prompt.id].append(record.text or "")
            if record.draft_n is not None:
                found.drafted = (found.drafted or 0) + record.draft_n
                found.accepted = (found.accepted or 0) + (record.draft_n_accepted or 0)
    if reproduce and prompts and samples:
        again = measure_one(server, prompts[0], options, seed=first_seed, max_tokens=TOKENS)
        found.reproducible = (again.text or "") == found.answers[prompts[0].id][0]
    return found


def run_check(launcher: Launcher, baseline: Combination, candidates: Sequence[tuple[Combination, Row]],
              prompts: Sequence[Prompt], options: MeasureOptions, samples: int) -> list[Row]:
    """Each candidate's row with its ``output_distribution`` (or why it was not made)."""
    chosen = check_prompts(prompts)
    try:
        target = sample(launcher, baseline, chosen, options, samples, TARGET_SEEDS)
    except (LaunchFailed, DraftbenchError) as exc:
        why = f"the target alone's server for the check failed: {str(exc).splitlines()[0]}"
        return [replace(row, output_distribution={"checked": False, "reason": why, "temperature": options.temperature})
                for _, row in candidates]
    out = []
    for combo, row in candidates:
        try:
            mine = sample(launcher, combo, chosen, options, samples, CANDIDATE_SEEDS)
        except (LaunchFailed, DraftbenchError) as exc:
            found = {"checked": False, "reason": f"its server for the check failed: {str(exc).splitlines()[0]}",
                     "temperature": options.temperature}
        else:
            found = check(target.answers, mine.answers, temperature=options.temperature, max_tokens=TOKENS,
                          drafted=mine.drafted, accepted=mine.accepted, reproducible=target.reproducible, seed=options.seed)
        out.append(replace(row, output_distribution=found))
    return out


def check_target(launcher: Launcher, store: RowStore, plan: TargetPlan, options: MeasureOptions, samples: int) -> None:
    """After a target's stages: each candidate measured there and not checked yet gets its check (saved with its
    row), and the console says what each found."""
    results = store.current()
    todo = [(combo, row) for combo in plan.candidates.values() if combo.role is Role.SPECULATIVE
            and (row := results.row(combo.key)) is not None and row.measured and row.output_distribution is None]
    if not todo:
        return
    launcher.reporter.note(f"{plan.label}: the output-distribution check at temperature {temperature_text(options.temperature)} — "
                           f"{samples} answers to each of {len(check_prompts(plan.prompts))} prompts from the target "
                           f"alone and from each of {len(todo)} candidate(s), on servers of their own")
    for (combo, _), row in zip(todo, run_check(launcher, plan.baseline, todo, plan.prompts, options, samples)):
        store.record(row)
        launcher.reporter.note(f"{plan.label} — {combo.name}: {describe(row.output_distribution)}")
