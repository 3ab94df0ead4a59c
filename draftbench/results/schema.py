"""The type of every value in a results file, declared once and checked on load.

A results file is read back to resume a sweep, to chart it and to compare it; a value of the
wrong type (``"draft_max": "eight"``, ``"server": "llama"``) would otherwise surface as a
traceback deep in the analysis or the report. :func:`first_problem` walks the whole file once
(O(size)) against the declarations below and returns the JSON path of the first bad value.
Keys not declared here (unknown keys, kept and written back) may hold any JSON, nested at most
:data:`MAX_FREE_DEPTH` deep, so that saving the file again cannot exhaust the stack.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..config.settings import COMMON_SETTINGS
from .kinds import CEILING_LEVELS, ROLES, STATUSES

MAX_FREE_DEPTH = 32



class Spec:
    """One declared type. ``check`` returns ``(json_path, message)`` for the first bad value, or None."""

    nullable: bool = True

    def describe(self) -> str:
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        raise NotImplementedError

    def check(self, value: Any, path: str) -> tuple[str, str] | None:
        if value is None:
            return None if self.nullable else (path, f"must be {self.describe()}, not null")
        if not self.accepts(value):
            return path, f"must be {self.describe()}{' or null' if self.nullable else ''}, not {describe_value(value)}"
        return self.check_inside(value, path)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        return None


@dataclass(frozen=True)
class Str(Spec):
    nullable: bool = True
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"one of {', '.join(map(repr, self.choices))}" if self.choices else "a string"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and (not self.choices or value in self.choices)


@dataclass(frozen=True)
class Int(Spec):
    nullable: bool = True

    def describe(self) -> str:
        return "an integer"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Num(Spec):
    nullable: bool = True

    def describe(self) -> str:
        return "a finite number"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Bool(Spec):
    nullable: bool = True

    def describe(self) -> str:
        return "true or false"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec
    nullable: bool = True

    def describe(self) -> str:
        return f"a list of {self.item.describe()}s" if isinstance(self.item, (Str, Int)) and not \
            getattr(self.item, "choices", ()) else "a list"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for i, item in enumerate(value):
            problem = self.item.check(item, f"{path}[{i}]")
            if problem:
                return problem
        return None


@dataclass(frozen=True)
class Obj(Spec):
    """An object with declared keys; other keys hold anything (``rest``)."""

    fields: dict[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    nullable: bool = True
    rest: Spec | None = None

    def describe(self) -> str:
        return "an object"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for key in self.required:
            if key not in value:
                return f"{path}.{key}", "is missing"
        for key, item in value.items():
            spec = self.fields.get(key, self.rest or FREE)
            problem = spec.check(item, f"{path}.{key}")
            if problem:
                return problem
        return None


@dataclass(frozen=True)
class MapOf(Spec):
    """An object whose keys are names chosen by the data (prompt categories, statistics)."""

    value: Spec
    nullable: bool = True

    def describe(self) -> str:
        return "an object"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for key, item in value.items():
            problem = self.value.check(item, f"{path}.{key}")
            if problem:
                return problem
        return None


@dataclass(frozen=True)
class OneOf(Spec):
    options: tuple[Spec, ...]
    nullable: bool = True

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def accepts(self, value: Any) -> bool:
        return any(o.accepts(value) for o in self.options)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        spec = next(o for o in self.options if o.accepts(value))
        return spec.check_inside(value, path)


@dataclass(frozen=True)
class Free(Spec):
    """Any JSON value, nested at most ``max_depth`` deep (checked without recursion)."""

    max_depth: int = MAX_FREE_DEPTH

    def describe(self) -> str:
        return "any JSON value"

    def accepts(self, value: Any) -> bool:
        return True

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        stack: list[tuple[Any, int]] = [(value, 0)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list)):
                if depth >= self.max_depth:
                    return path, f"is nested more than {self.max_depth} levels deep"
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)
        return None


def describe_value(value: Any) -> str:
    """A short description of a JSON value for a message (never the whole of a big one)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    text = json.dumps(value, ensure_ascii=True)
    kind = {str: "string", int: "integer", float: "number"}.get(type(value), type(value).__name__)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


FREE = Free()
STR, INT, NUM, BOOL = Str(), Int(), Num(), Bool()


def _setting_spec(kind: str) -> Spec:
    return {"int": INT, "float": NUM, "bool": BOOL, "str": STR, "str_list": ListOf(Str(nullable=False)),
            "int_or_list": OneOf((Int(), ListOf(Int(nullable=False))))}.get(kind, FREE)


SETTINGS = Obj({key: _setting_spec(f.kind) for key, f in COMMON_SETTINGS.items()})
STAT_SUMMARY = MapOf(NUM)            # n, mean, median, stdev, cv, min, max, p95, ci95_low, ci95_high
BY_CATEGORY = MapOf(Obj({"n": INT, "mean_tps": NUM, "acceptance_rate": NUM}))
# a speed-up.Speedup: every one ever written has a ratio
SPEEDUP = Obj({"ratio": Num(nullable=False), "percent": NUM, "ci95_low": NUM, "ci95_high": NUM, "significant": BOOL,
               "method": STR, "n_pairs": INT, "noise_floor": NUM, "note": STR, "question": STR, "se_log": NUM,
               "df": NUM, "prompts": INT, "sessions": INT}, required=("ratio",))
