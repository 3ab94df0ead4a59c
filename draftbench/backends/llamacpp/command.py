"""What a llama-server build accepts (read from its ``--help``, cached per binary) and the exact
command for one combination. llama.cpp renames flags often, so nothing here assumes a build."""

from __future__ import annotations

import hashlib
import json
import os
import re

from ...common.errors import BinaryNotFoundError, Problem, ServerError, ServerErrorKind
from ...common.files import atomic_write_text, cache_dir
from ...common.reading import SMALL_LIMIT, UnreadableFile, read_limited
from ...common.suggest import closest, did_you_mean
from ...config.candidates import DRAFT_MAX, DRAFT_PLACEMENT, CandidateSpec
from ...config.server_env import EnvRoute, ServerEnvironment, llama_environment
from ...lifetime.capture import run_capped
from ..base import LaunchSpec
from ..executables import find_executable
from .builds import build_version, cached_bin_dirs
from .settings import LlamaCppSettings
from .stats import TRACE_VERBOSITY, VERBOSITY_FLAGS

COMMON_BUILD_DIRS = (
    "~/llama.cpp/build/bin",
    "~/Code/llama.cpp/build/bin",
    "~/code/llama.cpp/build/bin",
    "~/src/llama.cpp/build/bin",
    "~/Code/ml/llama.cpp/build/bin",
    "./llama.cpp/build/bin",
    "/opt/llama.cpp/build/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
)

_HOW_TO_GET = ("run `make llama-server` in the draftbench folder (builds it once into ~/.cache/draftbench), "
               "install llama.cpp (e.g. `brew install llama.cpp`), or set settings.llama_bin / --llama-bin")


def find_llama_server(explicit: str | None = None) -> str:
    """Locate llama-server: explicit path, $DRAFTBENCH_LLAMA_SERVER, PATH, build folders, our cache."""
    found = find_executable("llama-server", explicit, env_var="DRAFTBENCH_LLAMA_SERVER",
                            setting="settings.llama_bin / --llama-bin", how_to_get=_HOW_TO_GET,
                            candidates=tuple(os.path.join(d, "llama-server") for d in COMMON_BUILD_DIRS
                                             + cached_bin_dirs()))
    if found is None:
        raise BinaryNotFoundError("llama-server was not found (searched PATH, common build folders and "
                                  f"{cache_dir()})", _HOW_TO_GET)
    return found


# --------------------------------------------------------------------------- capabilities

_caps_memo: dict[str, dict] = {}
HELP_TIMEOUT_S = 60.0            # a cold start from a network drive can be slow; the read ends as soon as it exits
HELP_MAX_BYTES = 4 * 10**6       # llama-server's --help is about 50 kB; a program that never stops is cut here
CAPS_FORMAT = 4          # bump when capabilities() records more: older cache files are then ignored
CAPS_KEYS = frozenset({"flags", "version", "spec_types", "removed_flags", "binary", "env"})   # what it records


