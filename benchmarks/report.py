"""Writing a benchmark's results: ``<stem>.json`` (every figure) and ``<stem>.md`` (the table), and the table
printed last, where a terminal shows it."""
from __future__ import annotations

import json
from pathlib import Path


def save(output_dir: Path, stem: str, report: dict, lines: list[str]) -> None:
    (output_dir / f"{stem}.json").write_text(json.dumps(report, indent=1))
    (output_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
