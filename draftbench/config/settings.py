"""The settings of a sweep: one frozen, typed :class:`Settings`, each key declared once.

Every key is a dataclass field carrying its :class:`~draftbench.config.field.Field` (type, default,
bounds, documentation, whether it changes what is measured); ``COMMON_SETTINGS``, ``DEFAULTS`` and
the measured keys are derived from these declarations. A backend's own keys are
a :class:`BackendSettings` subclass the backend declares (``settings.backend``); the config file and
the results file keep them flat beside the others (upstream's format), which :meth:`Settings.to_dict`
writes and :meth:`Settings.from_dict` reads.

A leaf of the config layer (only :mod:`draftbench.common` below it), so backends can declare their
settings without importing the config loader.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .field import UNRECORDED, Field, declared_fields, read_value, setting

B = TypeVar("B", bound="BackendSettings")

MAX_STAGES = 1000        # settings.stages, and --more: the most stages one run may add


@dataclass(frozen=True)
class BackendSettings:
    """A backend's own settings keys (none here): each backend subclasses it with its fields."""

    @classmethod
    def schema(cls) -> dict[str, Field]:
        return declared_fields(cls)

    @classmethod
    def of(cls: type[B], settings: Settings) -> B:
        """``settings.backend`` as this backend's type. Settings made without a backend (``Settings()``)
        hold this backend's defaults; settings made for another backend are a programming error."""
        own = settings.backend
        if isinstance(own, cls):
            return own
        if type(own) is BackendSettings:
            return cls()
        raise TypeError(f"settings of {type(own).__name__} given where {cls.__name__} was needed")

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.schema()}


