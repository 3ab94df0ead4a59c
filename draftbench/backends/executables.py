"""Finding a server's executable: an explicit path or folder, an environment variable, PATH, then the
usual build folders; ``NAME.exe`` on Windows wherever ``NAME`` is looked for."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ..common.errors import BinaryNotFoundError


def same_file(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b) or Path(a).name == Path(b).name


def find_executable(name: str, explicit: str | None, *, env_var: str, setting: str, how_to_get: str,
                    candidates: tuple = ()) -> str | None:
    """An explicit path (a folder holding ``name`` will do; it must exist and be executable), else
    ``$env_var``, else ``PATH``, else the first executable of ``candidates``; None if none is found.
    On Windows ``name.exe`` is found wherever ``name`` is looked for."""
    if explicit:
        path = os.path.expanduser(explicit)
        if os.path.isdir(path):
            path = os.path.join(path, name)
        path = next((p for p in _with_exe(path) if os.path.isfile(p)), path)
        if not os.path.isfile(path):
            raise BinaryNotFoundError(f"{name} not found at {explicit}", f"fix {setting}, or remove it to search "
                                      f"automatically; or {how_to_get}")
        if not os.access(path, os.X_OK):
            raise BinaryNotFoundError(f"{name} at {path} is not executable", f"chmod +x {path}")
        return os.path.abspath(path)
    from_env = os.environ.get(env_var)
    if from_env:
        return find_executable(name, from_env, env_var=env_var, setting=f"${env_var}", how_to_get=how_to_get)
    on_path = shutil.which(name)   # on Windows, which() tries the PATHEXT suffixes (.EXE, …) itself
    if on_path:
        return on_path
    for candidate in candidates:
        for path in _with_exe(os.path.expanduser(str(candidate))):
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return os.path.abspath(path)
    return None


def _with_exe(path: str) -> tuple[str, ...]:
    """``path``, and on Windows ``path.exe`` too when it has no suffix (``llama-server.exe``, ``lms.exe``)."""
    if sys.platform == "win32" and not os.path.splitext(path)[1]:
        return (path, path + ".exe")
    return (path,)
