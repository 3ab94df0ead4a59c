"""The CLIs on macOS and Windows, as far as this Linux machine can tell.

Each case runs in a fresh interpreter that imports draftbench's dependencies for real, then
pretends to be ``darwin`` or ``win32``: ``sys.platform`` is patched and the attributes that OS does
not have are removed (on Windows: ``signal.SIGHUP``, ``signal.SIGKILL``, ``signal.pause``,
``os.killpg``, ``os.setsid``, ``os.fork``, ``fcntl``, ``resource``…, and ``msvcrt`` is a stand-in
that records the file-lock calls; on macOS: Linux-only ones such
as ``os.sched_getaffinity``). Then every draftbench module is imported, every CLI parser built, and
the start-up paths run as far as they go without starting a server: signal handlers, the lifetime
guard, ``bench.py`` against an unreachable URL, ``server.py`` with a missing model, a whole sweep
whose models are missing (so it plans, checks for leftovers, records skipped rows and writes the
report), and ``--chart-only``. Touching a missing attribute fails the test.

What this cannot show: that spawning, signals and process groups behave on those OSes (the
supervisor's Windows steps are checked with the OS calls recorded, in ``test_lifetime.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from draftbench.lifetime.process import free_port

from helpers import REFERENCE, REPO

SCRIPT = r'''
import importlib, json, os, pkgutil, platform, signal, sys
repo, pretend, work = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, repo)
import draftbench

# 1. Import everything for real so that the stdlib and third-party modules draftbench uses are loaded
#    (they pick their OS-specific parts at import; that is theirs to get right, not ours).
names = sorted(m.name for m in pkgutil.walk_packages(draftbench.__path__, "draftbench."))
for name in names:
    importlib.import_module(name)
for cached in (platform.platform(), platform.machine(), platform.processor(), platform.python_version()):
    pass   # platform caches these; on the pretend OS they would be computed the real way
for name in [n for n in sys.modules if n == "draftbench" or n.startswith("draftbench.")]:
    del sys.modules[name]

# 2. Pretend.
WINDOWS_LACKS = {
    signal: ["SIGHUP", "SIGKILL", "SIGQUIT", "SIGALRM", "SIGCHLD", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGCONT",
             "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGWINCH", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGURG",
             "SIGXCPU", "SIGXFSZ", "SIGSYS", "SIGTRAP", "SIGBUS", "SIGPOLL", "SIGPWR", "SIGRTMIN", "SIGRTMAX",
             "pause", "alarm", "setitimer", "getitimer", "siginterrupt", "pthread_kill", "pthread_sigmask",
             "sigwait", "sigpending", "sigtimedwait", "sigwaitinfo"],
    os: ["killpg", "setsid", "getsid", "getpgid", "setpgid", "getpgrp", "setpgrp", "fork", "forkpty", "getuid",
         "geteuid", "getgid", "getegid", "setuid", "uname", "nice", "sysconf", "getloadavg", "wait3", "wait4",
         "WNOHANG", "sched_getaffinity", "pidfd_open", "fchown", "chown", "lchown", "mkfifo", "sync", "pipe2",
         "posix_spawn", "register_at_fork", "O_NONBLOCK", "O_NOCTTY", "O_NOFOLLOW", "O_CLOEXEC", "set_blocking"],
}
MAC_LACKS = {
    signal: ["SIGPOLL", "SIGPWR", "SIGRTMIN", "SIGRTMAX", "SIGSTKFLT", "SIGCLD", "sigtimedwait", "sigwaitinfo"],
    os: ["sched_getaffinity", "sched_setaffinity", "pidfd_open", "memfd_create", "eventfd", "getresuid",
         "pipe2", "posix_fadvise", "fdatasync"],
}
# draftbench's modules get copies of `os` and `signal` without those attributes; the standard library
# keeps the real ones (it is Linux's and needs them).
import types
stand_ins = {}
for module, attrs in (WINDOWS_LACKS if pretend == "win32" else MAC_LACKS).items():
    stand_in = types.ModuleType(module.__name__)
    stand_in.__dict__.update({k: v for k, v in vars(module).items() if k not in attrs})
    stand_ins[module.__name__] = stand_in
if pretend == "win32":
    stand_ins["signal"].CTRL_C_EVENT, stand_ins["signal"].CTRL_BREAK_EVENT = 0, 1
    stand_ins["signal"].SIGBREAK = 21   # SIGTTIN's number on Linux: harmless to handle
    for name in ("fcntl", "resource", "pwd", "grp", "termios", "pty", "tty", "posix"):
        sys.modules[name] = None
    # Windows' own module (file locks): a stand-in that records the calls, as results_lock makes them.
    msvcrt = types.ModuleType("msvcrt")
    msvcrt.LK_UNLCK, msvcrt.LK_NBLCK, msvcrt.calls = 0, 2, []
    msvcrt.locking = lambda fd, mode, nbytes: msvcrt.calls.append((mode, nbytes))
    sys.modules["msvcrt"] = msvcrt
real = {name: sys.modules[name] for name in stand_ins}
sys.modules.update(stand_ins)
sys.platform = pretend

# 3. Import and start up on the pretend OS.
for name in names:
    importlib.import_module(name)
from draftbench.cli import bench_cli, run_main, server_cli, sweep_cli
from draftbench.lifetime import groups as process_groups, process, supervisor as supervise
sys.modules.update(real)   # modules imported from here on (the stdlib's lazy imports) get the real ones
for name in names:
    module = sys.modules[name]
    for stand_in in stand_ins:
        if getattr(module, stand_in, None) is real[stand_in]:
            raise AssertionError(f"{name} holds the real {stand_in} module")
for cli in (bench_cli, server_cli, sweep_cli):
    assert cli.build_parser().format_help()
supervise.parse_args(["--parent-pid", "1", "--grace", "2", "--", "llama-server", "-m", "x"])
assert process.lifetime_guard() == "portable", process.lifetime_guard()
assert process.supervisor_command(["llama-server"], guard="portable", grace_s=3, pid_file=None)[-2:] == \
    ["--", "llama-server"]
kwargs = process_groups.new_group_kwargs(death_signal=15)
assert ("creationflags" in kwargs) == (pretend == "win32") and "preexec_fn" not in kwargs, kwargs
process.install_signal_handlers()
codes = {"noop": run_main(lambda argv: 0, [])}
codes["bench unreachable"] = run_main(bench_cli.main, ["--url", f"http://127.0.0.1:{sys.argv[4]}", "--requests", "1"])
codes["server missing model"] = run_main(server_cli.main, ["llama-cpp", "--model-path", os.path.join(work, "no.gguf")])
codes["sweep dry run"] = run_main(sweep_cli.main, ["--config", os.path.join(work, "c.json"), "--dry-run"])
codes["sweep"] = run_main(sweep_cli.main, ["--config", os.path.join(work, "c.json"), "--results",
                                            os.path.join(work, "r.json")])
codes["chart only"] = run_main(sweep_cli.main, ["--chart-only", "--results", sys.argv[5], "--chart",
                                                 os.path.join(work, "upstream.html")])
if pretend == "win32":
    assert (2, 1) in sys.modules["msvcrt"].calls, "the sweep did not lock its results file the Windows way"
print("CODES " + json.dumps(codes))
'''

FAKE_LLAMA_SERVER = '''#!{python}
import sys
if "--help" in sys.argv:
    print("  -m, --model FNAME\\n  --port PORT\\n  --host HOST\\n  -c, --ctx-size N\\n  -ngl N\\n  -np, --parallel N")
elif "--version" in sys.argv:
    print("version: fake")
else:
    sys.exit("the platform test must never start a server")
'''


@pytest.mark.parametrize("pretend", ["darwin", "win32"])
def test_every_module_and_cli_starts_up_on(pretend, tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text(FAKE_LLAMA_SERVER.format(python=sys.executable))
    fake.chmod(0o755)
    (tmp_path / "c.json").write_text(json.dumps({
        "name": "p", "hardware": "pretend", "backend": "llamacpp",
        "targets": [{"label": "T", "path": str(tmp_path / "target-not-here.gguf")}],
        "drafts": [{"label": "D", "path": str(tmp_path / "draft-not-here.gguf")}],
        "settings": {"runs": 1, "max_tokens": 8, "llama_bin": str(fake), "port": free_port()}}))
    upstream = sorted(REFERENCE.glob("*.json"))[0]
    env = {"PATH": "/usr/bin:/bin", "DRAFTBENCH_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path),
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO), pretend, str(tmp_path), str(free_port()),
                           str(upstream)], capture_output=True, text=True, timeout=240, env=env, cwd=str(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out
    codes = json.loads(out.split("CODES ", 1)[1].splitlines()[0])
    # each path ends in its documented way: errors as one line and an exit code, never an exception
    # (the dry run checks the model files the run would skip: missing ones are a config problem there)
    assert codes == {"noop": 0, "bench unreachable": 1, "server missing model": 2, "sweep dry run": 2,
                     "sweep": 3, "chart only": 0}, out
    assert "Error: cannot reach" in out and "--model-path: model file" in out
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert (tmp_path / "r.html").exists() and (tmp_path / "upstream.html").exists()