EQUIVALENCE = Obj({"checked": BOOL, "reason": STR, "compared": INT, "matched": INT, "match_rate": NUM,
                   "mismatches": ListOf(Obj({"prompt_id": STR, "run": INT, "char_pos": INT, "baseline_len": INT,
                                             "candidate_len": INT, "baseline_excerpt": STR,
                                             "candidate_excerpt": STR}, nullable=False))})
THEORY = Obj({"formula": STR, "alpha": NUM, "k_mean": NUM, "tokens_per_step": NUM, "tokens_per_step_source": STR,
              "cost_ratio": NUM, "cost_source": STR, "predicted_speedup": NUM, "best_k": INT,
              "predicted_at_best_k": NUM, "measured_speedup": NUM})
# per speculative implementation (method_stats.py): counters, durations and derived figures
METHOD_FIGURES = Obj({"acceptance_rate": NUM, "mean_accepted_len": NUM, "requests": INT,
                      "accepted_per_pos": ListOf(Num(nullable=False)), "acc_rate_per_pos": ListOf(Num(nullable=False))},
                     rest=NUM, nullable=False)
METHOD_STATS = MapOf(METHOD_FIGURES)
DEGENERATE = Obj({"looping_requests": INT, "requests": INT, "prompts": ListOf(Str(nullable=False)),
                  "max_loop_share": NUM, "limit": NUM, "speedup_without_loops": SPEEDUP})
SERVER = Obj({"backend": STR, "command": OneOf((ListOf(Str(nullable=False)), Str())), "version": STR, "log": STR,
              "port": INT, "log_tail": STR})
REQUEST = Obj({"prompt_id": Str(nullable=False), "category": Str(nullable=False), "run": Int(nullable=False),
               "ttft_s": NUM, "total_s": NUM, "decode_tps": NUM, "server_decode_tps": NUM, "server_ttft_s": NUM,
               "prompt_tokens": INT,
               "completion_tokens": INT, "draft_n": INT, "draft_n_accepted": INT, "verify_steps": INT,
               "accepted_per_pos": ListOf(Int(nullable=False)),
               "draft_source": STR, "draft_details": Obj({"methods": METHOD_STATS}), "draft_fragments": STR,
               "finish_reason": STR, "text": STR, "error": STR, "session": STR, "block": INT, "seen_before": BOOL,
               "compared_with": ListOf(Str(nullable=False))},
              required=("prompt_id", "category", "run"), nullable=False)
# schema 1 files hold warnings as text; schema 2 as findings (see findings.py)
FINDING = Obj({"code": STR, "message": Str(nullable=False), "setting": STR}, required=("message",), nullable=False)
# schema 3: inside a draft (perpos.py, kpredict.py, ceiling.py)
ACCEPTED_PER_POS = ListOf(Int(nullable=False))
DIAGNOSIS = Obj(FINDING.fields, required=FINDING.required)
K_PREDICTION = Obj({
    "from_k": Int(nullable=False), "times": Str(choices=("server", "client")), "target_s_per_token": NUM,
    "cost_per_drafted_token_s": NUM, "drafted_per_step": NUM, "baseline_tps": NUM,
    "per_k": ListOf(Obj({"k": Int(nullable=False), "tokens_per_step": NUM, "predicted_tps": Num(nullable=False),
                         "predicted_speedup": NUM, "measured_tps": NUM, "error_pct": NUM},
                        required=("k", "predicted_tps"), nullable=False), nullable=False),
    "recommended_k": INT, "recommended_tps": NUM, "mean_abs_error_pct": NUM, "compared": INT, "text": STR,
}, required=("from_k", "per_k"))
SYNTHETIC = Obj({"level": Str(nullable=False, choices=CEILING_LEVELS), "synth_len": NUM, "k": INT,
                 "from_mean_accepted_len": NUM}, required=("level",))
CEILING = Obj({"full_tps": NUM, "full_speedup": SPEEDUP, "at_measured_tps": NUM, "at_measured_speedup": SPEEDUP,
               "reach": NUM, "full_synth_len": NUM, "measured_synth_len": NUM, "text": STR})
DESIGN = Obj({"name": STR, "drift_prone": BOOL, "blocks": INT, "sessions": INT, "stateful": BOOL})
INTERVAL = Obj({"ratio": NUM, "low": NUM, "high": NUM, "requests": INT})
COUNTER_BOUND = Obj({"ratio": NUM, "requests": INT, "excess": INTERVAL, "no_drafts": INTERVAL,
                     "speed_changed": BOOL, "text": STR})
RACE = Obj({"loads": INT, "requests": INT, "planned": INT, "probe": INT, "decision": STR, "method": STR,
            "bound": Obj({"ratio": NUM, "low": NUM, "high": NUM, "n_pairs": INT, "error": NUM})})
