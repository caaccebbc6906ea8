"""``--mirror NAME``: known mirrors of download.pytorch.org/whl, each with the argument form its layout
needs (each preset's ``about`` names the mirror's own page that shows its layout). Pure data and string
work: the request that checks a mirror really serves the chosen file is a probe (doctor/probes/mirror.py),
and `fix` falls back to the official index when it does not (doctor/app/fix.py).

Layouts:

- ``index``: a PEP 503 simple index per variant, ``<base>/<variant>/torch/``: ``--index-url <base>/<variant>``
  (NJU).
- ``flat``: a flat file listing per variant, ``<base>/<variant>/``: ``--find-links <base>/<variant>/`` with
  fully pinned ``+cuXXX`` versions (Aliyun). The plan always pins the full local version.
- ``flat-all``: one flat listing of every variant, ``<base>/torch_stable.html``: ``--find-links`` it (SJTU).
- ``pypi``: a PyPI mirror only, PyPI's default build and no ``+cuXXX`` variants (TUNA): it cannot serve a
  pinned PyTorch wheel, so `fix` always says so and uses the official index.

Mirrors the reference marks as unverified or probably nonexistent (the ``tuna…/pytorch/whl/cuXXX`` paths of
third-party scripts, a USTC equivalent) are never presets. ``NAME=URL`` uses a preset's layout at another
address (an internal copy of that mirror).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from doctor.model.i18n import Msg
from doctor.plan.commands import InstallSource

INDEX, FLAT, FLAT_ALL, PYPI = "index", "flat", "flat-all", "pypi"


@dataclass(frozen=True)
class Mirror:
    name: str
    layout: str
    base: str
    about: str  # the mirror's own page that shows its layout

    def source(self) -> InstallSource | None:
        """How the install commands reach it (None: it cannot serve PyTorch's wheels)."""
        base = self.base.rstrip("/")
        if self.layout == INDEX:
            return InstallSource(index_base=base, base_given=True)
        if self.layout == FLAT:
            return InstallSource(find_links=base + "/{variant}/")
        if self.layout == FLAT_ALL:
            return InstallSource(find_links=base + "/torch_stable.html")
        return None

    def listing(self, variant: str | None) -> str | None:
        """The one page that says whether the mirror serves a torch wheel of ``variant``."""
        base = self.base.rstrip("/")
        if self.layout == INDEX and variant:
            return f"{base}/{variant}/torch/"
        if self.layout == FLAT and variant:
            return f"{base}/{variant}/"
        if self.layout == FLAT_ALL:
            return f"{base}/torch_stable.html"
        return None


PRESETS = {
    "nju": Mirror("nju", INDEX, "https://mirrors.nju.edu.cn/pytorch/whl",
                  "https://mirrors.nju.edu.cn/pytorch/whl/"),
    "aliyun": Mirror("aliyun", FLAT, "https://mirrors.aliyun.com/pytorch-wheels",
                     "https://mirrors.aliyun.com/pytorch-wheels/"),
    "sjtu": Mirror("sjtu", FLAT_ALL, "https://mirror.sjtu.edu.cn/pytorch-wheels",
                   "https://mirror.sjtu.edu.cn/pytorch-wheels/torch_stable.html"),
    "tuna": Mirror("tuna", PYPI, "https://pypi.tuna.tsinghua.edu.cn/simple",
                   "https://mirrors.tuna.tsinghua.edu.cn/help/pypi/"),
}


def parse_mirror(value: str) -> Mirror | None:
    """``nju``, ``aliyun``, ``sjtu``, ``tuna``, or ``NAME=URL`` (that preset's layout at URL); None
    otherwise."""
    name, _, url = (value or "").strip().partition("=")
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        return None
    url = url.strip()
    if url:
        if "://" not in url:
            return None
        return replace(preset, base=url.rstrip("/"))
    return preset


def wanted_file(pins: list[str]) -> tuple[str, str] | None:
    """The torch pin as the start of its wheel's file name, in both spellings a listing may use:
    ("torch-2.7.1+cu128-", "torch-2.7.1%2Bcu128-")."""
    for pin in pins:
        name, sep, version = pin.partition("==")
        if sep and name.strip().lower() == "torch":
            stem = f"torch-{version.strip()}-"
            return stem, stem.replace("+", "%2B")
    return None


def cannot_serve(mirror: Mirror, pins: list[str], variant: str | None) -> Msg | None:
    """Why ``mirror`` cannot serve this plan without asking it (None: ask it)."""
    if mirror.layout == PYPI:
        return Msg("{name} mirrors PyPI only, which has no {variant} builds of torch", name=mirror.name,
                   variant=variant or "PyTorch index")
    if wanted_file(pins) is None:
        return Msg("the plan pins no torch wheel to look for")
    if mirror.listing(variant) is None:
        return Msg("{name} has no listing for this variant", name=mirror.name)
    return None
