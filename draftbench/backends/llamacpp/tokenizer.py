"""llama-server's own tokenizer, for cutting long prompts to an exact token count.

``POST /tokenize``, ``/detokenize`` and ``/apply-template`` (build 11434): the chat prompt a request
becomes is the template applied to its messages, tokenised with the special tokens the server adds
itself — so :meth:`prompt_tokens` is what the server's ``usage.prompt_tokens`` will say. None of these
generates a token: the server never sees an answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import requests

from ...common.errors import ServerError, ServerErrorKind
from ..base import Server
from ..http.client import post_json
from ..http.server_values import MAX_TOKENS

TIMEOUT_S = 120.0            # a long document tokenised on a busy CPU


class LlamaCppTokenizer:
    def __init__(self, server: Server, timeout_s: float = TIMEOUT_S):
        self.server, self.timeout_s = server, timeout_s

    def _post(self, path: str, body: dict) -> dict:
        url = self.server.base_url + path
        try:
            status, answer, text = post_json(self.server.http(), url, body, headers=self.server.headers(),
                                             timeout_s=self.timeout_s)
        except requests.RequestException as exc:
            raise ServerError(f"{url} did not answer ({exc})", "check that llama-server is still running",
                              kind=ServerErrorKind.UNREACHABLE) from None
        if status != 200 or not isinstance(answer, dict):
            raise ServerError(f"{url} answered HTTP {status}: {text[:200]}", "use a llama-server build with "
                              "/tokenize, /detokenize and /apply-template (2025 or newer)",
                              kind=ServerErrorKind.FLAGS)
        return answer

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        answer = self._post("/tokenize", {"content": text, "add_special": special, "parse_special": special})
        tokens = answer.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) and 0 <= t <= MAX_TOKENS for t in tokens):
            raise ServerError("/tokenize answered without a list of token ids", "use a current llama-server build",
                              kind=ServerErrorKind.FLAGS)
        return tokens

    def detokenize(self, tokens: Sequence[int]) -> str:
        content = self._post("/detokenize", {"tokens": list(tokens)}).get("content")
        if not isinstance(content, str):
            raise ServerError("/detokenize answered without text", "use a current llama-server build",
                              kind=ServerErrorKind.FLAGS)
        return content

    def prompt_tokens(self, messages: Sequence[dict]) -> int:
        prompt = self._post("/apply-template", {"messages": [dict(m) for m in messages]}).get("prompt")
        if not isinstance(prompt, str):
            raise ServerError("/apply-template answered without a prompt", "use a llama-server build with "
                              "/apply-template (2025 or newer)", kind=ServerErrorKind.FLAGS)
        return len(self.tokenize(prompt, special=True))
