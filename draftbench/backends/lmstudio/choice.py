"""Which way draftbench talks to LM Studio: its Python SDK (when installed) or its REST API.

``settings.lmstudio_client``: ``auto`` (default) = the SDK when the optional ``lmstudio`` package
(1.5.0 or newer) is installed, else REST; ``sdk`` or ``rest`` force one. The choice is made once,
when the config is validated, and written back into the settings, so results, resume checks and
every launch see the path that was actually used.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from ...common.errors import Problem
from ...config.settings import Settings
from .settings import LMStudioSettings

MIN_SDK = (1, 5)
INSTALL = "pip install 'draftbench[lmstudio]'"
REST_LACKS = ("per-request draft length (draft_max, so no k sweep) and p-min (draft_p_min), LM Studio's typed "
              "statistics and the streamed fragment data (where accepted drafts landed)")
SDK_ONLY_SETTINGS = ("draft_max", "draft_p_min", "lmstudio_min_draft_length")


def sdk_version() -> str | None:
    """The installed ``lmstudio`` package's version, or None when it is not installed."""
    if importlib.util.find_spec("lmstudio") is None:
        return None
    try:
        return importlib.metadata.version("lmstudio")
    except importlib.metadata.PackageNotFoundError:
        return None


def sdk_usable(version: str | None) -> bool:
    if version is None:
        return False
    try:
        parts = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return parts >= MIN_SDK


def resolve(choice: str | None) -> str:
    """``sdk`` or ``rest`` for a setting of auto / sdk / rest (None = auto)."""
    if choice in ("sdk", "rest"):
        return choice
    return "sdk" if sdk_usable(sdk_version()) else "rest"


def validation_problems(settings: Settings) -> list[Problem]:
    """Check the choice against what is installed and the settings only the SDK can apply."""
    problems = []
    choice = LMStudioSettings.of(settings).lmstudio_client
    version = sdk_version()
    if choice == "sdk" and not sdk_usable(version):
        found = f"lmstudio {version} is installed; draftbench needs 1.5.0 or newer" if version else \
            "the lmstudio package is not installed"
        problems.append(Problem("$.settings.lmstudio_client", f"is \"sdk\", but {found}",
                                f"{INSTALL} (or pip install -U lmstudio), or set it to \"auto\" or \"rest\""))
        return problems
    path = resolve(choice)
    if path == "rest":
        why = "lmstudio_client is \"rest\"" if choice == "rest" else (
            f"the installed lmstudio {version} is older than 1.5.0" if version else
            "LM Studio's Python SDK is not installed")
        fix = f"{INSTALL}, or remove the key" if choice != "rest" else \
            "set settings.lmstudio_client to \"auto\" or \"sdk\" (with the SDK installed), or remove the key"
        for key, value in settings.values_of(SDK_ONLY_SETTINGS).items():
            if value is not None:
                problems.append(Problem(f"$.settings.{key}", f"needs LM Studio's Python SDK ({why}): LM Studio's "
                                        "REST API cannot set it per request", fix))
    return problems


def settled(settings: Settings) -> Settings:
    """The settings with ``lmstudio_client`` "auto" replaced by the path chosen (written to the results)."""
    return settings.with_values(lmstudio_client=resolve(LMStudioSettings.of(settings).lmstudio_client))


def sweep_notes(settings: Settings) -> list[str]:
    """What the console says once before an LM Studio sweep: which path, and what REST lacks."""
    path = resolve(LMStudioSettings.of(settings).lmstudio_client)
    if path == "sdk":
        return [f"LM Studio through its Python SDK (lmstudio {sdk_version()}): per-request k and p-min, typed "
                "statistics, fragment data"]
    hint = " — set settings.lmstudio_client to \"sdk\" to get them" if sdk_usable(sdk_version()) else \
        f" — {INSTALL} to get them"
    return [f"LM Studio through its REST API: no {REST_LACKS}{hint}"]
