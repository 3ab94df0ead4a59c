#!/usr/bin/env python3
"""A stand-in for LM Studio's local server, speaking its documented formats, for fast tests.

Follows LM Studio's documentation: "REST API v0" (lmstudio.ai/docs, LM Studio 0.3.6+:
``GET /api/v0/models``, ``GET /api/v0/models/{key}``, ``POST /api/v0/chat/completions``) and the
API changelog for 0.3.10 (speculative decoding: ``"draft_model"`` in the request; ``stats`` with
``draft_model``, ``total_draft_tokens_count``, ``accepted_draft_tokens_count``,
``rejected_draft_tokens_count``, ``ignored_draft_tokens_count``) and 0.3.18 (``/v1`` streams honour
``stream_options.include_usage``).

* Non-streaming ``/api/v0/chat/completions`` answers exactly in the documented shape
  (``choices[].message``, ``usage``, ``stats``, ``model_info``, ``runtime``).
* The v0 documentation shows no streaming example. Streams here are OpenAI-style chunks whose
  last chunk carries ``usage`` and ``stats`` (where streaming clients of LM Studio read them);
  mode ``legacy-stream`` sends neither, as older builds did (lmstudio-bug-tracker#676).
* ``/v1/chat/completions`` streams with ``usage`` only when ``stream_options.include_usage``;
  never ``stats`` (undocumented there).
* Drafting is simulated: every step drafts 4 tokens; the target accepts
  a = ACCEPT_PATTERN[step % 4] of them; the first mismatch is "rejected" and the drafted tokens
  after it are "ignored" (drafted, never verified), so total = accepted + rejected + ignored.
  The text does not depend on the draft.
* ``POST /__fake__/load`` and ``/__fake__/unload`` are how the fake ``lms`` changes state.

Arguments: ``--port P``. Environment:
  FAKE_LMSTUDIO_MODELS   comma-separated model keys (default below)
  FAKE_LMSTUDIO_MODE     ok | legacy-stream
  FAKE_LMSTUDIO_DRAFTS   JSON {draft key: "ok" | "ignore" (answers without draft stats) | "reject" (HTTP 400)}
  FAKE_LMSTUDIO_LOADED   comma-separated keys already loaded when the server starts
  FAKE_LMSTUDIO_PIDS     folder where the process writes <pid>.pid
"""

import json
import os
import sys
import threading
import time

from http_stub import StubServer  # run as a script: tests/fakes is on the path

ACCEPT_PATTERN = (3, 1, 4, 0)
DRAFT_LEN = 4
DEFAULT_MODELS = "qwen2.5-7b-instruct,qwen2.5-0.5b-instruct,llama-3.2-1b-instruct"