# a concurrency level's Row.load (see measure_concurrent.describe_level)
PERCENTILES = Obj({"n": INT, "p50": NUM, "p90": NUM, "p99": NUM})
LEVEL_SERVER = Obj({"slots": ListOf(Obj({"id": INT, "n_ctx": INT}, nullable=False)), "busy_slots_max": INT,
                    "busy_slots_per_decode": NUM, "window": MapOf(NUM), "request_sums": MapOf(NUM),
                    "checks": MapOf(Obj({"server": NUM, "requests": NUM, "match": BOOL})), "consistent": BOOL})
LOAD = Obj({"streams": INT, "requests": INT, "window_s": NUM, "output_tokens": INT, "aggregate_tps": NUM,
            "in_flight_max": INT, "in_flight_mean": NUM, "ttft_s": PERCENTILES, "total_s": PERCENTILES,
            "stream_tps": PERCENTILES, "server": LEVEL_SERVER,
            "timeline": ListOf(Obj({"prompt_id": STR, "run": INT, "stream": INT, "start_s": NUM, "end_s": NUM},
                                   nullable=False))})
# LM Studio SDK: where drafted fragments landed (draftbench/results/fragments.py summarize)
DRAFT_FRAGMENTS = Obj({"requests": INT, "tokens": INT, "drafted_tokens": INT, "drafted_share": NUM, "runs": INT,
                       "mean_run_tokens": NUM, "max_run_tokens": INT, "run_lengths": MapOf(INT),
                       "drafted_share_by_quarter": ListOf(NUM)})
CANDIDATE = Obj({"label": STR, "method": ListOf(Str(nullable=False)), "draft": STR, "params": MapOf(FREE)})
ROW = Obj({
    # upstream's keys
    "target": Str(nullable=False), "draft": STR, "mean_tps": NUM, "median_tps": NUM, "mean_ttft": NUM,
    "mean_total_time": NUM, "wall_time": NUM, "acceptance_rate": NUM,
    "error": STR,                        # upstream's failure marker
    # draftbench's
    "status": Str(nullable=False, choices=STATUSES), "reason": STR, "role": Str(nullable=False, choices=ROLES),
    "draft_max": INT, "target_path": STR, "draft_path": STR, "speculation_active": BOOL, "draft_n": INT,
    "draft_n_accepted": INT, "verify_steps": INT, "mean_accepted_len": NUM, "draft_fragments": DRAFT_FRAGMENTS, "tps": STAT_SUMMARY,
    "server_tps": STAT_SUMMARY, "ttft_s": STAT_SUMMARY, "total_s": STAT_SUMMARY, "load_time_s": NUM,
    "run_to_run_cv": NUM, "by_category": BY_CATEGORY, "speedup": SPEEDUP,
    "speedup_by_category": MapOf(SPEEDUP), "method_stats": METHOD_STATS, "degenerate_output": DEGENERATE, "equivalence": EQUIVALENCE,
    "theory": THEORY, "warnings": ListOf(OneOf((Str(nullable=False), FINDING), nullable=False)), "server": SERVER,
    "started_at": STR, "candidate": CANDIDATE, "active_methods": ListOf(Str(nullable=False)),
    "race": RACE, "requests": ListOf(REQUEST), "concurrency": Int(nullable=False), "load": LOAD,
    "accepted_per_pos": ACCEPTED_PER_POS, "diagnosis": DIAGNOSIS, "k_prediction": K_PREDICTION,
    "synthetic": SYNTHETIC, "ceiling": CEILING, "design": DESIGN, "counter_bound": COUNTER_BOUND,
}, required=("target",), nullable=False)
# per target: the verdict's schema-3 additions (the rest of the summary is recomputed on load)
SUMMARY = Obj({"targets": ListOf(Obj({"no_draft_can_pay": BOOL,
                                      "k_prediction": Obj({"from_k": INT, "recommended_k": INT,
                                                           "recommended_tps": NUM, "mean_abs_error_pct": NUM,
                                                           "compared": INT})}, nullable=False))})
MODEL_ENTRY = Obj({"label": Str(nullable=False), "path": Str(nullable=False)}, required=("label", "path"),
                  nullable=False)
RESULTS_FILE = Obj({
    "timestamp": STR, "name": STR, "hardware": STR, "backend": STR,     # null: "unnamed", "unknown"
    "model_family": STR, "settings": SETTINGS, "schema_version": INT, "tool": STR, "tool_version": STR,
    "config": Obj({"source": STR, "targets": ListOf(MODEL_ENTRY), "drafts": ListOf(MODEL_ENTRY),
                   "measurement": Obj({})}),
    "host": Obj({"os": STR, "machine": STR, "python": STR, "cpu_count": INT, "cpu": STR, "memory_gb": NUM}),
    "summary": SUMMARY,
    "redacted_paths": BOOL,              # a copy written by sweep.py --redact-paths
    "results": ListOf(ROW, nullable=False),
}, required=("results",), nullable=False)


def first_problem(data: Any) -> tuple[str, str] | None:
    """``(json_path, message)`` of the first value in a parsed results file that has the wrong type."""
    return RESULTS_FILE.check(data, "$")
