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

    def quick(self, value: Any) -> bool:
        """True when ``value`` is certainly fine, decided in one call (scalars): containers walk through
        :meth:`check`, which also builds the JSON path, only then (a results file holds millions of values)."""
        return False

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

    def quick(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return type(value) is str and (not self.choices or value in self.choices)


@dataclass(frozen=True)
class Bounded(Spec):
    """A number within physical sense: ``low``..``high`` (None: no bound), ``unit`` for the message."""

    nullable: bool = True
    low: float | None = None
    high: float | None = None
    unit: str = ""

    def within(self, value: Any) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        if self.within(value):
            return None
        unit = f" {self.unit}" if self.unit else ""
        shown = _number(value) + ("" if _number(value).startswith("a ") else unit)
        if self.low is not None and value < self.low:
            return path, f"is {shown}; it is never below {_number(self.low)} (the file was edited?)"
        return path, (f"is {shown}, more than {_number(self.high or 0)}{unit}, which no measurement reaches (the "
                      "file was edited, or a broken figure was saved)")


def _number(value: float) -> str:
    if isinstance(value, int) and abs(value) >= 10**18:
        return f"a {len(str(abs(value)))}-digit number"
    text = f"{value:,}" if isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e16) else f"{value:g}"
    return text.removesuffix(".0")


@dataclass(frozen=True)
class Int(Bounded):
    def describe(self) -> str:
        return "an integer"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def quick(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        low, high = self.low, self.high
        return type(value) is int and (low is None or value >= low) and (high is None or value <= high)


@dataclass(frozen=True)
class Num(Bounded):
    def describe(self) -> str:
        return "a finite number"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    def quick(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        kind, low, high = type(value), self.low, self.high
        # value - value == 0 is False for NaN and ±inf
        return ((kind is float or kind is int) and value - value == 0 and (low is None or value >= low)
                and (high is None or value <= high))


@dataclass(frozen=True)
class Bool(Spec):
    nullable: bool = True

    def describe(self) -> str:
        return "true or false"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)

    def quick(self, value: Any) -> bool:
        return self.nullable if value is None else type(value) is bool


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
        spec = self.item
        quick = spec.quick
        for i, item in enumerate(value):
            if quick(item):
                continue
            problem = spec.check(item, f"{path}[{i}]")
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

    def __post_init__(self) -> None:
        # each key's one-call check, looked up once per value rather than through its spec; and which keys
        # may be null, so that a null (a third of a results file's values) costs no call at all
        object.__setattr__(self, "_quick", {key: spec.quick for key, spec in self.fields.items()})
        object.__setattr__(self, "_nullable", {key: spec.nullable for key, spec in self.fields.items()})

    def describe(self) -> str:
        return "an object"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for key in self.required:
            if key not in value:
                return f"{path}.{key}", "is missing"
        quick_of: dict = self._quick      # type: ignore[attr-defined]
        nullable: dict = self._nullable   # type: ignore[attr-defined]
        other = self.rest or FREE
        other_quick, other_nullable = other.quick, other.nullable
        for key, item in value.items():
            if item is None:
                if nullable.get(key, other_nullable):
                    continue
            elif quick_of.get(key, other_quick)(item):
                continue
            problem = self.fields.get(key, other).check(item, f"{path}.{key}")
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
        spec = self.value
        quick = spec.quick
        for key, item in value.items():
            if quick(item):
                continue
            problem = spec.check(item, f"{path}.{key}")
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

    def quick(self, value: Any) -> bool:
        return (value is None and self.nullable) or any(o.quick(value) for o in self.options)

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

    def quick(self, value: Any) -> bool:
        return not isinstance(value, (dict, list))

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
# Physical bounds on what was measured (the same as a live server's figures are held to, see
# backends/http/server_values.py): a value beyond them is a broken counter or an edited file.
MAX_TOKENS = 10**8                   # tokens in one request
MAX_TOKENS_PER_SECOND = 10**7        # no hardware decodes faster, even a batch of tiny models on a GPU
MAX_SECONDS = 10**7                  # 116 days: longer than any request, load or combination
MAX_TOKEN_SUM = 10**12               # tokens summed over a combination's requests
RATE = Num(low=0, high=MAX_TOKENS_PER_SECOND, unit="tok/s")
SECONDS = Num(low=0, high=MAX_SECONDS, unit="s")
TOKENS = Int(low=0, high=MAX_TOKENS, unit="tokens")
TOKEN_SUM = Int(low=0, high=MAX_TOKEN_SUM, unit="tokens")
COUNT = Int(low=0, high=MAX_TOKEN_SUM)
FRACTION = Num(low=0, high=1)
NON_NEGATIVE = Num(low=0)


def _setting_spec(kind: str) -> Spec:
    return {"int": INT, "float": NUM, "bool": BOOL, "str": STR, "str_list": ListOf(Str(nullable=False)),
            "int_or_list": OneOf((Int(), ListOf(Int(nullable=False))))}.get(kind, FREE)


SETTINGS = Obj({key: _setting_spec(f.kind) for key, f in COMMON_SETTINGS.items()})
# n, mean, median, stdev, cv, min, max, p95, ci95_low, ci95_high (a CI's low end may be below 0)
RATE_SUMMARY = MapOf(Num(low=-MAX_TOKENS_PER_SECOND, high=MAX_TOKENS_PER_SECOND, unit="tok/s"))
TIME_SUMMARY = MapOf(Num(low=-MAX_SECONDS, high=MAX_SECONDS, unit="s"))
BY_CATEGORY = MapOf(Obj({"n": COUNT, "mean_tps": RATE, "acceptance_rate": FRACTION}))
# a speed-up.Speedup: every one ever written has a ratio
SPEEDUP = Obj({"ratio": Num(nullable=False, low=0, high=10**6), "percent": Num(low=-100, high=10**8), "ci95_low": NUM, "ci95_high": NUM, "significant": BOOL,
               "method": STR, "n_pairs": INT, "noise_floor": NUM, "note": STR}, required=("ratio",))
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
               "ttft_s": SECONDS, "total_s": SECONDS, "decode_tps": RATE, "server_decode_tps": RATE,
               "server_ttft_s": SECONDS, "prompt_tokens": TOKENS,
               "completion_tokens": TOKENS, "draft_n": TOKENS, "draft_n_accepted": TOKENS, "verify_steps": TOKENS,
               "accepted_per_pos": ListOf(Int(nullable=False, low=0, high=MAX_TOKENS)),
               "draft_source": STR, "draft_details": Obj({"methods": METHOD_STATS}), "draft_fragments": STR,
               "finish_reason": STR, "text": STR, "error": STR},
              required=("prompt_id", "category", "run"), nullable=False)
