"""``python sweep.py --init MODELS_DIR --config-dir OUT``: write one config per model family found in a folder
(the logic is :mod:`draftbench.sweep.init_configs`; docs/init.md)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..backends.llamacpp.command import capabilities, find_llama_server
from ..common.errors import DraftbenchError, UsageError
from ..common.files import describe_write_error
from ..common.text_safety import safe_text
from ..results.output_paths import NAME_MAX_BYTES
from ..sweep import EXIT_OK, init_configs


def run_init(args) -> int:
    """``--init MODELS_DIR --config-dir OUT``: one config per model family (see sweep/init_configs.py)."""
    if not args.config_dir or args.config or args.results or args.chart or args.dry_run or args.chart_only:
        raise UsageError("--init MODELS_DIR writes configs into --config-dir OUT, and does nothing else",
                         "run: python sweep.py --init MODELS_DIR --config-dir OUT, then python sweep.py "
                         "--config-dir OUT --dry-run")
    models, out = Path(args.init), Path(args.config_dir)
    if not models.is_dir():
        raise UsageError(f"--init {safe_text(models)} is not a folder", "give the folder that holds your .gguf files")
    check_out_folder(out)      # before the scan: a folder that cannot be made is said at once
    try:
        caps = capabilities(find_llama_server())
        spec_types, binary_note = list(caps.get("spec_types") or []), f"methods from {caps.get('binary')} --help"
    except DraftbenchError as exc:
        spec_types, binary_note = [], f"no n-gram methods or heads offered: {exc.message}"
    found = init_configs.scan(models)
    planned, skipped = init_configs.plan_configs(found, out, spec_types=spec_types,
                                                 hardware=init_configs.this_hardware())
    make_out_folder(out)
    init_configs.write_configs(planned)       # all or nothing: refuses to overwrite
    for written in planned:
        c = written.config
        print(safe_text(f"Wrote {written.path}: {c['model_family']} — targets {', '.join(t['label'] for t in c['targets'])}"
                        f"; drafts {', '.join(d['label'] for d in c['drafts']) or 'none'}"
                        f"; candidates {', '.join(x['label'] for x in c['candidates']) or 'none'}", keep_newlines=False))
        for note in written.notes:
            print(safe_text(f"  {note}", keep_newlines=False))
    print(safe_text(f"({binary_note})", keep_newlines=False))
    for family in skipped:
        print(safe_text(f"No config for {family}", keep_newlines=False))
    if found.left_out:
        print("Left out:")
        for path, why in found.left_out:       # file names may hold newlines and escapes: one line each, shown
            print(safe_text(f"  {path}: {why}", keep_newlines=False))
    if planned:
        print(safe_text(f"Next: python sweep.py --config-dir {out} --dry-run --probe (every model and pair checked, "
                        "one request of each target timed), then without --dry-run --probe to measure",
                        keep_newlines=False))
        return EXIT_OK
    refused = sum(1 for family in skipped if family.refused)
    if refused:       # they have plenty to compare: the config it makes is what a sweep would refuse
        raise UsageError(f"no config written: the config of {refused} model famil{'y' if refused == 1 else 'ies'} in "
                         f"{safe_text(models)} would be refused (see \"No config for\" above)",
                         "split the models over several folders, or write the config by hand")
    raise UsageError(f"no model family in {safe_text(models)} has anything to compare", "add a smaller model of the same "
                     "family (a draft), or install a llama-server that offers n-gram methods")


def check_out_folder(out: Path) -> None:
    """Refuse (exit 2) a --config-dir that cannot become a folder of configs, before anything is read."""
    shown = safe_text(out, keep_newlines=False)
    fix = "give --config-dir a new or empty folder"
    long_part = next((part for part in out.parts if len(os.fsencode(part)) > NAME_MAX_BYTES), None)
    if long_part is not None:
        raise UsageError(f"--config-dir {shown}: the name {safe_text(long_part[:40], keep_newlines=False)}… is "
                         f"{len(os.fsencode(long_part))} bytes long; file systems allow at most {NAME_MAX_BYTES}",
                         "give it a shorter name")
    if out.is_symlink() and not out.exists():
        try:
            os.stat(out)
        except OSError as exc:
            what = ("a symbolic link that loops" if exc.errno == errno.ELOOP else
                    f"a symbolic link to {safe_text(os.readlink(out), keep_newlines=False)}, which does not exist")
            raise UsageError(f"--config-dir {shown} is {what}", "create the folder it points to, or " + fix) from None
    if out.exists() and not out.is_dir():
        raise UsageError(f"--config-dir {shown} is a file, not a folder", "give a folder for the new configs")
    parent = out.parent
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        parent = parent.parent
    if not out.exists() and parent.exists() and not parent.is_dir():
        raise UsageError(f"--config-dir {shown}: {safe_text(parent, keep_newlines=False)} is a file, not a folder",
                         fix)


def make_out_folder(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--config-dir {safe_text(out, keep_newlines=False)} cannot be created: "
                         f"{describe_write_error(exc)}", "give --config-dir a folder you can write to") from None