@dataclass(frozen=True)
class Settings:
    """A sweep's validated settings (``$.settings`` of a config, defaults filled in)."""

    # upstream keys
    llama_bin: str | None = setting(
        "str", None, "path to llama-server (default: found on PATH, common build folders, or the project's cached "
        "build)")
    runs: int = setting("int", 1, "repetitions of the whole prompt set per combination", min=1, max=1000,
                        measured=True)
    max_tokens: int = setting("int", 512, "tokens to generate per request", min=1, max=1_000_000, measured=True)
    temperature: float | list[float] = setting(
        "float_or_list", 0.0, "sampling temperature (0 = greedy: the output must equal the target's own); a list "
        "([0, 0.7, 1.0]) is an axis: every candidate measured at each against the target alone at that temperature, a "
        "verdict per temperature and up to which each candidate pays (docs/temperature.md)", min=0, max=5,
        measured=True)
    gpu_layers: int = setting("int", 99, "layers to offload to the GPU (-ngl); also used for the draft", min=-1,
                              max=100_000, measured=True)
    ctx_size: int = setting("int", 4096, "context size (-c)", min=64, max=10_000_000, measured=True)
    port: int = setting("int", 8080, "port for the server we start (0 = any free port)", min=0, max=65535)
    # draftbench additions
    host: str = setting("str", "127.0.0.1", "address the server binds to")
    allow_remote: bool = setting(
        "bool", False, "allow a server address other than loopback (settings.host or --host in extra_args): the "
        "server is then reachable from other machines")
    draft_max: int | list[int] | None = setting(
        "int_or_list", None, "draft length k (llama.cpp --spec-draft-n-max / --draft-max; LM Studio through its "
        "SDK); a list sweeps several values; null = the server's default", min=1, max=256)
    draft_placement: str | list[str] | None = setting(
        "any", None, "llama.cpp RPC: where each draft runs beside a target split over RPC endpoints: \"local\" "
        "(this machine), \"rpc\" (split over the target's RPC devices), or [\"local\", \"rpc\"] to measure both as "
        "candidates; null = llama-server's default (the draft follows the target's devices)")
    draft_p_min: float | None = setting(
        "float", None, "minimum draft probability (llama.cpp --spec-draft-p-min; LM Studio through its SDK)",
        min=0, max=1, measured=True)
    extra_args: list[str] = setting("str_list", [], "extra arguments appended to every server command",
                                    measured=True)
    prompts: str | list[str] = setting(
        "any", "standard", "prompt set: \"standard\" (the default: the built-in six, MT-Bench's 80 first turns and 16 "
        "HumanEval problems — enough for every stage to draw fresh prompts), \"builtin\" (upstream's six), a list of "
        "built-in categories and standard sets (\"mt-bench\", \"mt-bench:coding\", \"humaneval\"), or a path to a "
        ".txt/.jsonl prompt file", measured=True, older="builtin")
    prompts_per_category: int | None = setting(
        "int", None, "take this many prompts (conversations: an MT-Bench question with both its turns) of each "
        "category, a sample drawn with settings.seed; null = all", min=1, max=100_000, measured=True)
    warmup: int = setting("int", 1, "warm-up requests per server, excluded from statistics", min=0, max=100,
                          measured=True)
    seed: int = setting("int", 42, "sampling seed sent with every request", min=0, max=2**31 - 1, measured=True)
    startup_timeout_s: float = setting("float", 600.0, "seconds to wait for a server to load", min=1, max=86400)
    request_timeout_s: float = setting("float", 900.0, "seconds one request may take in total", min=1, max=86400)
    stall_timeout_s: float = setting(
        "float", 120.0, "seconds without a streamed data event (keep-alive comments do not count) before a request "
        "is declared stalled", min=1, max=86400)
    noise_floor: float = setting("float", 0.02, "speed-ups smaller than this fraction are never called "
                                 "significant", min=0, max=1)
    control_baseline: bool = setting(
        "bool", False, "run each target's baseline again after its drafts (an A/A check that measures drift over "
        "the sweep)")
    # A file written before this key existed was measured in upstream's sequential order (issue 23).
    design: str = setting(
        "str", "auto", "how candidates are measured against the baseline so that a change in the machine's speed "
        "hits both sides: \"interleaved\" (both servers up, requests in ABBA order), \"bracketed\" (a baseline "
        "block before and after every candidate block), \"sequential\" (upstream's order; drift-prone) or \"auto\" "
        "(interleaved where both fit in memory, else bracketed)",
        choices=("auto", "interleaved", "bracketed", "sequential"), measured=True, older="sequential")
    search: str = setting(
        "str", "exhaustive", "\"exhaustive\" measures every candidate at every stage until the verdict decides; "
        "\"adaptive\" races them: a candidate shown slower than another, or unable to gain the noise floor, leaves "
        "(see docs/adaptive.md)", choices=("exhaustive", "adaptive"), measured=True)
    # A file written before this key existed was measured in blocks (issue 23), not in stages: not resumed.
    stages: int = setting(
        "int", 6, "stages planned per target: each measures fresh prompts (settings.prompts_per_stage) on fresh "
        "servers for every candidate still in, and the verdict looks after each (docs/statistics.md); --more runs "
        "stages beyond them", min=1, max=MAX_STAGES, measured=True, older=0)
    prompts_per_stage: int = setting(
        "int", 6, "prompts each stage measures, drawn fresh from the prompt set without replacement, stratified by "
        "category (a set smaller than two stages' worth is measured whole at every stage)", min=1, max=100_000,
        measured=True, older=0)
    budget_s: float | None = setting(
        "float", None, "seconds of measuring per target: when they are spent the target's verdict is unresolved "
        "(with what more would settle it) and running the same command with a larger budget continues it "
        "(null = no limit)", min=1, max=10_000_000)
    draft_alone: bool = setting("bool", False, "benchmark each draft alone too, to measure its cost ratio c for "
                                "the theory column")
    ceiling: bool = setting(
        "bool", False, "also run each draft at synthetic acceptance (llama.cpp --spec-synth-len): at its measured "
        "mean accepted length and at full acceptance, to show what its cost allows on this hardware")
    max_combinations: int = setting(
        "int", 2000, "the most combinations a config may make (parameter lists multiply: six lists of ten values "
        "are a million); beyond it the config is refused", min=1, max=1_000_000)
    concurrency: int | list[int] = setting(
        "int_or_list", [1], "concurrent streams: each value N starts the server with N slots and measures N "
        "requests at once; a list ([1, 2, 4, 8]) measures every level", min=1, max=1024, measured=True)
    # the context axis (docs/long-context.md)
    context_tokens: int | list[int] | None = setting(
        "int_or_list", None, "prompt lengths to measure (the context axis): each N measures every candidate and its "
        "baseline on long prompts of N tokens (real documents cut with the target's own tokenizer; llama.cpp), with "
        "-c sized to fit; a list ([512, 2048, 8192]) gives a verdict per length and the length up to which each "
        "candidate pays", min=64, max=10_000_000, measured=True)
    context_filler: str = setting(
        "str", "documents", "what long prompts are made of: \"documents\" (real text and code, see "
        "docs/long-context.md) or \"random-tokens\" (the same tokens shuffled; labelled, overstates speculative "
        "gains)", choices=("documents", "random-tokens"), measured=True)
    # output truth at temperature > 0 (docs/temperature.md)
    distribution_samples: int | None = setting(
        "int", None, "at a temperature above 0: answers per prompt for the output-distribution check — after a "
        "target's stages, a server of the target alone and one per candidate sample this many short answers to each "
        "of 3 prompts (on servers of their own: never measured for speed) and a two-sample test says whether the "
        "candidate's answers come from the target's distribution; null = not checked (the verdict says so)", min=8,
        max=10_000)
    # what a candidate may hold in memory (docs/memory.md)
    memory_limit_gib: dict[str, float] | None = setting(
        "float_map", None, "GiB each device may hold, by the name llama-server's log gives it ({\"CUDA0\": 23.5}; "
        "\"CPU\", \"MTL0\", \"RPC0[host:port]\"): a candidate whose server held more there is measured but never "
        "recommended (the verdict is the fastest that fits), and --dry-run flags from the model files what cannot "
        "fit; null = no limit", min=0, max=1_000_000, min_exclusive=True)
    typical_output_tokens: int | None = setting(
        "int", None, "the answer length the long-context end-to-end figure models (null = max_tokens)", min=1,
        max=1_000_000)
    # the backend's own keys (flat in the files: see to_dict / from_dict)
    backend: BackendSettings = dataclasses.field(default_factory=BackendSettings)

    @classmethod
    def schema(cls, backend: type[BackendSettings] = BackendSettings) -> dict[str, Field]:
        """Every key, the shared ones first, then ``backend``'s."""
        return {**declared_fields(cls), **backend.schema()}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], backend: type[BackendSettings] = BackendSettings) -> Settings:
        """Settings from flat, validated values (a key not given: its default)."""
        own = {k: values[k] for k in backend.schema() if k in values}
        return cls(**{k: values[k] for k in COMMON_SETTINGS if k in values}, backend=backend(**own))

    @classmethod
    def from_file(cls, snapshot: Mapping[str, Any] | None, backend: type[BackendSettings] = BackendSettings, *,
                  measured: bool = True) -> Settings:
        """The settings a results file was made with. A key the file lacks reads as its value for files older
        than the key (``Field.older``) where it has ``measured`` rows, else as its default; a value that is
        not valid (a file we did not write) as the default."""
        snapshot = snapshot or {}
        values = {}
        for key, spec in cls.schema(backend).items():
            if key in snapshot:
                values[key] = read_value(snapshot[key], spec)
            elif measured and spec.older is not UNRECORDED:
                values[key] = spec.older
        return cls.from_dict(values, backend)

    def to_dict(self) -> dict[str, Any]:
        """The flat form the config and results files hold: the shared keys, then the backend's."""
        return {**{key: getattr(self, key) for key in COMMON_SETTINGS}, **self.backend.to_dict()}

    def with_values(self, **values: Any) -> Settings:
        """A copy with these flat keys changed (the backend's keys go to ``backend``)."""
        own = {k: values.pop(k) for k in list(values) if k in self.backend.schema()}
        return dataclasses.replace(self, **values, backend=dataclasses.replace(self.backend, **own))

    @property
    def temperatures(self) -> tuple[float, ...]:
        """Every temperature measured, ascending: the one number, or each of the axis."""
        value = self.temperature
        return tuple(sorted({float(v) for v in (value if isinstance(value, (list, tuple)) else [value])}))

    @property
    def temperature_axis(self) -> bool:
        """Whether the temperature is an axis (a list): rows then carry theirs and a verdict is made per temperature."""
        return isinstance(self.temperature, (list, tuple))

    def values_of(self, keys: Iterable[str]) -> dict[str, Any]:
        """These flat keys and their values; None for a key these settings do not have (another backend's)."""
        flat = self.to_dict()
        return {key: flat.get(key) for key in keys}


