"""The analysis looks at every row a fixed number of times, however many targets a file holds (issue 28:
a per-target scan of all rows made a 50k-row file take minutes). Counted, not timed."""

from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row


class CountedName(str):
    """A target's name counting how often it is compared (a scan of every row for one target compares
    every row's name; an index looks it up by hash)."""

    comparisons = 0

    def __eq__(self, other):
        CountedName.comparisons += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        CountedName.comparisons += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


def _requests(tps: float, drafted: int) -> tuple[RequestRecord, ...]:
    return tuple(RequestRecord(prompt_id=f"p{i}", category="code", run=run, ttft_s=0.05, total_s=round(64 / tps, 4),
                               decode_tps=round(tps * (1 + (i - run) / 50), 3), prompt_tokens=20,
                               completion_tokens=64, draft_n=drafted, draft_n_accepted=drafted // 2,
                               finish_reason="length", text="x = 1\n")
                 for i in range(3) for run in range(2))


def _file(targets: int) -> ResultsFile:
    rows: list[Row] = []
    for t in range(targets):
        base = 20.0 + t % 5
        rows.append(Row(target=CountedName(f"T{t}"), role="baseline", mean_tps=base, requests=_requests(base, 0)))
        for k in (2, 4):
            tps = base * (1.1 + k / 100)
            rows.append(Row(target=CountedName(f"T{t}"), draft="d", role="speculative", draft_max=k, mean_tps=tps,
                            acceptance_rate=0.5, speculation_active=True, draft_n=120, draft_n_accepted=60,
                            requests=_requests(tps, 20)))
    results = ResultsFile(name="scale", hardware="h", backend="llamacpp", model_family="f", settings={},
                          results=tuple(rows))
    return results


def _comparisons_per_row(targets: int) -> float:
    results = _file(targets)
    CountedName.comparisons = 0
    analyze(results)
    return CountedName.comparisons / len(results.results)


def test_the_analysis_compares_each_row_as_often_for_forty_targets_as_for_five():
    few, many = _comparisons_per_row(5), _comparisons_per_row(40)
    # linear work reads each row a fixed number of times; a scan of every row per target 8x as often
    assert many <= few * 1.5, f"each row's target compared {few:.0f} times for 5 targets, {many:.0f} for 40: a scan per target"


