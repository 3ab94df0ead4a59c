#!/usr/bin/env python3
"""Does a busy, drifting machine make a useless candidate look good? A real sweep, twice.

A real sweep on the forged family (llama-server, CPU): the 135M target alone against a near-null
candidate that really speculates but cannot gain much — ``ngram-simple`` with short n-grams on
novel prose and chat, where it drafts a little and its counters bound the gain to a few percent.
While it runs, another program (a busy loop, one whole core) runs during the first half of the
sweep's steps; then the sweep is run again with the busy loop during the second half. Each run
prints its verdict: neither may recommend the candidate; each must call the difference not
significant, or say that the machine's speed changed.

    python benchmarks/drift.py                          # the default design (interleaved on a CPU)
    python benchmarks/drift.py --design sequential      # upstream's order, for comparison (drift-prone)
    python benchmarks/drift.py --repeat 2 --runs 3      # more runs of both orders

Needs the vendored llama-server and the forged models (``make llama-server``, ``tools/forge.py``).
The busy loop is ours: it is stopped at the half-way step and whatever happens (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.common.errors import DraftbenchError
from draftbench.config.settings import COMMON_SETTINGS, DEFAULTS
from draftbench.results.file import load_results
from draftbench.sweep import Sweep
from draftbench.sweep.config_file import load_config
from draftbench.sweep.console import Reporter

NGRAM_SIMPLE = {"ngram_simple_size_n": 4, "ngram_simple_size_m": 8}   # drafts a little on novel text


class Hog:
    """One whole core, busy: a child process spinning until stopped."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if self.process is None:
            self.process = subprocess.Popen([sys.executable, "-c", "while True: pass"])

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


class HalfWay(Reporter):
    """Toggles the busy loop at the sweep's half-way step; prints one line per step."""

    def __init__(self, hog: Hog, busy_first: bool):
        self.hog, self.busy_first = hog, busy_first
        self.switched = False

    def combination_started(self, index: int, total: int, title: str, at_most: bool = False) -> None:
        if not self.switched and index > total / 2:
            self.switched = True
            self.hog.stop() if self.busy_first else self.hog.start()
        print(f"    [{index}/{total}] {title}{'  (busy)' if self.hog.process else ''}", flush=True)

    def note(self, text: str) -> None:
        print(f"    {text}", flush=True)


def config(models: dict[str, str], args) -> dict:
    return {"name": "drift", "hardware": "this-machine", "backend": "llamacpp",
            "targets": [{"label": "135M", "path": models["base"]}],
            "candidates": [{"label": "ngram-simple", "method": "ngram-simple", "params": NGRAM_SIMPLE}],
            "settings": {"runs": args.runs, "max_tokens": args.max_tokens, "gpu_layers": 0, "ctx_size": 1024,
                         "port": 0, "prompts": ["prose", "chat", "list"], "design": args.design,
                         "extra_args": ["--threads", "1"]}}


def one_sweep(models: dict[str, str], args, busy_first: bool, folder: Path) -> dict:
    hog = Hog()
    name = "busy-first-half" if busy_first else "busy-second-half"
    path = folder / f"{name}.json"
    cfg = folder / f"{name}-config.json"
    cfg.write_text(json.dumps(config(models, args)))
    print(f"  {name}:", flush=True)
    if busy_first:
        hog.start()
    start = time.perf_counter()
    try:
        Sweep(load_config(cfg), path, None, reporter=HalfWay(hog, busy_first)).run()
    finally:
        hog.stop()
    wall = time.perf_counter() - start
    results = analyze(load_results(path))       # a file's stored summary is only written back, never read
    verdict = verdicts_of(results)[0] if verdicts_of(results) else None
    row = next(r for r in results.results if r.role == "speculative")
    base = next(r for r in results.results if r.role == "baseline")
    early = [q.decode_tps for q in base.requests if q.block == 0 and q.decode_tps]
    late = [q.decode_tps for q in base.requests if q.block == args.runs - 1 and q.decode_tps]
    out = {"order": name, "wall_s": round(wall), "recommended": verdict.recommended_draft if verdict else None,
           "verdict": verdict.verdict if verdict else None, "speedup": row.speedup.to_dict() if row.speedup else None,
           "confirmed": row.confirmed.to_dict() if row.confirmed else None, "counter_bound": row.counter_bound,
           "drafted": row.draft_n, "accepted": row.draft_n_accepted,
           "baseline_tps_first_block": round(sum(early) / len(early), 2) if early else None,
           "baseline_tps_last_block": round(sum(late) / len(late), 2) if late else None,
           "design": (row.design or {}).get("name")}
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        (Path(args.keep) / path.name).write_bytes(path.read_bytes())
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="repetitions of the prompt set (default 3)")
    p.add_argument("--max-tokens", type=int, default=64, help="tokens per request (default 64)")
    p.add_argument("--design", default=DEFAULTS.design, choices=COMMON_SETTINGS["design"].choices)
    p.add_argument("--repeat", type=int, default=1, help="run both orders this many times (default 1)")
    p.add_argument("--keep", metavar="FOLDER", help="keep the results files there")
    p.add_argument("--json", metavar="FILE", help="also write the figures there")
    args = p.parse_args(argv)
    if min(args.runs, args.max_tokens, args.repeat) < 1:
        p.error("--runs, --max-tokens and --repeat must be at least 1")
    if args.json and not Path(args.json).resolve().parent.is_dir():       # found now, not after the sweeps
        p.error(f"--json {args.json}: no folder {Path(args.json).resolve().parent} to write it in")
    from forge import ensure_family
    models = {k: str(v) for k, v in ensure_family(which="test", quiet=True).items()}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for busy_first in (True, False):
                folder = Path(tmp) / f"{i}"
                folder.mkdir(exist_ok=True)
                runs.append(one_sweep(models, args, busy_first, folder))
                r = runs[-1]
                print(f"  -> {r['order']} ({r['design']}, {r['wall_s']} s): baseline {r['baseline_tps_first_block']} "
                      f"tok/s in its first block, {r['baseline_tps_last_block']} in its last; ngram-simple drafted "
                      f"{r['drafted']}, accepted {r['accepted']}", flush=True)
                print(f"     verdict: {r['verdict']}", flush=True)
    bad = [r for r in runs if r["recommended"]]
    print(f"{len(runs)} sweeps; recommended the near-null candidate in {len(bad)}")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except DraftbenchError as exc:     # no llama-server, no models: its cause and fix in a line or two, not a traceback
        sys.exit(f"Error: {exc}")