def _binary_key(binary: str) -> str:
    st = os.stat(binary)
    return hashlib.sha256(f"{os.path.realpath(binary)}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]


def parse_spec_types(help_text: str) -> list[str]:
    """The names in ``--spec-type none,draft-simple,…`` (its own line of ``--help``)."""
    m = re.search(r"^--spec-type\s+([a-z0-9,-]+)", help_text, re.MULTILINE)
    return [t for t in m.group(1).split(",") if t and t != "none"] if m else []


def removed_flags(help_text: str) -> list[str]:
    """Flags ``--help`` still lists but says were removed (passing one aborts the server)."""
    out = []
    for block in re.split(r"\n(?=-)", help_text):
        if "has been removed" in block:
            out += re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", block.split("  ", 1)[0])
    return sorted(set(out))


_ENV_NAME = re.compile(r"\(env: ([A-Za-z0-9_]+)\)")
HELP_COLUMN = 40        # llama.cpp's common_arg::to_string: the description starts here, or on the next line


def env_routes(help_text: str) -> dict[str, EnvRoute]:
    """Every ``(env: NAME)`` of ``--help``: the flags of its option, their negations and whether it takes a value
    (``-t,    --threads N`` … ``(env: LLAMA_ARG_THREADS)``; ``--mmap, --no-mmap`` … ``(env: LLAMA_ARG_MMAP)``)."""
    routes: dict[str, EnvRoute] = {}
    for block in re.split(r"\n(?=-)", help_text):
        names = _ENV_NAME.findall(block)
        if not names:
            continue
        first = block.split("\n", 1)[0]
        head = first[:HELP_COLUMN] if len(first) > HELP_COLUMN and first[HELP_COLUMN - 3:HELP_COLUMN].isspace() \
            else first
        words = [w.rstrip(",") for w in head.split()]
        flags = [w for w in words if w.startswith("-")]
        hint = any(not w.startswith("-") for w in words)
        # An on/off option lists its names, then its negations (`-kvo, --kv-offload, -nkvo, --no-kv-offload`,
        # `--repack, -nr, --no-repack`): they start at the first later name that reads "no".
        cut = len(flags)
        if any(f.startswith("--no-") for f in flags[1:]):
            cut = next(i for i, f in enumerate(flags)
                       if i and (f.startswith("--no-") or (f[1:2] == "n" and f[:2] != "--")))
        route = EnvRoute(tuple(flags[:cut]), tuple(flags[cut:]), takes_value=hint)
        routes.update({name: route for name in names})
    return routes


def capabilities(binary: str) -> dict:
    """Flags the binary accepts (from ``--help``) and its version; cached per binary."""
    key = _binary_key(binary)
    if key in _caps_memo:
        return _caps_memo[key]
    cache_file = cache_dir() / "capabilities" / f"{key}-v{CAPS_FORMAT}.json"
    try:
        caps = json.loads(read_limited(cache_file, SMALL_LIMIT))
        if isinstance(caps, dict) and caps.keys() >= CAPS_KEYS:      # a file another version wrote is read again
            _caps_memo[key] = caps
            return caps
    except (UnreadableFile, ValueError):
        pass
    text = _printed(binary, "--help")
    version_text = _printed(binary, "--version")
    flags = sorted(set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text)))
    if "--model" not in flags and "-m" not in flags:
        raise BinaryNotFoundError(f"{binary} does not look like llama-server (its --help lists no --model)",
                                  f"point settings.llama_bin at llama-server; {_HOW_TO_GET}")
    version = build_version(binary)     # our own build's stamp names it better than the sdist build itself does
    for line in version_text.splitlines() if version is None else ():
        if line.startswith("version:"):
            version = line.split(":", 1)[1].strip()
            break
    caps = {"flags": flags, "version": version, "spec_types": parse_spec_types(text),
            "removed_flags": removed_flags(text), "binary": os.path.realpath(binary),
            "env": {name: route.to_dict() for name, route in env_routes(text).items()}}
    _caps_memo[key] = caps
    try:
        atomic_write_text(cache_file, json.dumps(caps))
    except OSError:
        pass
    return caps


def _printed(binary: str, flag: str) -> str:
    """What ``binary flag`` prints, read within :data:`HELP_TIMEOUT_S` and at most :data:`HELP_MAX_BYTES`."""
    try:
        run = run_capped([binary, flag], timeout_s=HELP_TIMEOUT_S, max_bytes=HELP_MAX_BYTES)
    except OSError as exc:
        raise BinaryNotFoundError(f"cannot run {binary} {flag}: {exc.strerror or exc}",
                                  f"check that it is a working llama-server; {_HOW_TO_GET}") from None
    if run.over_cap:
        raise BinaryNotFoundError(f"{binary} {flag} printed more than {HELP_MAX_BYTES // 10**6} MB and was stopped "
                                  "(llama-server's own --help is about 50 kB): it does not look like llama-server",
                                  f"point settings.llama_bin at llama-server; {_HOW_TO_GET}")
    if run.timed_out:
        raise BinaryNotFoundError(f"{binary} {flag} did not finish within {HELP_TIMEOUT_S:g} s and was stopped "
                                  "(llama-server answers at once)", f"check that it is a working llama-server "
                                  f"(run `{binary} {flag}` yourself); {_HOW_TO_GET}")
    return run.output


def first_flag(caps: dict, *names: str) -> str | None:
    """The first of ``names`` this build accepts (llama.cpp renames flags; older names come later)."""
    flags = set(caps["flags"])
    return next((n for n in names if n in flags), None)


