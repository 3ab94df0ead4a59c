#!/usr/bin/env python3
"""A stand-in for LM Studio's SDK API (the websocket protocol of the ``lmstudio`` package), for tests.

Only the few calls draftbench makes, in the shapes the SDK sends and expects. Written from the
source of ``lmstudio`` 1.5.0 (PyPI wheel), not from its code:

* ``json_api.py`` ``ClientBase``: ``GET /lmstudio-greeting`` answers ``{"lmstudio": true}`` (the
  probe); each namespace is its own websocket at ``ws://HOST:PORT/<namespace>`` (``llm``,
  ``system``); the first client message is ``{"authVersion": 1, "clientIdentifier", "clientPasskey"}``,
  answered ``{"success": true}`` (``_ws_impl.py`` ``_authenticate``).
* ``json_api.py`` ``RemoteCallHandler``: ``{"type": "rpcCall", "endpoint", "callId", "parameter"}`` →
  ``{"type": "rpcResult", "callId", "result"}`` or ``{"type": "rpcError", "callId", "error"}``.
  Endpoints here: system ``listDownloadedModels``; llm ``listLoaded``, ``getModelInfo``,
  ``unloadModel`` (``sync_api.py`` ``_SyncSessionSystem``/``_SyncSessionModel``).
* ``json_api.py`` ``ChannelHandler``: ``{"type": "channelCreate", "endpoint", "channelId",
  "creationParameter"}``; answers ``{"type": "channelSend", "channelId", "message"}`` … and
  ``channelClose``, or ``{"type": "channelError", "channelId", "error"}``; errors are
  ``SerializedLMSExtendedError`` (``title``, ``cause``, ``displayData.code``).
* ``loadModel`` (``LoadModelEndpoint``, ``_sdk_models`` ``LlmChannelLoadModelCreationParameter``:
  ``modelKey``, ``identifier``, ``loadConfigStack``, ``ttlMs``) → ``resolved``, ``progress``,
  ``success`` with ``info`` = ``LlmInstanceInfo``.
* ``predict`` (``PredictionEndpoint``, ``PredictionChannelRequest``: ``modelSpecifier``, ``history``,
  ``predictionConfigStack`` of ``llm.prediction.*`` keys as in ``_kv_config.py``, among them
  ``llm.prediction.speculativeDecoding.draftModel`` / ``.numDraftTokensExact`` /
  ``.minContinueDraftingProbability`` / ``.minDraftLengthToConsider``) → ``promptProcessingProgress``,
  ``fragment`` (``LlmPredictionFragment``: ``content``, ``tokensCount``, ``containsDrafted``,
  ``reasoningType``), then ``success`` with ``stats`` (``LlmPredictionStats``: ``stopReason``,
  ``tokensPerSecond``, ``timeToFirstTokenSec``, ``promptTokensCount``, ``predictedTokensCount``,
  ``usedDraftModelKey``, ``total/accepted/rejected/ignoredDraftTokensCount``), ``modelInfo``,
  ``loadModelConfig`` and ``predictionConfig`` (KV configs echoing what was applied).

The websocket itself (RFC 6455: handshake, masked client frames, ping/pong, close) is the standard
library's sockets, so the stand-in needs nothing the SDK installs.

Drafting is simulated like fake_lmstudio_server.py: every step the draft proposes d tokens, d = k
(``numDraftTokensExact``, default 4) cut at the first of the draft's confidences (0.9, 0.8, 0.6, 0.4,
0.3, …) below ``minContinueDraftingProbability``; a draft shorter than ``minDraftLengthToConsider``
is not verified (all ignored). The target accepts a = min(ACCEPT_PATTERN[step % 4], d); the first
mismatch is rejected, the rest ignored. Accepted tokens stream as one fragment with
``containsDrafted`` (LM Studio does not document how it groups them), then the target's own token
as a plain fragment. The text does not depend on the draft or k.

Arguments: ``--port P``. Environment:
  FAKE_LMSTUDIO_MODELS   comma-separated model keys (default below)
  FAKE_LMSTUDIO_LOADED   keys loaded (identifier = key) when the server starts
  FAKE_LMSTUDIO_DRAFTS   JSON {draft key: "ok" | "ignore" (no draft stats) | "reject" (error)}
  FAKE_LMSTUDIO_LOAD     ok | oom (loadModel fails for lack of memory)
  FAKE_LMSTUDIO_MODE     ok | stall (goes quiet after the first fragment)
  FAKE_LMSTUDIO_MAX_K    caps k (and echoes the capped k as applied), as an LM Studio that clamps it
  FAKE_LMSTUDIO_PIDS     folder where the process writes <pid>.pid
``GET /__fake__/requests`` lists what was asked (loads, unloads, predictions with the truth);
``GET /__fake__/loaded`` maps loaded identifiers to model keys.
"""

