"""The sweep, split by concern: :mod:`.plan` (what to run, in what order), :mod:`.runner` (one
combination against a backend → a row), :mod:`.resume` (the results file), :mod:`.console`
(what the user sees) and :mod:`.session` (the loop that ties them together)."""

from .console import Console, Reporter
from .plan import Combination, plan, shows_k
from .runner import CombinationRunner, ServerInfo
from .session import (
    EXIT_CONFIG,
    EXIT_ERROR,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Sweep,
    default_paths,
    logs_dir_for,
)

__all__ = ["EXIT_CONFIG", "EXIT_ERROR", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_OK", "Combination",
           "CombinationRunner", "Console", "Reporter", "ServerInfo", "Sweep", "default_paths", "logs_dir_for", "plan",
           "shows_k"]
