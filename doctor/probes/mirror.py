"""One small, time-limited HTTP request: does a mirror's listing name the wheel the plan installs?
(``--mirror``, doctor/plan/mirrors.py). The only network access torchdoctor makes; never raises."""

from __future__ import annotations

import time
from dataclasses import dataclass

from doctor.model.i18n import Msg

TIMEOUT_S = 5.0  # the whole request, connection to last byte read
MAX_BYTES = 32 * 1024 * 1024  # a full torch_stable.html is a few MiB
CHUNK = 64 * 1024


@dataclass(frozen=True)
class MirrorAnswer:
    serves: bool
    url: str
    # why not: "HTTP 404", "timed out after 5 s", "the listing does not name torch-2.7.1+cu128-"
    why: str = ""


def probe_mirror(url: str, needles: tuple[str, ...], timeout: float = TIMEOUT_S,
                 max_bytes: int = MAX_BYTES) -> MirrorAnswer:
    """GET ``url`` and look for any of ``needles`` in the body (read in chunks, stopped at the first hit,
    at ``max_bytes`` or at ``timeout`` seconds)."""
    import urllib.error
    import urllib.request

    start = time.monotonic()
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "torchdoctor", "Accept": "text/html"})
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http and https only)
            tail, read = b"", 0
            wanted = [n.encode() for n in needles]
            longest = max(len(n) for n in wanted)
            while read < max_bytes:
                if time.monotonic() - start > timeout:
                    return MirrorAnswer(False, url, Msg("timed out after {seconds:g} s", seconds=timeout))
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                read += len(chunk)
                window = tail + chunk
                if any(n in window for n in wanted):
                    return MirrorAnswer(True, url)
                tail = window[-longest:]
    except urllib.error.HTTPError as exc:
        return MirrorAnswer(False, url, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if "timed out" in str(reason):
            return MirrorAnswer(False, url, Msg("timed out after {seconds:g} s", seconds=timeout))
        return MirrorAnswer(False, url, str(reason)[:200])
    return MirrorAnswer(False, url, Msg("the listing does not name {file}", file=needles[0]))
