#!/usr/bin/env python3
"""The wall cost of every committed lab run, from its meta.json, as the table of
docs/benchmarks/lab-notes.md. Run from the repository's root."""
import json
import pathlib

print("| run | clock | reps | guest s | wall min | wall s per guest s | host load at start |")
print("|---|---|---|---|---|---|---|")
for meta in sorted(pathlib.Path("docs").glob("*/**/meta.json")):
    run = json.loads(meta.read_text())
    if not run.get("wall_s") or not run.get("guest_end_s"):
        continue
    print(f"| `{meta.parent.relative_to('docs')}` | {run['clock']} | {run['reps']} | {run['guest_end_s']:.0f} | "
          f"{run['wall_s'] / 60:.1f} | {run['wall_s'] / run['guest_end_s']:.1f} | {run['host']['load'].split()[0]} |")
