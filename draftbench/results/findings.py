"""Findings: warnings about a measurement as typed values.

Code decides with :class:`Code`; people read ``message``; ``setting`` names what to change
(a config key for sweeps, a command-line flag for ``bench.py``). Text is made once, where the
finding is made, and rendered by whoever shows it (console, report, results file).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from .json_types import NO_DEFAULT, STR, Str, declare, write_fields


class Code(str, Enum):
    ONE_RUN = "one_run"                          # timing noise cannot be measured
    RUN_TO_RUN_VARIATION = "run_to_run_variation"
    COLD_START = "cold_start"                    # the first measured request was much slower
    SLOW_OUTLIERS = "slow_outliers"
    SHORT_OUTPUTS = "short_outputs"
    MAX_TOKENS_TOO_LOW = "max_tokens_too_low"
    FEW_REQUESTS = "few_requests"
    CLIENT_SERVER_GAP = "client_server_gap"      # client and server tok/s disagree
    NO_DRAFT_COUNTERS = "no_draft_counters"      # acceptance unknown
    NEVER_DRAFTED = "never_drafted"              # draft_n = 0 on every request: not a speed-up
    DEGENERATE_OUTPUT = "degenerate_output"      # the target's own output loops: speed-ups on it are flattered
    SERVER_NOTE = "server_note"                  # how the server was reached (e.g. attached to LM Studio)
    # one-line diagnoses from acceptance by draft position (perpos.py)
    EARLY_REJECTIONS = "early_rejections"        # the first drafted token is mostly rejected: tokenizer/template
    ACCEPTANCE_DECAYS = "acceptance_decays"      # late positions are rarely reached (k advice: k_advice.py)
    ACCEPTANCE_HOLDS = "acceptance_holds"        # even the last position is often accepted
    TOO_FEW_DRAFTS = "too_few_drafts"            # too few drafts to tell where they fail (analysis/draft/evidence.py)
    DRAFT_LENGTH = "draft_length"                # what the evidence says about k, without per-position counts
    PER_POSITION_MISMATCH = "per_position_mismatch"   # per-position counts do not add up to the accepted total
    STREAMS_NOT_REACHED = "streams_not_reached"  # fewer requests were ever in flight at once than asked for
    COUNTERS_DISAGREE = "counters_disagree"      # per-request counters do not add up to the server's totals
    BUSY_MACHINE = "busy_machine"                # other programs kept the machine busy (lifetime.machine_load)
    PAIRS_LEFT_OUT = "pairs_left_out"            # requests left out of the comparison (analysis/pairing.py)
    OWN_LOAD = "own_load"                        # "other programs'" load differed by side: one side's own doing
    SUMMARY_BEHIND = "summary_behind"            # its tok/s etc. predate its last requests (a sweep killed mid-step)
    LEGACY = "legacy"                            # a warning read from an older results file (text only)


@dataclass(frozen=True)
class Finding:
    # a code this version does not know is read as LEGACY, so the file's may be any string
    code: Code = declare(STR, default=NO_DEFAULT)
    message: str = declare(Str(nullable=False), required=True)
    setting: str | None = declare(STR)   # what to change, as the user spells it (settings.runs, --runs)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        return write_fields(self)

    @classmethod
    def from_value(cls, value: Any) -> Finding:
        """Read a finding from a results file: an object, or a plain string (schema 1 files)."""
        if isinstance(value, str):
            return cls(Code.LEGACY, value)
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            try:
                code = Code(value.get("code"))
            except ValueError:
                code = Code.LEGACY
            setting = value.get("setting")
            return cls(code, value["message"], setting if isinstance(setting, str) else None)
        raise ValueError(f"a warning must be a string or an object with a \"message\", not {value!r:.60}")


def has(findings: tuple[Finding, ...] | list[Finding], code: Code) -> bool:
    return any(f.code is code for f in findings)
