"""``python sweep.py --init MODELS_DIR --config-dir OUT``: write one config per model family found in a folder
(the logic is :mod:`draftbench.sweep.init_configs`; docs/init.md)."""

from __future__ import annotations

from pathlib import Path

from ..backends.llamacpp.command import capabilities, find_llama_server
from ..common.errors import DraftbenchError, UsageError
from ..common.text_safety import safe_text
from ..sweep import EXIT_OK, init_configs


def run_init(args) -> int:
    """``--init MODELS_DIR --config-dir OUT``: one config per model family (see sweep/init_configs.py)."""
    if not args.config_dir or args.config or args.results or args.chart or args.dry_run or args.chart_only:
        raise UsageError("--init MODELS_DIR writes configs into --config-dir OUT, and does nothing else",
                         "run: python sweep.py --init MODELS_DIR --config-dir OUT, then python sweep.py "
                         "--config-dir OUT --dry-run")
    models, out = Path(args.init), Path(args.config_dir)
    if not models.is_dir():
        raise UsageError(f"--init {models} is not a folder", "give the folder that holds your .gguf files")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--config-dir {out} is a file, not a folder", "give a folder for the new configs")
    try:
        caps = capabilities(find_llama_server())
        spec_types, binary_note = list(caps.get("spec_types") or []), f"methods from {caps.get('binary')} --help"
    except DraftbenchError as exc:
        spec_types, binary_note = [], f"no n-gram methods or heads offered: {exc.message}"
    found = init_configs.scan(models)
    planned, skipped = init_configs.plan_configs(found, out, spec_types=spec_types,
                                                 hardware=init_configs.this_hardware())
    out.mkdir(parents=True, exist_ok=True)
    init_configs.write_configs(planned)       # all or nothing: refuses to overwrite
    for written in planned:
        c = written.config
        print(safe_text(f"Wrote {written.path}: {c['model_family']} — targets {', '.join(t['label'] for t in c['targets'])}"
                        f"; drafts {', '.join(d['label'] for d in c['drafts']) or 'none'}"
                        f"; candidates {', '.join(x['label'] for x in c['candidates']) or 'none'}"))
        for note in written.notes:
            print(safe_text(f"  {note}"))
    print(f"({binary_note})")
    for why in skipped:
        print(safe_text(f"No config for {why}"))
    if found.left_out:
        print("Left out:")
        for path, why in found.left_out:
            print(safe_text(f"  {path}: {why}"))
    if planned:
        print(safe_text(f"Next: python sweep.py --config-dir {out} --dry-run (then without --dry-run to measure)"))
        return EXIT_OK
    raise UsageError(f"no model family in {models} has anything to compare", "add a smaller model of the same "
                     "family (a draft), or install a llama-server that offers n-gram methods")
