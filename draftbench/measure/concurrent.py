"""N streams at once against a ready server (a concurrency level N > 1).

N client threads, each with its own HTTP session, take the next (prompt, repetition) from the
schedule one stream runs (same order, same seeds): every request still pairs with the baseline's
request for the same prompt and repetition at the same N, so speed-up intervals stay valid. Each
stream sends its next request as soon as its last one ended, so N are in flight until the
schedule runs out.

Per-request counters come only from each response itself: llama-server's ``timings`` belong to
the slot that served the request. Prometheus differences mix every stream in flight, so they are
read once around the whole level (its totals: tokens, drafts, verify steps) and never split per
request; the per-request sums are checked against them. ``/slots`` is watched during the level
for the slots busy at once.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..analysis.concurrency import in_flight, percentiles
from ..analysis.stats import SETTINGS_FLAGS
from ..backends.base import Server
from ..backends.http.server_values import counter_difference
from ..backends.slots import TOTAL_NAMES, SlotState
from ..common.errors import RequestError, ServerError
from ..config.prompt_sets import warmup_prompts
from ..config.prompts import Prompt
from ..results.file import RequestRecord
from ..results.findings import Code, Finding
from .context import with_context
from .sequential import MeasurementFailed, MeasureOptions, explain_failure, request_record, request_seed

WATCH_INTERVAL_S = 0.25       # /slots polls: often enough for multi-second requests, cheap for the server
REQUEST_SUMS = {"prompt_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "draft_tokens": "draft_n",
                "accepted_tokens": "draft_n_accepted"}   # Server.totals() name -> RequestRecord field


@dataclass(frozen=True)
class Done:
    """One finished request: its place in the schedule, the stream that ran it, and when (perf_counter)."""

    index: int
    stream: int
    record: RequestRecord
    start: float
    end: float


@dataclass(frozen=True)
class StreamsResult:
    records: list[RequestRecord]     # in schedule order, as a single stream would list them
    load: dict                       # what the streams did together (Row.load)


def _job(server: Server, index: int, prompt: Prompt, options: MeasureOptions, *, seed: int, max_tokens: int,
         run: int) -> Callable[[int], Done]:
    def go(stream: int) -> Done:
        body = server.request_body([dict(m) for m in prompt.messages], max_tokens=max_tokens,
                                   temperature=options.temperature, seed=seed)
        response = server.send(body, request_timeout_s=options.request_timeout_s,
                               stall_timeout_s=options.stall_timeout_s)
        # No "before" snapshot: a Prometheus difference would count the other streams' tokens too.
        record = request_record(server, prompt, run, response, server.draft_counts(response, None))
        return Done(index, stream, record, response.t_start, response.t_end or time.perf_counter())
    return go


def run_pool(jobs: list[Callable[[int], Done]], streams: int,
             on_done: Callable[[Done], None] | None = None) -> list[Done]:
    """Run ``jobs`` on ``streams`` threads, each taking the next job when its last one ended. The first
    failure stops new jobs (those in flight finish, bounded by the request time-outs) and is raised;
    Ctrl-C stops new jobs at once. Returns what finished, in job order."""
    events: queue.Queue = queue.Queue()
    stop = threading.Event()
    lock = threading.Lock()
    taken = [0]

    def worker(stream: int) -> None:
        while not stop.is_set():
            with lock:
                index, taken[0] = taken[0], taken[0] + 1
            if index >= len(jobs):
                return
            try:
                events.put(jobs[index](stream))
            except Exception as exc:   # handed to the main thread, which decides what it means
                stop.set()
                events.put(exc)
                return

    threads = [threading.Thread(target=worker, args=(s,), name=f"draftbench-stream-{s}", daemon=True)
               for s in range(min(streams, len(jobs)))]
    done: list[Done] = []
    failure: Exception | None = None
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads) or not events.empty():
            try:
                item = events.get(timeout=0.1)   # short waits keep Ctrl-C prompt on the main thread
            except queue.Empty:
                continue
            if isinstance(item, Done):
                done.append(item)
                if on_done:
                    on_done(item)
            elif failure is None:
                failure = item
    except BaseException:
        stop.set()
        raise
    if failure is not None:
        raise failure
    return sorted(done, key=lambda d: d.index)


class SlotWatch:
    """Polls the server's slots while a level runs: how many were ever busy at once."""

    def __init__(self, server: Server, interval_s: float = WATCH_INTERVAL_S):
        self.server, self.interval_s = server, interval_s
        self.slots: tuple[SlotState, ...] | None = server.slot_states()
        self.busy_max: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="draftbench-slot-watch", daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            states = self.server.slot_states()
            if states is None:
                return
            busy = sum(1 for s in states if s.processing)
            self.busy_max = max(self.busy_max or 0, busy)

    def __enter__(self) -> SlotWatch:
        if self.slots is not None:
            self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        if exc_type is None and self._thread.is_alive():   # on Ctrl-C the daemon thread is left to die
            self._thread.join(timeout=10)


