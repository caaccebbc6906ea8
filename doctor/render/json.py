"""JSON renderer: the report, alone on stdout."""

from __future__ import annotations

import json


def render_json(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"
