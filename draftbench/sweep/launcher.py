"""One launcher for every measuring path: start a server for a combination, say what it runs, warm it up
on prompts outside the measured set, stop it.

A server started here is a *session*: ``s<N>``, numbered in the order servers start over the whole
results file (``analysis/pairing.session_order`` reads what a look knew from it), with what the row
records about it (``ServerInfo``), the notes it made, whether speculation is on, and the prompts its
method's state has seen (a stateful n-gram method must never be measured on an answer it has seen).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..backends.base import Server, SpeculationStatus
from ..common.errors import DraftbenchError, RequestError, ServerError
from ..config.prompts import Prompt
from ..lifetime.process import free_port
from ..measure.sequential import MeasureOptions, explain_failure, warm_up
from ..results.file import ResultsFile
from ..results.findings import Code, Finding
from ..results.memory import ServerMemory
from ..results.topology import describe as describe_topology
from .console import Reporter
from .plan import Combination
from .runner import CombinationRunner, EveryServerFails, ServerInfo, log_slug
from .schedule import is_stateful


@dataclass
class Session:
    """A started server and what its row records about it."""

    combo: Combination
    server: Server
    id: str
    info: dict
    notes: list[Finding]
    status: SpeculationStatus
    stateful: bool
    started: float
    seen: set[str] = field(default_factory=set)
    methods: tuple[str, ...] | None = None        # what /slots said it ran, asked before it stops
    memory: ServerMemory | None = None            # what it held (Server.memory_use), asked before it stops
    memory_counted: bool = False                  # its memory is in its row's (which counts the servers that said)


class LaunchFailed(Exception):
    """A server could not start, speculate or warm up; ``session``: the one that started, if it did."""

    def __init__(self, error: DraftbenchError, session: Session | None = None, inactive: bool = False):
        super().__init__(str(error))
        self.error, self.session, self.inactive = error, session, inactive


def next_session_number(results: ResultsFile) -> int:
    """Session ids are ``s<N>``, unique in a results file: the next free N."""
    numbers = [int(m.group(1)) for row in results.results for r in row.requests
               if r.session and (m := re.fullmatch(r"s(\d+)", r.session))]
    return max(numbers, default=0) + 1


class Launcher:
    """Starts and stops the servers of one sweep (``runner``: the launch spec, port and checks)."""

    def __init__(self, runner: CombinationRunner, reporter: Reporter, clock: Callable[[], float], first: int = 1):
        self.runner, self.reporter, self.clock = runner, reporter, clock
        self.numbers = itertools.count(first)

    def open(self, combo: Combination, *, beside: bool = False) -> Session:
        """Start ``combo``'s server (``beside``: another of ours holds the configured port)."""
        session = f"s{next(self.numbers)}"
        log_path = self.runner.logs_dir / f"{session}-{log_slug(combo.title(True))}.log"
        spec = self.runner.launch_spec(combo, 0, log_path)
        port = free_port(spec.host) if beside and self.runner.backend.owns_port else self.runner.choose_port(spec.host)
        spec = replace(spec, port=port)
        self.reporter.server_starting()
        started = self.clock()
        try:
            server = self.runner.launch(spec)
        except EveryServerFails:
            raise                    # the sweep stops: not one combination's failure
        except DraftbenchError as exc:
            raise LaunchFailed(exc) from None
        self.reporter.server_ready(server.load_time_s)
        if server.topology:
            self.reporter.note(f"topology: {describe_topology(server.topology)}")
        for note in server.notes:
            self.reporter.note(note)
        status = server.speculation_status(requested=combo.is_speculative)
        info = ServerInfo.of(self.runner.backend_name, server, log=str(log_path), port=spec.port).to_dict()
        opened = Session(combo, server, session, info, [Finding(Code.SERVER_NOTE, n) for n in server.notes], status,
                         is_stateful(combo.candidate.method if combo.candidate else ()), started)
        if combo.is_speculative and status.active is False:
            self.stop(opened)
            self.reporter.speculation_inactive(status.reason)
            raise LaunchFailed(ServerError(f"speculation not active: {status.reason}", ""), opened, inactive=True)
        return opened

    def warm(self, session: Session, prompts: Sequence[Prompt], options: MeasureOptions) -> None:
        """Warm-up requests on dedicated prompts (never a measured one)."""
        try:
            session.seen.update(w.id for w in warm_up(session.server, prompts, options))
        except (RequestError, ServerError) as exc:
            raise LaunchFailed(explain_failure(session.server, exc), session) from None

    def stop(self, session: Session) -> None:
        """Ask what it ran, keep the notes it made while measuring, stop it."""
        try:
            if session.methods is None:
                session.methods = session.server.active_methods()
            session.memory = session.server.memory_use()
            for note in session.server.notes[len(session.notes):]:     # learnt while measuring (LM Studio's k)
                self.reporter.note(note)
                session.notes.append(Finding(Code.SERVER_NOTE, note))
        finally:
            session.server.stop()
            self.reporter.server_stopped()