def main():
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 1234
    pids = os.environ.get("FAKE_LMSTUDIO_PIDS")
    if pids:
        open(os.path.join(pids, f"{os.getpid()}.pid"), "w").close()
    keys = [k for k in os.environ.get("FAKE_LMSTUDIO_MODELS", DEFAULT_MODELS).split(",") if k]
    mode = os.environ.get("FAKE_LMSTUDIO_MODE", "ok")
    drafts = json.loads(os.environ.get("FAKE_LMSTUDIO_DRAFTS", "{}"))
    lock = threading.Lock()
    loaded = {k: k for k in os.environ.get("FAKE_LMSTUDIO_LOADED", "").split(",") if k}   # identifier -> key
    requests_seen = []

    def model_entry(key):
        return {"id": key, "object": "model", "type": "llm", "publisher": "lmstudio-community", "arch": "qwen2",
                "compatibility_type": "gguf", "quantization": "Q4_K_M",
                "state": "loaded" if key in loaded.values() else "not-loaded", "max_context_length": 32768}

    def get(call):
        with lock:
            if call.path == "/api/v0/models":
                call.reply(200, {"object": "list", "data": [model_entry(k) for k in keys]})
            elif call.path.startswith("/api/v0/models/"):
                key = call.path[len("/api/v0/models/"):]
                call.reply(200, model_entry(key)) if key in keys else call.reply(404, {"error": "model not found"})
            elif call.path == "/v1/models":
                call.reply(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in loaded]})
            elif call.path == "/__fake__/requests":
                call.reply(200, requests_seen)
            else:
                call.reply(404, {"error": f"Unexpected endpoint or method. (GET {call.path})"})

    def post(call):
        body = call.json()
        if call.path == "/__fake__/load":
            with lock:
                if body["key"] not in keys:
                    call.reply(404, {"error": f"model {body['key']} not found"})
                elif body["identifier"] in loaded:
                    call.reply(409, {"error": f"identifier {body['identifier']} already exists"})
                else:
                    loaded[body["identifier"]] = body["key"]
                    call.reply(200, {"ok": True})
            return
        if call.path == "/__fake__/unload":
            with lock:
                ident = body["identifier"]
                match = ident if ident in loaded else next((i for i, k in loaded.items() if k == ident), None)
                if match is None:
                    call.reply(404, {"error": f"no loaded model {ident}"})
                else:
                    del loaded[match]
                    call.reply(200, {"ok": True})
            return
        if call.path not in ("/api/v0/chat/completions", "/v1/chat/completions"):
            call.reply(404, {"error": f"Unexpected endpoint or method. (POST {call.path})"})
            return
        native = call.path.startswith("/api/v0")
        model = body.get("model")
        with lock:
            if model in loaded:
                key = loaded[model]
            elif model in keys:          # just-in-time loading
                loaded[model] = model
                key = model
            else:
                call.reply(404, {"error": f"Model \"{model}\" not found. Please load it first."})
                return
            draft = body.get("draft_model")
            behaviour = None
            if draft is not None:
                if draft not in keys:
                    call.reply(404, {"error": f"Draft model \"{draft}\" not found."})
                    return
                behaviour = drafts.get(draft, "ok")
                if behaviour == "reject":
                    call.reply(400, {"error": f"Draft model {draft} is not compatible with main model {key}"})
                    return
                if behaviour == "ok" and draft not in loaded.values():
                    loaded[draft] = draft   # LM Studio loads the draft itself
            requests_seen.append({"path": call.path, "model": model, "draft_model": draft,
                                  "stream": bool(body.get("stream")), "max_tokens": body.get("max_tokens")})
        generate(call, body, native, key, draft, behaviour)

    def generate(call, body, native, key, draft, behaviour):
        n = int(body.get("max_tokens") or 16)
        if n < 0:
            n = 64
        stream = bool(body.get("stream"))
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", [])) + 7
        speculate = draft is not None and behaviour == "ok"
        counts = {"accepted": 0, "rejected": 0, "ignored": 0}
        t0 = time.perf_counter()
        t_first = None
        created = int(time.time())
        base = {"id": "chatcmpl-fakelmstudio", "object": "chat.completion.chunk", "created": created,
                "model": key, "system_fingerprint": key}
        if stream:
            call.start_events()
        pieces, emitted, step = [], 0, 0
        while emitted < n:
            time.sleep(0.002)
            if speculate:
                a = ACCEPT_PATTERN[step % 4]
                count = min(a + 1, n - emitted)
                a = count - 1
                counts["accepted"] += a
                if a < DRAFT_LEN:
                    counts["rejected"] += 1
                    counts["ignored"] += DRAFT_LEN - a - 1
            else:
                count = 1
            step += 1
            for i in range(emitted, emitted + count):
                piece = f" w{i}"
                pieces.append(piece)
                if t_first is None:
                    t_first = time.perf_counter()
                if stream:
                    call.event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece},
                                                     "logprobs": None, "finish_reason": None}]})
            emitted += count
        gen_time = time.perf_counter() - (t_first or t0)
        stats = {"tokens_per_second": n / gen_time if gen_time > 0 else 0.0,
                 "time_to_first_token": round((t_first or t0) - t0, 3), "generation_time": round(gen_time, 3),
                 "stop_reason": "maxPredictedTokensReached"}
        if speculate:
            stats.update({"draft_model": draft,
                          "total_draft_tokens_count": counts["accepted"] + counts["rejected"] + counts["ignored"],
                          "accepted_draft_tokens_count": counts["accepted"],
                          "rejected_draft_tokens_count": counts["rejected"],
                          "ignored_draft_tokens_count": counts["ignored"]})
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        with lock:
            requests_seen[-1]["truth"] = {**counts, "completion_tokens": n}
        if not stream:
            call.reply(200, {"id": "chatcmpl-fakelmstudio", "object": "chat.completion", "created": created,
                             "model": key,
                             "choices": [{"index": 0, "logprobs": None, "finish_reason": "length",
                                          "message": {"role": "assistant", "content": "".join(pieces)}}],
                             "usage": usage, "stats": stats,
                             "model_info": {"arch": "qwen2", "quant": "Q4_K_M", "format": "gguf",
                                            "context_length": 4096},
                             "runtime": {"name": "llama.cpp-linux-x86_64-avx2", "version": "1.50.0",
                                         "supported_formats": ["gguf"]}})
            return
        final = {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]}
        if native and mode != "legacy-stream":
            final.update(usage=usage, stats=stats)
        call.event(final)
        if not native and (body.get("stream_options") or {}).get("include_usage"):
            call.event({**base, "choices": [], "usage": usage})
        call.event("[DONE]")

    server = StubServer({"GET *": get, "POST *": post}, port=port)
    print(f"fake LM Studio server listening on port {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