DRAFT_TYPES_NEEDING_A_MODEL = ("draft-simple", "draft-eagle3")   # MTP/DFlash/DSpark heads may live in the target


def param_flag(name: str) -> str:
    """A candidate parameter's flag: ``ngram_mod_n_match`` → ``--spec-ngram-mod-n-match``."""
    return "--spec-" + name.replace("_", "-")


def spec_types(spec: LaunchSpec) -> list[str]:
    """The ``--spec-type`` list for a combination: its methods, else draft-simple for a draft file."""
    return list(spec.method) or (["draft-simple"] if spec.draft else [])


def _add_param(cmd: list[str], caps: dict, name: str, value) -> None:
    flag = param_flag(name)
    if flag not in caps["flags"]:
        raise ServerError(f"this llama-server has no {flag} (candidate parameter {name!r})",
                          "check the candidate's params against `llama-server --help`", kind=ServerErrorKind.FLAGS)
    if value is True:
        cmd.append(flag)
    elif value is not False:
        cmd += [flag, f"{value:g}" if isinstance(value, float) else str(value)]


_devices_memo: dict[str, list[str]] = {}
_DEVICE_LINE = re.compile(r"^\s+([A-Za-z][\w.-]*): ", re.MULTILINE)


def local_devices(binary: str) -> list[str]:
    """This machine's offload devices (``--list-devices`` without ``--rpc``: GPUs; none on a CPU-only build)."""
    key = _binary_key(binary)
    if key not in _devices_memo:
        try:      # read up to a cap within a time limit, as --help is (see _printed)
            run = run_capped([binary, "--list-devices"], timeout_s=HELP_TIMEOUT_S, max_bytes=HELP_MAX_BYTES)
        except OSError as exc:
            raise ServerError(f"cannot run {binary} --list-devices: {exc}", "check that it is a working llama-server",
                              kind=ServerErrorKind.FLAGS) from None
        if not run.complete:
            raise ServerError(f"{binary} --list-devices did not finish within {HELP_TIMEOUT_S:g} s or printed more than "
                              f"{HELP_MAX_BYTES // 10**6} MB, and was stopped", "check that it is a working llama-server",
                              kind=ServerErrorKind.FLAGS)
        text = run.output.partition("Available devices:")[2]
        _devices_memo[key] = _DEVICE_LINE.findall(text)
    return _devices_memo[key]


def rpc_arguments(caps: dict, spec: LaunchSpec, rpc_devices: dict[str, list[str]],
                  local: list[str]) -> tuple[list[str], list[str]]:
    """``(first, draft)``: ``--rpc`` (it must come before any device name that refers to an RPC device) and
    the draft's device list for ``spec.draft_placement`` (``rpc_devices``: endpoint -> llama-server's names)."""
    if not spec.rpc:
        return [], []
    if "--rpc" not in caps["flags"]:
        raise ServerError(f"this llama-server ({caps.get('binary')}) was built without RPC support (its --help lists "
                          "no --rpc)", "build one with RPC: `make llama-server` (GGML_RPC=ON), or point "
                          "settings.llama_bin at such a build", kind=ServerErrorKind.FLAGS)
    first = ["--rpc", ",".join(spec.rpc)]
    if not spec.draft or spec.draft_placement is None:
        return first, []
    flag = first_flag(caps, "-devd", "--device-draft", "--spec-draft-device")
    if flag is None:
        raise ServerError("this llama-server cannot place the draft on chosen devices (no -devd/--device-draft)",
                          "remove settings.draft_placement, or use a newer llama.cpp", kind=ServerErrorKind.FLAGS)
    if spec.draft_placement == "rpc":
        names = [name for endpoint in spec.rpc for name in rpc_devices.get(endpoint, [])]
        return first, [flag, ",".join(names)]
    return first, [flag, ",".join(local) or "none"]     # none: not offloaded, the draft runs on this CPU


def server_environment(caps: dict, environ: dict[str, str]) -> ServerEnvironment:
    """The environment a server of this build gets, and the flags standing for the variables it inherits
    (config/server_env.py), from the ``(env: …)`` routes its ``--help`` names."""
    routes = {name: EnvRoute.from_dict(value) for name, value in (caps.get("env") or {}).items()}
    return llama_environment(environ, routes)


