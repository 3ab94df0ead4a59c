"""The JSON shapes of the values in a results file that have no class of their own: summaries of
per-request figures, a concurrency level's load, a race's bounds, a draft's k prediction and ceiling,
the server, the settings and the file's summary. Rows declare their fields with these (see
:mod:`draftbench.results.json_types`); the classes (``Speedup``, ``Theory``, ``Finding``,
``RequestRecord``) declare their own. Each shape names the module that fills it.
"""

from __future__ import annotations

from ..config.settings import COMMON_SETTINGS
from .bounds import COUNT, FRACTION, MAX_TOKEN_SUM, RATE, SECONDS, TOKEN_SUM, TOKENS
from .json_types import BOOL, FREE, INT, NUM, STR, Int, ListOf, MapOf, Num, Obj, OneOf, Spec, Str, spec_of
from .kinds import CEILING_LEVELS
from .speedup import Speedup


def _setting_spec(kind: str) -> Spec:
    return {"int": INT, "float": NUM, "bool": BOOL, "str": STR, "str_list": ListOf(Str(nullable=False)),
            "int_or_list": OneOf((Int(), ListOf(Int(nullable=False))))}.get(kind, FREE)


SPEEDUP = spec_of(Speedup, nullable=True)
SETTINGS = Obj({key: _setting_spec(f.kind) for key, f in COMMON_SETTINGS.items()})
STAT_SUMMARY = MapOf(NUM)            # analysis.stats.summarize: n, mean, median, stdev, cv, min, max, p95, ci95_low, ci95_high
BY_CATEGORY = MapOf(Obj({"n": COUNT, "mean_tps": RATE, "acceptance_rate": FRACTION}))
# analysis.verdict: the output against the baseline's at temperature 0
EQUIVALENCE = Obj({"checked": BOOL, "reason": STR, "compared": INT, "matched": INT, "match_rate": NUM,
                   "mismatches": ListOf(Obj({"prompt_id": STR, "run": INT, "char_pos": INT, "baseline_len": INT,
                                             "candidate_len": INT, "baseline_excerpt": STR,
                                             "candidate_excerpt": STR}, nullable=False))})
# per speculative implementation (results.method_stats): counters, durations and derived figures
METHOD_FIGURES = Obj({"acceptance_rate": NUM, "mean_accepted_len": NUM, "requests": INT,
                      "accepted_per_pos": ListOf(Num(nullable=False)), "acc_rate_per_pos": ListOf(Num(nullable=False))},
                     rest=NUM, nullable=False)
METHOD_STATS = MapOf(METHOD_FIGURES)
DRAFT_DETAILS = Obj({"methods": METHOD_STATS})       # a request's backend-specific draft statistics
# analysis.degenerate: requests resting on the target's looping output
DEGENERATE = Obj({"looping_requests": INT, "requests": INT, "prompts": ListOf(Str(nullable=False)),
                  "max_loop_share": NUM, "limit": NUM, "speedup_without_loops": SPEEDUP})
SERVER = Obj({"backend": STR, "command": OneOf((ListOf(Str(nullable=False)), Str())), "version": STR, "log": STR,
              "port": INT, "log_tail": STR})
# inside a draft (analysis.draft: positions, best_k, ceiling)
ACCEPTED_PER_POS = ListOf(Int(nullable=False, minimum=0, maximum=MAX_TOKEN_SUM, unit="tokens"))   # a row's sums
K_PREDICTION = Obj({                                   # analysis.draft.best_k
    "from_k": Int(nullable=False), "times": Str(choices=("server", "client")), "target_s_per_token": NUM,
    "cost_per_drafted_token_s": NUM, "cost_per_step_s": NUM, "drafted_per_step": NUM,
    "drafts": Str(choices=("full", "cut short")), "baseline_tps": NUM,
    "per_k": ListOf(Obj({"k": Int(nullable=False), "tokens_per_step": NUM, "predicted_tps": Num(nullable=False),
                         "predicted_speedup": NUM, "measured_tps": NUM, "error_pct": NUM},
                        required=("k", "predicted_tps"), nullable=False), nullable=False),
    "recommended_k": INT, "recommended_tps": NUM, "mean_abs_error_pct": NUM, "compared": INT, "text": STR,
}, required=("from_k", "per_k"))
SYNTHETIC = Obj({"level": Str(nullable=False, choices=CEILING_LEVELS), "synth_len": NUM, "k": INT,
                 "from_mean_accepted_len": NUM}, required=("level",))
CEILING = Obj({                                        # analysis.draft.ceiling.summarize
    "full_tps": NUM, "full_speedup": SPEEDUP, "at_measured_tps": NUM, "at_measured_speedup": SPEEDUP, "reach": NUM,
    "full_synth_len": NUM, "measured_synth_len": NUM, "text": STR})
# sweep.race: an adaptive search's loads, requests and decision
DESIGN = Obj({"name": STR, "drift_prone": BOOL, "blocks": INT, "planned": INT, "sessions": INT,   # sweep.schedule
              "stateful": BOOL, "confirmation_block": INT,
              # measured in stages (sweep.stage_plan): planned stages, prompts per stage, the same prompts each time
              "horizon": INT, "per_stage": INT, "fixed_prompts": BOOL})
INTERVAL = Obj({"ratio": NUM, "low": NUM, "high": NUM, "requests": INT})
COUNTER_BOUND = Obj({"ratio": NUM, "requests": INT, "excess": INTERVAL, "no_drafts": INTERVAL,   # analysis.comparison
                     "speed_changed": BOOL, "text": STR})