def run_streams(server: Server, prompts: list[Prompt], options: MeasureOptions, streams: int,
                on_request: Callable[[int, int, RequestRecord], None] | None = None,
                answers: Mapping[str, str] | None = None) -> StreamsResult:
    """Warm up every slot (``warmup`` waves of ``streams`` short requests at once, on prompts outside the
    measured set), then run the schedule on ``streams`` streams; second turns are sent after ``answers``'
    answers to their first turns (requests in flight together cannot wait for each other's answers).
    Raises :class:`MeasurementFailed` with what finished before a failure."""
    warm = [_job(server, i, prompt, options, seed=request_seed(options.seed, -1, i),
                 max_tokens=min(options.max_tokens, 64), run=-1)
            for i, prompt in enumerate(warmup_prompts(prompts, options.warmup * streams))]
    ready = [with_context(p, answers or {}) for p in prompts]
    schedule = [(run, index, prompt) for run in range(options.runs) for index, prompt in enumerate(ready)]
    jobs = [_job(server, i, prompt, options, seed=request_seed(options.seed, run, index),
                 max_tokens=options.max_tokens, run=run) for i, (run, index, prompt) in enumerate(schedule)]
    finished: list[Done] = []

    def measured(item: Done) -> None:
        finished.append(item)
        if on_request:
            on_request(len(finished), len(jobs), item.record)

    try:
        for wave in range(options.warmup):
            run_pool(warm[wave * streams:(wave + 1) * streams], streams)
        before = server.totals()
        with SlotWatch(server) as watch:
            done = run_pool(jobs, streams, measured)
        after = server.totals()
    except (RequestError, ServerError) as exc:
        records = [d.record for d in sorted(finished, key=lambda d: d.index)]
        raise MeasurementFailed(explain_failure(server, exc), records) from None
    return StreamsResult([d.record for d in done], describe_level(done, streams, before, after, watch))


# --------------------------------------------------------------------------- what the level did

def _window(before: dict | None, after: dict | None) -> dict | None:
    """How far each of the server's counters moved over the level; a counter that went backwards or is
    not a number (a restarted or broken server) is left out rather than reported as a total."""
    if not before or not after:
        return None
    out: dict = {}
    for name in TOTAL_NAMES:
        if name not in before or name not in after:
            continue
        try:
            if name == "busy_slot_decodes":   # a sum of busy slots (running mean x calls), not a count
                moved = counter_difference(round(after[name], 3), round(before[name], 3), name)
                out[name] = round(after[name] - before[name], 3) if moved is not None else None
            else:
                out[name] = counter_difference(after[name], before[name], name)
        except RequestError:
            continue
    return {k: v for k, v in out.items() if v is not None} or None


def _request_sums(records: list[RequestRecord]) -> dict:
    """Σ of each per-request counter over the level; None where some request did not report it."""
    out = {}
    for name, attr in REQUEST_SUMS.items():
        values = [getattr(r, attr) for r in records]
        out[name] = sum(values) if values and all(v is not None for v in values) else None
    return out