def build_command(binary: str, caps: dict, spec: LaunchSpec, *, rpc_devices: dict[str, list[str]] | None = None,
                  local: list[str] | None = None, inherited: tuple[str, ...] = ()) -> list[str]:
    """The exact llama-server command for one combination, using only flags this build knows; ``inherited``:
    the flags standing for the environment's variables, first (after ``--rpc``, which must precede any device name
    one of them may hold), so that every later flag wins as it would."""
    rpc_first, draft_devices = rpc_arguments(caps, spec, rpc_devices or {}, local or [])
    # -c is the whole KV pool, split evenly across the -np slots (llama.cpp without --kv-unified,
    # which is off when -np is given): N slots need N times ctx_size for each to keep ctx_size.
    cmd = [binary, *rpc_first, *inherited, "-m", spec.target, "--host", spec.host, "--port", str(spec.port),
           "-c", str(spec.ctx_size * spec.concurrency), "-ngl", str(spec.gpu_layers)]
    slots = first_flag(caps, "-np", "--parallel")
    if slots:
        cmd += [slots, str(spec.concurrency)]
    elif spec.concurrency > 1:
        raise ServerError(f"this llama-server has no -np/--parallel, so it cannot serve {spec.concurrency} requests "
                          "at once", "use a newer llama.cpp build, or settings.concurrency [1]",
                          kind=ServerErrorKind.FLAGS)
    if first_flag(caps, "--metrics"):
        cmd += ["--metrics"]
    types = spec_types(spec)
    if "--spec-type" in caps["flags"]:
        # Say "none" for a baseline too: a build that speculates by default must not flatter it.
        cmd += ["--spec-type", ",".join(types) if types else "none"]
    elif types not in ([], ["draft-simple"]):
        raise ServerError(f"this llama-server has no --spec-type, so it cannot run {', '.join(types)}",
                          "use a newer llama.cpp build", kind=ServerErrorKind.FLAGS)
    if spec.draft:
        cmd += [first_flag(caps, "-md", "--model-draft", "--spec-draft-model") or "-md", spec.draft]
        draft_ngl = first_flag(caps, "-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft")
        if draft_ngl and "spec_draft_ngl" not in spec.params and "draft_ngl" not in spec.params:
            cmd += [draft_ngl, str(spec.gpu_layers)]
        cmd += draft_devices
    if spec.draft_max is not None and (spec.draft or any(t.startswith("draft-") for t in types)):
        flag = first_flag(caps, "--spec-draft-n-max", "--draft-max", "--draft-n-max", "--draft")
        if flag is None:
            raise ServerError("this llama-server has no flag for the draft length",
                              "remove settings.draft_max, or use a newer llama.cpp", kind=ServerErrorKind.FLAGS)
        cmd += [flag, str(spec.draft_max)]
    p_min = spec.settings.draft_p_min
    if p_min is not None and spec.draft and "draft_p_min" not in spec.params:
        flag = first_flag(caps, "--spec-draft-p-min", "--draft-p-min")
        if flag is None:
            raise ServerError("this llama-server has no flag for the draft p-min",
                              "remove settings.draft_p_min", kind=ServerErrorKind.FLAGS)
        cmd += [flag, f"{p_min:g}"]
    for name, value in sorted(spec.params.items()):
        _add_param(cmd, caps, name, value)
    verbosity = first_flag(caps, *VERBOSITY_FLAGS)
    if verbosity and (spec.rpc or (LlamaCppSettings.of(spec.settings).method_stats and "--spec-type" in caps["flags"])):
        # Per-method statistics are logged at trace level only, and so are the buffer sizes that prove an RPC
        # split. Every server of a target gets the same level, its baseline too (benchmarks/trace_verbosity.py
        # measures what it costs).
        cmd += [verbosity, str(TRACE_VERBOSITY)]
    cmd += list(spec.extra_args)
    return cmd


