"""Intervals worth printing, and said the right way round (issue 25): per-category figures from too few
requests say "too few requests to tell"; a slower change inverts its interval with its point."""

from __future__ import annotations

from draftbench.analysis.categories import best_per_category, category_sentence
from draftbench.analysis.stats import describe_subset, speedup, too_few_to_tell
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.results.speedup import Speedup
from draftbench.share.compare.text import describe_change
from draftbench.share.compare.view import Change


def test_two_requests_are_too_few_to_tell():
    two = speedup({("a", 0): 10.0, ("b", 0): 11.0}, {("a", 0): 5.0, ("b", 0): 30.0}, noise_floor=0.02)
    assert two.n_pairs == 2 and too_few_to_tell(two)
    assert describe_subset(two) == "too few requests to tell (2 pairs)"
    wide = Speedup(ratio=1.75, ci95_low=0.04, ci95_high=74.0, significant=False, method="paired-t-log", n_pairs=5)
    assert too_few_to_tell(wide)                  # "+74.8% [-95.9%, +7300.2%]" is not worth printing
    useful = Speedup(ratio=1.2, ci95_low=1.1, ci95_high=1.3, significant=True, method="paired-t-log", n_pairs=6)
    assert not too_few_to_tell(useful) and describe_subset(useful).startswith("+20.0% [+10.0%, +30.0%]")


def _rows(per_category_requests: int) -> tuple[Row, ...]:
    def reqs(factor_by_cat):
        return tuple(RequestRecord(f"{cat}{i}", cat, 0, decode_tps=50 * f * (1 + 0.01 * i), draft_n=10,
                                   draft_n_accepted=5, text="x")
                     for cat, f in factor_by_cat.items() for i in range(per_category_requests))
    return (Row(target="T", role="baseline", mean_tps=50, requests=reqs({"code-edit": 1, "chat": 1})),
            Row(target="T", draft="ngram-mod", role="speculative", mean_tps=60, speculation_active=True,
                requests=reqs({"code-edit": 2.0, "chat": 0.7})),
            Row(target="T", draft="135M", role="speculative", mean_tps=55, speculation_active=True,
                requests=reqs({"code-edit": 1.1, "chat": 1.4})))


def test_per_category_verdicts_from_two_requests_are_not_printed():
    results = analyze(ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="", settings={},
                                  results=_rows(2)))
    best = best_per_category(results, "T")
    assert best["code-edit"].to_dict() == {"candidate": None, "too_few": True, "looping": False}
    sentence = category_sentence(best)
    assert "%" not in sentence            # no interval from two requests anywhere
    assert "per prompt type" not in verdicts_of(results)[0].verdict    # no best to name per category
    assert verdicts_of(results)[0].run_by_category == ()      # nothing to run per category
    # with enough requests the per-category best is named, with its interval
    results = analyze(ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="", settings={},
                                  results=_rows(6)))
    best = best_per_category(results, "T")
    assert best["code-edit"].candidate == "ngram-mod" and best["chat"].candidate == "135M"
    assert "for code-edit: ngram-mod (+" in category_sentence(best)


def test_a_slower_change_inverts_its_interval_with_its_point():
    slower = Speedup(ratio=0.524, ci95_low=0.44, ci95_high=0.62, significant=True, method="paired-t-log", n_pairs=8)
    text = describe_change(Change(1, 0, slower, paired=True))
    assert text == "1.91x slower [1.61x, 2.27x]"
    faster = Speedup(ratio=1.1, ci95_low=1.05, ci95_high=1.15, significant=True, method="paired-t-log", n_pairs=8)
    assert describe_change(Change(1, 0, faster, paired=True)) == "1.10x faster [1.05x, 1.15x]"


def test_two_files_of_one_hardware_name_get_distinct_legends():
    from draftbench.report.compare_figures import legend_names
    from draftbench.share.compare import compare
    from draftbench.share.compare.match import ComparedFile

    results = analyze(ResultsFile(name="n", hardware="box", backend="llamacpp", model_family="", settings={},
                                  results=_rows(3)))
    files = [ComparedFile("A", "/r/monday.json", results), ComparedFile("B", "/r/tuesday.json", results)]
    assert legend_names(compare(files)) == ["A: monday.json (box)", "B: tuesday.json (box)"]
