"""The sweep, split by concern: :mod:`.plan` (what to run, in what order), :mod:`.run` (one whole sweep
from Python: :func:`run_sweep`), the stages (:mod:`.run`, :mod:`.stages`, :mod:`.launcher`),
:mod:`.resume` (the results file), :mod:`.console` (what the user sees) and :mod:`.session` (the
command line's sweep, saving after every row)."""

from .config_file import load_config
from .console import Console, Reporter
from .plan import Combination, plan, shows_k
from .run import SweepOutcome, run_sweep
from .runner import CombinationRunner, RunnerIO, ServerInfo
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
           "CombinationRunner", "Console", "Reporter", "RunnerIO", "ServerInfo", "Sweep", "SweepOutcome", "default_paths",
           "load_config", "logs_dir_for", "plan", "run_sweep", "shows_k"]