import base64
import hashlib
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time

ACCEPT_PATTERN = (3, 1, 4, 0)
CONFIDENCE = (0.9, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1)
DEFAULT_K = 4
DEFAULT_MODELS = "qwen2.5-7b-instruct,qwen2.5-0.5b-instruct,llama-3.2-1b-instruct"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SPEC = "llm.prediction.speculativeDecoding."


class Closed(Exception):
    pass


class WebSocket:
    """Server side of one RFC 6455 connection over the request handler's streams."""

    def __init__(self, rfile, wfile):
        self.rfile, self.wfile = rfile, wfile
        self.lock = threading.Lock()

    def _read(self, n):
        data = self.rfile.read(n)
        if len(data) < n:
            raise Closed()
        return data

    def _frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack(">H", n)
        else:
            head += bytes([127]) + struct.pack(">Q", n)
        with self.lock:
            self.wfile.write(head + payload)
            self.wfile.flush()

    def send(self, obj):
        self._frame(0x1, json.dumps(obj).encode())

    def receive(self):
        """The next JSON message; raises Closed when the client closes."""
        message = b""
        while True:
            b1, b2 = self._read(2)
            opcode, n = b1 & 0x0F, b2 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b2 & 0x80 else b"\0\0\0\0"
            payload = bytes(c ^ mask[i % 4] for i, c in enumerate(self._read(n)))
            if opcode == 0x8:
                try:
                    self._frame(0x8, payload[:2])
                except OSError:
                    pass
                raise Closed()
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            message += payload
            if b1 & 0x80:
                return json.loads(message)


class LMStudio:
    """The models and what was asked of them (shared by every connection)."""

    def __init__(self):
        self.keys = [k for k in os.environ.get("FAKE_LMSTUDIO_MODELS", DEFAULT_MODELS).split(",") if k]
        self.loaded = {k: {"key": k, "context": 4096} for k in os.environ.get("FAKE_LMSTUDIO_LOADED", "").split(",")
                       if k}
        self.drafts = json.loads(os.environ.get("FAKE_LMSTUDIO_DRAFTS", "{}"))
        self.load_mode = os.environ.get("FAKE_LMSTUDIO_LOAD", "ok")
        self.mode = os.environ.get("FAKE_LMSTUDIO_MODE", "ok")
        self.max_k = int(os.environ.get("FAKE_LMSTUDIO_MAX_K") or 0)
        self.lock = threading.Lock()
        self.seen = []

    def info(self, key):
        return {"type": "llm", "modelKey": key, "format": "gguf", "displayName": key,
                "path": f"lmstudio-community/{key}", "sizeBytes": 4_000_000_000, "vision": False, "trainedForToolUse": False, "maxContextLength": 32768,
                "architecture": "qwen2"}

    def instance(self, identifier):
        entry = self.loaded[identifier]
        return {**self.info(entry["key"]), "identifier": identifier, "instanceReference": f"ref-{identifier}",
                "contextLength": entry["context"]}

    def find(self, specifier):
        """The loaded identifier a modelSpecifier names (query by identifier or key), or None."""
        query = (specifier or {}).get("query") or {}
        wanted = query.get("identifier") or query.get("modelKey")
        if wanted in self.loaded:
            return wanted
        return next((i for i, e in self.loaded.items() if e["key"] == wanted), None)


def error(title, cause=None, code=None):
    err = {"title": title, "rootTitle": title}
    if cause:
        err["cause"] = cause
    if code:
        err["displayData"] = {"code": code}
    return err


def config_fields(stack):
    """KV fields of a config stack, later layers first-come (apiOverride is what the SDK sends)."""
    fields = {}
    for layer in (stack or {}).get("layers", []):
        for field in (layer.get("config") or {}).get("fields", []):
            fields.setdefault(field["key"], field.get("value"))
    return fields


