"""What a server says about serving several requests at once: its slots and its cumulative counters.

Part of the backend contract (``Server.slot_states`` and ``Server.totals`` in base.py); kept in a
leaf module so the concurrency measurement can name them without the rest of the contract.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlotState:
    """One of the server's slots (llama.cpp ``/slots``): the context it holds and whether it is busy."""

    slot_id: int
    n_ctx: int | None
    processing: bool


# Keys of Server.totals(): the server's own counters since it started.
TOTAL_NAMES = ("prompt_tokens", "output_tokens", "draft_tokens", "accepted_tokens", "verify_steps", "decode_calls",
               "busy_slot_decodes")
