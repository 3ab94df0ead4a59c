"""Deterministic results files for the comparison, export and redaction tests: two machines that
ran the same sweep (same prompts, settings and seeds), with paths under a home directory."""

from __future__ import annotations

from dataclasses import replace

from draftbench.analysis.verdict import analyze, summarize_records
from draftbench.results.file import SCHEMA_VERSION, RequestRecord, ResultsFile, Row

TARGET, GOOD, BAD = "7B Q4_K_M", "0.5B Q8_0", "57M trunc8"
SETTINGS = {"runs": 3, "max_tokens": 128, "temperature": 0.0, "seed": 42, "warmup": 1, "gpu_layers": 99,
            "ctx_size": 4096, "prompts": ["code", "json", "prose"], "draft_max": None, "extra_args": [],
            "llama_bin": "/home/alex/llama.cpp/build/bin/llama-server"}
PROMPTS = (("code-bst", "code", 41), ("json-users", "json", 52), ("prose-story", "prose", 47))


def records(base_tps: float, *, accept: float | None, runs: int = 3, wobble: int = 0,
            prompts=PROMPTS) -> tuple[RequestRecord, ...]:
    """Per prompt a different speed (as on a real machine), per run a small deterministic wobble."""
    out = []
    for i, (pid, category, prompt_tokens) in enumerate(prompts):
        for run in range(runs):
            tps = round(base_tps * (1 + 0.15 * i) * (1 + 0.004 * ((run * 5 + i * 3 + wobble) % 5 - 2)), 4)
            out.append(RequestRecord(
                prompt_id=pid, category=category, run=run, ttft_s=0.05 + 0.01 * i, total_s=round(128 / tps, 4),
                decode_tps=tps, server_decode_tps=tps, prompt_tokens=prompt_tokens, completion_tokens=128,
                draft_n=None if accept is None else 100, draft_n_accepted=None if accept is None else round(100 * accept),
                verify_steps=None if accept is None else 30, finish_reason="length", text=f"output of {pid}",
                draft_source=None if accept is None else "timings"))
    return tuple(out)


def row(draft: str | None, base_tps: float, *, accept: float | None = None, version: str = "b6543",
        draft_path: str | None = None, wobble: int = 0, **extra) -> Row:
    recs = records(base_tps, accept=accept, wobble=wobble)
    fields = summarize_records(list(recs), max_tokens=128, runs=3)
    role = "speculative" if draft else "baseline"
    cand = {"label": draft, "method": [], "draft": draft, "params": {}} if draft else None
    port = 8080
    command = ["/home/alex/llama.cpp/build/bin/llama-server", "-m", "/home/alex/models/qwen2.5-7b-q4_k_m.gguf",
               "--port", str(port)] + (["-md", draft_path] if draft_path else [])
    return Row(target=TARGET, draft=draft, role=role, status="ok", requests=recs, candidate=cand,
               speculation_active=True if draft else None, target_path="/home/alex/models/qwen2.5-7b-q4_k_m.gguf",
               draft_path=draft_path, started_at="2026-03-01T12:00:00+00:00", wall_time=20.0, load_time_s=1.5,
               server={"backend": "llamacpp", "version": version, "command": command,
                       "log": "/home/alex/draftbench/results/box.logs/001-7B.log", "port": port},
               **{**fields, "warnings": tuple(fields["warnings"])}, **extra)


def machine(name: str, hardware: str, *, base: float, good: float, bad: float, version: str = "b6543",
            cpu: str = "Test CPU", wobble: int = 0, settings: dict | None = None) -> ResultsFile:
    rows = (row(None, base, version=version, wobble=wobble),
            row(GOOD, base * good, accept=0.75, version=version, draft_path="/home/alex/models/qwen2.5-0.5b-q8_0.gguf",
                wobble=wobble + 1),
            row(BAD, base * bad, accept=0.02, version=version, draft_path="/home/alex/models/trunc8.gguf",
                wobble=wobble + 2))
    return analyze(ResultsFile(
        name=name, hardware=hardware, backend="llamacpp", model_family="Qwen2.5", settings=dict(settings or SETTINGS),
        results=rows, timestamp="2026-03-01T12:00:00+00:00", schema_version=SCHEMA_VERSION, tool_version="0.1.0",
        host={"os": "Linux-6.1-x86_64", "machine": "x86_64", "cpu": cpu, "cpu_count": 16, "memory_gb": 64.0},
        config={"source": "/home/alex/draftbench/configs/qwen.json",
                "targets": [{"label": TARGET, "path": "/home/alex/models/qwen2.5-7b-q4_k_m.gguf"}]}))


def box_a() -> ResultsFile:
    return machine("qwen", "box-a", base=40.0, good=1.5, bad=0.7)


def box_b() -> ResultsFile:
    """Faster hardware, a newer build; the good draft pays less, the bad one costs the same."""
    return machine("qwen", "box-b", base=60.0, good=1.3, bad=0.7 * 1.5 / 1.5, version="b7000", cpu="Other CPU",
                   wobble=1)


def without_requests(results: ResultsFile) -> ResultsFile:
    return replace(results, results=tuple(replace(r, requests=()) for r in results.results))