def main():
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 1234
    pids = os.environ.get("FAKE_LMSTUDIO_PIDS")
    if pids:
        open(os.path.join(pids, f"{os.getpid()}.pid"), "w").close()
    studio = LMStudio()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.headers.get("Upgrade", "").lower() == "websocket":
                self.websocket()
            elif self.path == "/lmstudio-greeting":
                self.reply(200, {"lmstudio": True})
            elif self.path == "/__fake__/requests":
                with studio.lock:
                    self.reply(200, studio.seen)
            elif self.path == "/__fake__/loaded":
                with studio.lock:
                    self.reply(200, {i: e["key"] for i, e in studio.loaded.items()})
            else:
                self.reply(404, {"error": f"Unexpected endpoint or method. (GET {self.path})"})

        def websocket(self):
            accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + WS_GUID).encode()).digest())
            self.send_response(101, "Switching Protocols")
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept.decode())
            self.end_headers()
            self.close_connection = True
            # small frames go out at once (Node's ws does the same), or Nagle's algorithm would hold them
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ws = WebSocket(self.rfile, self.wfile)
            namespace = self.path.strip("/")
            try:
                auth = ws.receive()
                if auth.get("authVersion") != 1 or not auth.get("clientIdentifier"):
                    ws.send({"success": False, "error": error("Invalid authentication packet")})
                    return
                ws.send({"success": True})
                while True:
                    message = ws.receive()
                    if message.get("type") == "rpcCall":
                        self.rpc(ws, namespace, message)
                    elif message.get("type") == "channelCreate":
                        threading.Thread(target=self.channel, args=(ws, namespace, message), daemon=True).start()
                    # channelSend (cancel) is not needed by draftbench's calls; ignored
            except (Closed, OSError, ValueError):
                return

        # -- remote calls ----------------------------------------------------------------
        def rpc(self, ws, namespace, message):
            call_id, endpoint, param = message["callId"], message["endpoint"], message.get("parameter") or {}
            with studio.lock:
                result, err = self.answer(namespace, endpoint, param)
            if err is not None:
                ws.send({"type": "rpcError", "callId": call_id, "error": err})
            elif result is None:
                ws.send({"type": "rpcResult", "callId": call_id})
            else:
                ws.send({"type": "rpcResult", "callId": call_id, "result": result})

        def answer(self, namespace, endpoint, param):
            if (namespace, endpoint) == ("system", "listDownloadedModels"):
                return [studio.info(k) for k in studio.keys], None
            if (namespace, endpoint) == ("llm", "listLoaded"):
                return [studio.instance(i) for i in studio.loaded], None
            if (namespace, endpoint) == ("llm", "getModelInfo"):
                identifier = studio.find(param.get("specifier"))
                if identifier is None:
                    return None, error("No model found that matches the query", code="generic.noModelMatchingQuery")
                return studio.instance(identifier), None
            if (namespace, endpoint) == ("llm", "unloadModel"):
                identifier = param.get("identifier")
                if identifier not in studio.loaded:
                    return None, error(f"No model with identifier {identifier} is loaded")
                del studio.loaded[identifier]
                studio.seen.append({"endpoint": "unloadModel", "identifier": identifier})
                return None, None
            return None, error(f"Unknown endpoint {namespace}.{endpoint}")

        # -- channels --------------------------------------------------------------------
        def channel(self, ws, namespace, message):
            channel_id, endpoint = message["channelId"], message["endpoint"]
            param = message.get("creationParameter") or {}

            def send(contents):
                ws.send({"type": "channelSend", "channelId": channel_id, "message": contents})

            def fail(err):
                ws.send({"type": "channelError", "channelId": channel_id, "error": err})

            try:
                if (namespace, endpoint) == ("llm", "loadModel"):
                    self.load(param, send, fail)
                elif (namespace, endpoint) == ("llm", "predict"):
                    self.predict(param, send, fail)
                else:
                    fail(error(f"Unknown channel endpoint {namespace}.{endpoint}"))
                    return
                ws.send({"type": "channelClose", "channelId": channel_id})
            except (Closed, OSError):
                pass

        def load(self, param, send, fail):
            key, identifier = param.get("modelKey"), param.get("identifier") or param.get("modelKey")
            fields = config_fields(param.get("loadConfigStack"))
            with studio.lock:
                studio.seen.append({"endpoint": "loadModel", "modelKey": key, "identifier": identifier,
                                    "config": fields, "ttlMs": param.get("ttlMs")})
                if key not in studio.keys:
                    fail(error(f"Cannot find a model with the key {key}", code="generic.noModelMatchingQuery"))
                    return
                if identifier in studio.loaded:
                    fail(error(f"Identifier {identifier} is already in use"))
                    return
            send({"type": "resolved", "info": studio.info(key)})
            send({"type": "progress", "progress": 0.5})
            if studio.load_mode == "oom":
                fail(error("Failed to load model", cause="insufficient system resources: the model requires more "
                           "memory than is available (out of memory)"))
                return
            with studio.lock:
                studio.loaded[identifier] = {"key": key, "context": fields.get("llm.load.contextLength") or 4096}
                info = studio.instance(identifier)
            send({"type": "success", "info": info})

        def predict(self, param, send, fail):
            fields = config_fields(param.get("predictionConfigStack"))
            draft = fields.get(SPEC + "draftModel")
            k = fields.get(SPEC + "numDraftTokensExact") or DEFAULT_K
            if studio.max_k and k > studio.max_k:
                k = fields[SPEC + "numDraftTokensExact"] = studio.max_k
            p_min = fields.get(SPEC + "minContinueDraftingProbability")
            min_len = fields.get(SPEC + "minDraftLengthToConsider") or 0
            max_tokens = (fields.get("llm.prediction.maxPredictedTokens") or {}).get("value") or 16
            with studio.lock:
                identifier = studio.find(param.get("modelSpecifier"))
                if identifier is None:
                    fail(error("No model found that matches the query", code="generic.noModelMatchingQuery"))
                    return
                behaviour = None
                if draft is not None:
                    if draft not in studio.keys:
                        fail(error(f"Draft model {draft} not found", code="generic.noModelMatchingQuery"))
                        return
                    behaviour = studio.drafts.get(draft, "ok")
                    if behaviour == "reject":
                        fail(error(f"Draft model {draft} is not compatible with main model "
                                   f"{studio.loaded[identifier]['key']}"))
                        return
                    if behaviour == "ok" and not any(e["key"] == draft for e in studio.loaded.values()):
                        studio.loaded[draft] = {"key": draft, "context": 4096}   # LM Studio loads the draft itself
                record = {"endpoint": "predict", "identifier": identifier, "draftModel": draft, "k": k,
                          "p_min": p_min, "min_draft_length": min_len, "max_tokens": max_tokens}
                studio.seen.append(record)
            messages = (param.get("history") or {}).get("messages") or []
            prompt_tokens = 7 + sum(len(part.get("text", "").split()) for m in messages
                                    for part in m.get("content") or [] if isinstance(part, dict))
            speculate = behaviour == "ok"
            counts = {"accepted": 0, "rejected": 0, "ignored": 0}
            steps = []
            t0 = time.perf_counter()
            send({"type": "promptProcessingProgress", "progress": 1.0})
            t_first = t_last = None
            emitted, step = 0, 0
            while emitted < max_tokens:
                time.sleep(0.002)
                accepted = 0
                if speculate:
                    proposed = k
                    if p_min is not None:
                        proposed = min(k, next((i for i, c in enumerate(CONFIDENCE) if c < p_min), len(CONFIDENCE)))
                    if proposed < max(min_len, 1):
                        counts["ignored"] += proposed
                    else:
                        accepted = min(ACCEPT_PATTERN[step % 4], proposed, max_tokens - emitted - 1)
                        counts["accepted"] += accepted
                        if accepted < proposed:
                            counts["rejected"] += 1
                            counts["ignored"] += proposed - accepted - 1
                        steps.append(accepted)
                step += 1
                pieces = [(accepted, True), (1, False)] if accepted else [(1, False)]
                for n, drafted in pieces:
                    text = "".join(f" w{i}" for i in range(emitted, emitted + n))
                    send({"type": "fragment", "fragment": {"content": text, "tokensCount": n,
                                                           "containsDrafted": drafted, "reasoningType": "none"}})
                    emitted += n
                    t_last = time.perf_counter()
                    if t_first is None:
                        t_first = time.perf_counter()
                        if studio.mode == "stall":
                            time.sleep(30)
            stats = {"stopReason": "maxPredictedTokensReached",
                     "tokensPerSecond": (max_tokens - 1) / (t_last - t_first) if t_last > t_first else None,
                     "numGpuLayers": -1, "timeToFirstTokenSec": round(t_first - t0, 4),
                     "promptTokensCount": prompt_tokens, "predictedTokensCount": max_tokens,
                     "totalTokensCount": prompt_tokens + max_tokens}
            if speculate:
                stats.update({"usedDraftModelKey": draft, "totalDraftTokensCount": sum(counts.values()),
                              "acceptedDraftTokensCount": counts["accepted"],
                              "rejectedDraftTokensCount": counts["rejected"],
                              "ignoredDraftTokensCount": counts["ignored"]})
            with studio.lock:
                record["truth"] = {**counts, "steps": steps, "completion_tokens": max_tokens}
                info = studio.instance(identifier)
            send({"type": "success", "stats": stats, "modelInfo": info,
                  "loadModelConfig": {"fields": [{"key": "llm.load.contextLength", "value": info["contextLength"]}]},
                  "predictionConfig": {"fields": [{"key": key, "value": value} for key, value in fields.items()]}})

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"fake LM Studio (SDK API) listening on port {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