def stats_lines_expected(cmd: list[str]) -> int:
    """How many ``statistics`` lines this command's server prints per request: one per speculative
    type, when it logs at trace verbosity (the last verbosity flag wins, extra_args included)."""
    level = 3
    types: list[str] = []
    for i, arg in enumerate(cmd):
        value = cmd[i + 1] if i + 1 < len(cmd) else ""
        if arg in VERBOSITY_FLAGS and value.lstrip("-").isdigit():
            level = int(value)
        elif arg in ("-v", "--verbose", "--log-verbose"):
            level = 99
        elif arg == "--spec-type":
            types = [t for t in value.split(",") if t and t != "none"]
    return len(types) if level >= TRACE_VERBOSITY else 0


NOT_PARAMS = ("--spec-type", "--spec-draft-model", "--spec-draft-hf", "--spec-default")   # set by draftbench itself
# Synthetic acceptance ("benchmarking only"): output is not valid text, so it is never a candidate;
# settings.ceiling runs it as rows of their own.
SYNTHETIC_PARAMS = ("synth_len", "synth_rates")
SYNTH_LEN_FLAG = "--spec-synth-len"


def tunable_params(caps: dict) -> list[str]:
    """Candidate parameter names this build accepts: its ``--spec-*`` flags, less those draftbench
    sets itself and those ``--help`` says were removed."""
    removed = set(caps.get("removed_flags") or ())
    return sorted(f[len("--spec-"):].replace("-", "_") for f in caps["flags"]
                  if f.startswith("--spec-") and f not in NOT_PARAMS and f not in removed and not f.endswith("-"))


def candidate_problems(specs: tuple[CandidateSpec, ...], caps: dict, binary: str) -> list[Problem]:
    """What this binary cannot run: methods it lacks, parameters it has no flag for, drafts missing."""
    problems: list[Problem] = []
    offered = caps.get("spec_types") or []
    has_spec_type = "--spec-type" in caps["flags"]
    for s in specs:
        for m in s.method:
            if not has_spec_type:
                problems.append(Problem(f"{s.where}.method", f"{binary} has no --spec-type, so it cannot run {m!r} "
                                        "(only a plain draft model)", "use a newer llama.cpp build"))
            elif m not in offered:
                near = closest(m, offered)
                problems.append(Problem(f"{s.where}.method", f"{m!r} is not a speculative type this llama-server "
                                        f"offers", (f"did you mean {near[0]!r}? " if near else "")
                                        + f"use one of: {', '.join(offered)} (from {binary} --help)"))
        types = list(s.method) or (["draft-simple"] if s.draft else [])
        if s.draft is None and any(t in DRAFT_TYPES_NEEDING_A_MODEL for t in types):
            problems.append(Problem(s.where, f"{', '.join(t for t in types if t.startswith('draft-'))} needs a "
                                    "draft model", "add \"draft\": a label from drafts"))
        if s.draft is not None and types and not any(t.startswith("draft-") for t in types):
            problems.append(Problem(f"{s.where}.draft", f"is given, but {', '.join(types)} uses no draft model",
                                    "add \"draft-simple\" to method for a hybrid, or remove draft"))
        uses_draft = any(t.startswith("draft-") for t in types)
        for name in s.params:
            if name == DRAFT_MAX:
                if not uses_draft:
                    problems.append(Problem(f"{s.where}.params.{name}", "is the draft model's length; this candidate "
                                            "has no draft method", "set the n-gram method's own length instead "
                                            "(e.g. ngram_mod_n_max)"))
                continue
            if name == DRAFT_PLACEMENT:
                if s.draft is None:
                    problems.append(Problem(f"{s.where}.params.{name}", "says where the draft model runs; this "
                                            "candidate has none", "remove it (model-free methods run beside the "
                                            "target)"))
                continue
            if name in SYNTHETIC_PARAMS:
                problems.append(Problem(f"{s.where}.params.{name}", "is synthetic acceptance (benchmarking only: the "
                                        "output is not valid text), not a candidate", "remove it and set "
                                        "settings.ceiling: true (or --ceiling) to run each draft at synthetic "
                                        "acceptance as rows of their own"))
                continue
            if name not in tunable_params(caps):
                known = [DRAFT_MAX, *tunable_params(caps)]
                problems.append(Problem(f"{s.where}.params.{name}", f"this llama-server has no {param_flag(name)}",
                                        did_you_mean(name, known, show_known=len(known))))
    return problems