def server_side(records: list[RequestRecord], before: dict | None, after: dict | None,
                watch: SlotWatch | None) -> dict:
    """The server's own view of a level: slots, busy slots, its counters' totals over the level, and
    whether the per-request counters add up to them."""
    window = _window(before, after)
    sums = _request_sums(records)
    checks = {name: {"server": window[name], "requests": sums[name], "match": window[name] == sums[name]}
              for name in REQUEST_SUMS if window and window.get(name) is not None and sums[name] is not None}
    calls = (window or {}).get("decode_calls")
    busy = (window or {}).get("busy_slot_decodes")
    slots = watch.slots if watch else None
    return {"slots": [{"id": s.slot_id, "n_ctx": s.n_ctx} for s in slots] if slots is not None else None,
            "busy_slots_max": watch.busy_max if watch else None,
            "busy_slots_per_decode": round(busy / calls, 3) if busy is not None and calls else None,
            "window": window, "request_sums": sums, "checks": checks,
            "consistent": all(c["match"] for c in checks.values()) if checks else None}


def describe_level(done: list[Done], streams: int, before: dict | None, after: dict | None,
                   watch: SlotWatch | None = None) -> dict:
    """``Row.load``: aggregate output tok/s over the level's wall time, streams in flight, latency
    percentiles, each request's time range, and the server's side."""
    records = [d.record for d in done]
    first = min((d.start for d in done), default=0.0)
    window_s = max((d.end for d in done), default=first) - first
    tokens = sum(r.completion_tokens or 0 for r in records)
    most, mean = in_flight([(d.start, d.end) for d in done])
    return {
        "streams": streams, "requests": len(done), "window_s": round(window_s, 4), "output_tokens": tokens,
        "aggregate_tps": round(tokens / window_s, 3) if window_s > 0 and tokens else None,
        "in_flight_max": most, "in_flight_mean": mean,
        "ttft_s": percentiles(r.ttft_s for r in records), "total_s": percentiles(r.total_s for r in records),
        "stream_tps": percentiles(r.decode_tps for r in records),
        "server": server_side(records, before, after, watch),
        "timeline": [{"prompt_id": d.record.prompt_id, "run": d.record.run, "stream": d.stream,
                      "start_s": round(d.start - first, 4), "end_s": round(d.end - first, 4)} for d in done],
    }


def level_fields(fields: dict, load: dict, *, speculative: bool, flags: dict[str, str] | None = None) -> dict:
    """Row fields of a level: per-request draft counters where the responses had them, else the server's
    totals over the level; verify steps (hence mean accepted length) from those totals; and warnings
    when the level was not what was asked for."""
    f = {**SETTINGS_FLAGS, "concurrency": "settings.concurrency", **(flags or {})}
    out = dict(fields)
    side = load.get("server") or {}
    window = side.get("window") or {}
    trusted = side.get("consistent") is not False      # totals polluted by another client are never used
    drafted, accepted = window.get("draft_tokens"), window.get("accepted_tokens")
    if speculative and trusted and out.get("draft_n") is None and drafted is not None \
            and (accepted is None or accepted <= drafted):   # more accepted than drafted: a broken counter
        drafted, accepted = int(drafted), int(accepted or 0)
        out.update(draft_n=drafted, draft_n_accepted=accepted,
                   acceptance_rate=round(accepted / drafted, 4) if drafted else None)
    steps = window.get("verify_steps")
    if speculative and out.get("verify_steps") is None and steps is not None and trusted:
        out["verify_steps"] = int(steps)
        if steps and out.get("draft_n_accepted") is not None:
            out["mean_accepted_len"] = round(1 + out["draft_n_accepted"] / steps, 3)
    warnings = list(out.get("warnings") or ())
    streams, most = load.get("streams"), load.get("in_flight_max")
    if streams and most is not None and most < streams:
        warnings.append(Finding(Code.STREAMS_NOT_REACHED, f"at most {most} of the {streams} streams were in flight "
                                f"at once ({load.get('requests')} requests): this level measured less load than "
                                f"asked — add prompts ({f['prompts']}) or raise {f['runs']}", f["runs"]))
    if side.get("consistent") is False:
        wrong = ", ".join(f"{name} {c['requests']} vs {c['server']}" for name, c in side["checks"].items()
                          if not c["match"])
        warnings.append(Finding(Code.COUNTERS_DISAGREE, f"the requests' own counters do not add up to the server's "
                                f"totals over the level ({wrong}): another client may have used the server, so "
                                "its totals were not used"))
    out["warnings"] = tuple(warnings)
    return out
