"""JSON renderer: the report, alone on stdout."""

from __future__ import annotations

import json

from doctor.render.sanitize import json_bidi


def render_json(report: dict, ascii_only: bool = False) -> str:
    """``ascii_only``: escape every non-ASCII character (\\u2264), for a stream that cannot encode them:
    the same data, losslessly."""
    return json_bidi(json.dumps(report, indent=2, ensure_ascii=ascii_only, default=str)) + "\n"