COMMON_SETTINGS: dict[str, Field] = declared_fields(Settings)
DEFAULTS = Settings()       # every key at its default (a library call, or the CLIs' option defaults)


def measured_keys(*backends: type[BackendSettings]) -> tuple[str, ...]:
    """Settings that change what is measured (the shared ones and ``backends``'), in a stable order."""
    keys = [k for k, f in COMMON_SETTINGS.items() if f.measured]
    for backend in backends:
        keys += [k for k, f in backend.schema().items() if f.measured and k not in keys]
    return tuple(keys)


@dataclass(frozen=True)
class Override:
    """A setting given on the command line (``--budget 600``): it wins over the config file's value, is
    validated with it, and a problem with it names the flag."""

    key: str
    value: Any
    flag: str                     # as the user wrote it, without the value: "--budget"

    def where(self) -> str:
        """The flag and its value, as a problem's place: ``--budget 600``, ``--design interleaved``."""
        if isinstance(self.value, bool):
            return self.flag
        values = self.value if isinstance(self.value, list) else [self.value]     # a list as given: "0,0.7"
        return f"{self.flag} {','.join(_shown(v) for v in values)}"


def _shown(value: Any) -> str:
    """600.0 as "600"; 1e308 as "1e+308", not its 309 digits."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() and abs(value) < 1e16 \
        else f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Origin:
    """Where each setting came from: the config file (``$.settings.<key>``) or a flag that overrode it."""

    overrides: tuple[Override, ...] = ()

    def flag(self, key: str) -> Override | None:
        return next((o for o in self.overrides if o.key == key), None)

    def where(self, key: str) -> str:
        """A problem's place for ``key``: the flag as given, or its JSON path."""
        given = self.flag(key)
        return given.where() if given else f"$.settings.{key}"

    def name(self, key: str) -> str:
        """How a message names ``key``: ``--budget`` or ``settings.budget_s``."""
        given = self.flag(key)
        return given.flag if given else f"settings.{key}"


FROM_FILE = Origin()        # every setting as the config file gives it: no flag overrode one