RACE = Obj({"loads": INT, "requests": INT, "planned": INT, "probe": INT, "decision": STR, "method": STR,
            "bound": Obj({"ratio": NUM, "low": NUM, "high": NUM, "n_pairs": INT, "error": NUM}),
            # every look at the candidate (analysis.before_stages.race): the report's race history
            "looks": ListOf(Obj({"requests": INT, "ratio": NUM, "low": NUM, "high": NUM, "standing": STR},
                                nullable=False))})
# where the models ran (backends.llamacpp.topology: a llama.cpp RPC split; backends.vllm.parallel: vLLM's parallelism)
MODEL_PLACEMENT = Obj({"path": STR, "devices": ListOf(Obj({"name": STR, "description": STR}, nullable=False)),
                       "offloaded": STR, "model_mib": MapOf(NUM), "kv_mib": MapOf(NUM), "compute_mib": MapOf(NUM),
                       "output_mib": MapOf(NUM), "on_endpoints_mib": MapOf(NUM), "local_mib": NUM})
RPC_ENDPOINT = Obj({"endpoint": Str(nullable=False), "rtt_ms": NUM, "rtt_min_ms": NUM, "samples": INT, "method": STR,
                    "protocol": STR, "devices": INT, "error": STR, "device_names": ListOf(Str(nullable=False))},
                   required=("endpoint",), nullable=False)
TOPOLOGY = Obj({"kind": Str(nullable=False), "endpoints": ListOf(RPC_ENDPOINT), "draft_placement": STR,
                "target": MODEL_PLACEMENT, "draft": MODEL_PLACEMENT, "split_proven": BOOL,
                "tensor_parallel_size": INT, "pipeline_parallel_size": INT, "data_parallel_size": INT,
                "distributed_executor_backend": STR, "nnodes": INT, "master_addr": STR, "master_port": INT,
                "world_size": INT, "draft_tensor_parallel_size": INT}, required=("kind",))
# a concurrency level's Row.load (measure.concurrent.describe_level)
PERCENTILES = Obj({"n": INT, "p50": NUM, "p90": NUM, "p99": NUM})
LEVEL_SERVER = Obj({"slots": ListOf(Obj({"id": INT, "n_ctx": INT}, nullable=False)), "busy_slots_max": INT,
                    "busy_slots_per_decode": NUM, "window": MapOf(NUM), "request_sums": MapOf(NUM),
                    "checks": MapOf(Obj({"server": NUM, "requests": NUM, "match": BOOL})), "consistent": BOOL})
LOAD = Obj({"streams": INT, "requests": INT, "window_s": SECONDS, "output_tokens": TOKEN_SUM, "aggregate_tps": RATE,
            "in_flight_max": INT, "in_flight_mean": NUM, "ttft_s": PERCENTILES, "total_s": PERCENTILES,
            "stream_tps": PERCENTILES, "server": LEVEL_SERVER,
            "timeline": ListOf(Obj({"prompt_id": STR, "run": INT, "stream": INT, "start_s": NUM, "end_s": NUM},
                                   nullable=False))})
# LM Studio SDK: where drafted fragments landed (results.fragments.summarize)
DRAFT_FRAGMENTS = Obj({"requests": INT, "tokens": INT, "drafted_tokens": INT, "drafted_share": NUM, "runs": INT,
                       "mean_run_tokens": NUM, "max_run_tokens": INT, "run_lengths": MapOf(INT),
                       "drafted_share_by_quarter": ListOf(NUM)})
CANDIDATE = Obj({"label": STR, "method": ListOf(Str(nullable=False)), "draft": STR, "params": MapOf(FREE)})
# per target (analysis.verdict): the verdict's schema-3 additions (the rest of the summary is recomputed on load)
SUMMARY = Obj({"targets": ListOf(Obj({"no_draft_can_pay": BOOL,
                                      "k_prediction": Obj({"from_k": INT, "recommended_k": INT,
                                                           "recommended_tps": NUM, "mean_abs_error_pct": NUM,
                                                           "compared": INT})}, nullable=False))})
MODEL_ENTRY = Obj({"label": Str(nullable=False), "path": Str(nullable=False), "rpc": ListOf(Str(nullable=False))},
                  required=("label", "path"), nullable=False)
# the prompts a sweep measured (config.prompts.PromptSelection.record)
PROMPT_SET = Obj({"per_category": INT, "seed": INT, "ids": ListOf(Str(nullable=False)),
                  "categories": ListOf(Str(nullable=False)), "sources": MapOf(MapOf(STR)),
                  "second_turn_context": STR,
                  # long prompts (sweep.long_context): filler, sources, and per target each prompt's tokens by length
                  "context": Obj({"filler": STR, "sources": MapOf(MapOf(STR)),
                                  "targets": MapOf(MapOf(MapOf(TOKENS)))})})
CONFIG = Obj({"source": STR, "targets": ListOf(MODEL_ENTRY), "drafts": ListOf(MODEL_ENTRY), "measurement": Obj({})})
HOST = Obj({"os": STR, "machine": STR, "python": STR, "cpu_count": INT, "cpu": STR, "memory_gb": NUM})
# lifetime.machine_load (filled by sweep.session): how busy other programs kept the machine
MACHINE_LOAD = Obj({"other_cpu_share": FRACTION, "other_cpu_share_max": FRACTION, "load_avg_1m_max": NUM,
                    "cpu_count": INT, "seconds": SECONDS, "windows": INT})          # a row's measuring windows
LOAD_BEFORE = ListOf(Obj({"at": STR, "other_cpu_share": FRACTION, "load_avg_1m": NUM, "cpu_count": INT,
                          "seconds": SECONDS}, nullable=False))                   # before each run of a sweep
