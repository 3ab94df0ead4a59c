"""The context axis in a sweep: each target's long prompts, built before any measured server starts.

The prompts are cut with the target's own tokenizer, on a server of the target alone started for
that and stopped at once (``/tokenize``, ``/detokenize``, ``/apply-template``: it never generates, so
no server sees an answer before it is measured). Then each length runs as a sweep of its own: the
design's passes on that length's prompts, with ``-c`` sized to fit (``CombinationRunner.ctx_size``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..analysis.context_length import at_length
from ..analysis.context_length import lengths as context_lengths
from ..analysis.decision import decide
from ..common.errors import ModelProblem, Problem, ResultsFileError, UsageError
from ..config.long_documents import LONG_CATEGORIES, LONG_TASKS, sources_of
from ..config.long_prompts import LongPromptBuilder, server_context
from ..config.model_ref import ModelRef
from ..config.prompt import Prompt
from ..results.file import ResultsFile
from ..results.kinds import Role
from .config_file import SweepConfig
from .plan import Combination, candidates
from .runner import CombinationRunner, log_slug
from .store import RowStore

TOKENIZER_CTX = 512      # the tokenizer server generates nothing: a small KV cache is enough


@dataclass(frozen=True)
class LongPrompts:
    by_length: dict[int, list[Prompt]]
    record: dict                 # filler, sources, each prompt's token count (results' prompt_set.context)


def build(runner: CombinationRunner, target: ModelRef, lengths: tuple[int, ...], *, filler: str,
          seed: int) -> LongPrompts:
    """``target``'s long prompts at every length, cut with its own server's tokenizer."""
    combo = Combination(Role.BASELINE, target)
    spec = runner.launch_spec(combo, 0, runner.logs_dir / f"tokenizer-{log_slug(target.label)}.log")
    spec = replace(spec, ctx_size=TOKENIZER_CTX, port=runner.choose_port(spec.host))
    runner.reporter.note(f"{target.label}: cutting long prompts to {', '.join(f'{n:,}' for n in lengths)} tokens "
                         "with its own tokenizer (a server that generates nothing)")
    server = runner.launch(spec)
    try:
        tokenizer = server.tokenizer()
        if tokenizer is None:
            raise UsageError(f"the {runner.backend_name} backend's server has no tokenizer to cut long prompts with",
                             "use backend llamacpp for settings.context_tokens")
        builder = LongPromptBuilder(tokenizer, filler=filler, seed=seed)
        built = {n: builder.prompts(n) for n in lengths}
    finally:
        server.stop()
    return LongPrompts({n: [p.prompt for p in items] for n, items in built.items()}, builder.record(built))


def length_problems(config: SweepConfig, backend_problem: Callable[..., ModelProblem | None], max_tokens: int,
                    lengths: tuple[int, ...], slots: int = 1) -> list[Problem]:
    """Every (target, draft, length) a model cannot take, before any server starts: ``backend_problem`` is
    the backend's ``context_problem``; the fix names the longest length that fits."""
    problems: list[Problem] = []
    pairs = [(t, None, None) for t in config.targets] + [(t, c.draft, c.draft_max) for t in config.targets
                                                         for c in candidates(config) if c.draft is not None]
    seen: set[tuple] = set()
    for target, draft, draft_max in pairs:
        for n in lengths:
            key = (target.path, draft.path if draft else None, n)
            if key in seen:
                continue
            seen.add(key)
            found = backend_problem(target.path, draft.path if draft else None, n,
                                    server_context(n, max_tokens, draft_max), config.settings, slots)
            if found is not None:
                who = f"target {target.label!r}" + (f" with draft {draft.label!r}" if draft else "")
                problems.append(Problem("$.settings.context_tokens", f"{n:,}: {who}: {found.message}", found.fix))
                break              # longer lengths fail for the same reason
    return problems


def changed_sources(record: dict | None, prompts: LongPrompts) -> str | None:
    """Why prompts built now differ from those a results file measured (a source file with another sha256:
    another Python's standard library, another wheel), or None: resumed rows must have met the same prompts."""
    return _source_change(record, prompts.record["sources"])


def changed_documents(record: dict | None) -> str | None:
    """:func:`changed_sources` from the documents alone, before any server starts or the results file is
    rewritten: a resume refused for other long prompts leaves the file as it was."""
    then = ((record or {}).get("context") or {}).get("sources")
    if not then:
        return None
    return _source_change(record, {s.name: s.origin for task in LONG_TASKS for s in sources_of(task)})


def _source_change(record: dict | None, now: dict[str, dict]) -> str | None:
    then = ((record or {}).get("context") or {}).get("sources") or {}
    for name, origin in now.items():
        old = then.get(name)
        if isinstance(old, dict) and old.get("sha256") != origin.get("sha256"):
            return (f"the long prompts' source {name} has sha256 {origin.get('sha256')} now and {old.get('sha256')} "
                    "in the results file" + (f" (Python {origin['python']} now, {old.get('python')} then)"
                                             if "python" in origin else ""))
    return None


def prompt_set_record(record: dict | None, built: dict[str, LongPrompts]) -> dict:
    """The results' ``prompt_set`` for long prompts: their ids and categories, and per target what each
    prompt measured in tokens, with the filler and the sources (sha256, licence, Python version)."""
    first = next(iter(built.values()))
    then = (record or {}).get("context") or {}
    ids = [p.id for n in sorted(first.by_length) for p in first.by_length[n]]
    return {**(record or {}), "ids": ids, "categories": list(LONG_CATEGORIES), "sources": {},
            "context": {"filler": first.record["filler"],
                        "sources": {**(then.get("sources") or {}),
                                    **{k: v for b in built.values() for k, v in b.record["sources"].items()}},
                        "targets": {**(then.get("targets") or {}),
                                    **{label: b.record["prompts"] for label, b in built.items()}}}}


def prompts_by_length(store: RowStore, runner: CombinationRunner, target: ModelRef, prompts: list[Prompt],
                      more: int) -> list[tuple[int | None, list[Prompt]]]:
    """The prompts each prompt length of ``target`` measures: the sweep's own without a context axis; else the
    target's long prompts, cut with its own tokenizer and recorded in the results (none when every length of
    the target is measured and decided already: a resumed sweep does not start a server to cut them again)."""
    settings = runner.settings
    lengths = context_lengths(settings)
    if not lengths:
        return [(None, list(prompts))]
    if _settled(store.current(), target.label, lengths, more):
        return []
    built = build(runner, target, lengths, filler=settings.context_filler, seed=settings.seed)
    record = store.current().prompt_set
    changed = changed_sources(record, built)
    if changed:
        raise ResultsFileError(f"the results file was measured on other long prompts: {changed}",
                               "use --results with a new file name, or the Python that made the file")
    store.describe_prompts(prompt_set_record(record, {target.label: built}))
    return [(n, built.by_length[n]) for n in lengths]


def _settled(results: ResultsFile, label: str, lengths: tuple[int, ...], more: int) -> bool:
    rows = [r for r in results.rows_of(label) if r.context_tokens is not None]
    if {r.context_tokens for r in rows if r.measured} != set(lengths) or not all(r.measured for r in rows):
        return False
    return all(d.final(more) for n in lengths for d in decide(at_length(results, n)).values())