# schema 1 files hold warnings as text; schema 2 as findings (see findings.py)
FINDING = Obj({"code": STR, "message": Str(nullable=False), "setting": STR}, required=("message",), nullable=False)
# schema 3: inside a draft (perpos.py, kpredict.py, ceiling.py)
ACCEPTED_PER_POS = ListOf(Int(nullable=False, low=0, high=MAX_TOKEN_SUM))
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
RACE = Obj({"loads": INT, "requests": INT, "planned": INT, "probe": INT, "decision": STR, "method": STR,
            "bound": Obj({"ratio": NUM, "low": NUM, "high": NUM, "n_pairs": INT, "error": NUM})})
# a concurrency level's Row.load (see measure_concurrent.describe_level)
PERCENTILES = Obj({"n": INT, "p50": NUM, "p90": NUM, "p99": NUM})
LEVEL_SERVER = Obj({"slots": ListOf(Obj({"id": INT, "n_ctx": INT}, nullable=False)), "busy_slots_max": INT,
                    "busy_slots_per_decode": NUM, "window": MapOf(NUM), "request_sums": MapOf(NUM),
                    "checks": MapOf(Obj({"server": NUM, "requests": NUM, "match": BOOL})), "consistent": BOOL})
LOAD = Obj({"streams": INT, "requests": INT, "window_s": SECONDS, "output_tokens": TOKEN_SUM, "aggregate_tps": RATE,
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
    "target": Str(nullable=False), "draft": STR, "mean_tps": RATE, "median_tps": RATE, "mean_ttft": SECONDS,
    "mean_total_time": SECONDS, "wall_time": SECONDS, "acceptance_rate": FRACTION,
    "error": STR,                        # upstream's failure marker
    # draftbench's
    "status": Str(nullable=False, choices=STATUSES), "reason": STR, "role": Str(nullable=False, choices=ROLES),
    "draft_max": Int(low=0, high=MAX_TOKENS), "target_path": STR, "draft_path": STR, "speculation_active": BOOL,
    "draft_n": TOKEN_SUM, "draft_n_accepted": TOKEN_SUM, "verify_steps": TOKEN_SUM,
    "mean_accepted_len": Num(low=0, high=MAX_TOKENS), "draft_fragments": DRAFT_FRAGMENTS, "tps": RATE_SUMMARY,
    "server_tps": RATE_SUMMARY, "ttft_s": TIME_SUMMARY, "total_s": TIME_SUMMARY, "load_time_s": SECONDS,
    "run_to_run_cv": NON_NEGATIVE, "by_category": BY_CATEGORY, "speedup": SPEEDUP,
    "speedup_by_category": MapOf(SPEEDUP), "method_stats": METHOD_STATS, "degenerate_output": DEGENERATE, "equivalence": EQUIVALENCE,
    "theory": THEORY, "warnings": ListOf(OneOf((Str(nullable=False), FINDING), nullable=False)), "server": SERVER,
    "started_at": STR, "candidate": CANDIDATE, "active_methods": ListOf(Str(nullable=False)),
    "race": RACE, "requests": ListOf(REQUEST), "concurrency": Int(nullable=False, low=1, high=MAX_TOKENS), "load": LOAD,
    "accepted_per_pos": ACCEPTED_PER_POS, "diagnosis": DIAGNOSIS, "k_prediction": K_PREDICTION,
    "synthetic": SYNTHETIC, "ceiling": CEILING,
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
