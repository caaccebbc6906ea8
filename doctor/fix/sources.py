"""What the installer will do beyond what fix's command says: the package sources and install locations
that pip and uv take from environment variables and configuration files, each with where it came from;
and whether the torch wheels came from the plan's own index.

An exact pin (``torch==2.7.1+cu128``) says which build, never from where: pip takes it from any index or
find-links location it knows, and uv prefers an extra index over ``--index-url``.

pip runs with the user's settings, so ``fix``

- refuses, before anything runs, a setting that installs somewhere other than the target environment
  (pip's ``target``, ``prefix``, ``root``, ``user``), naming where it came from (exit 2);
- names every other source (``extra-index-url``, ``find-links``...) in the summary before consent;
- checks where each torch wheel comes from: before the install in pip's dry-run report, refusing one from
  a source the plan does not name; after the install in pip's ``--report`` of the install itself, rolling
  back one that came from elsewhere. The plan's own packages (torch, torchvision, torchaudio) must come
  from the plan's index or find-links; the rest of torch's family (the CUDA wheels, triton) too, where the
  plan's ``--index-url`` replaces the default index (otherwise the default index may serve them).

uv records nowhere where a wheel came from, so it runs with only the plan's sources, by construction:
``--no-config`` (no uv.toml, no ``[tool.uv]``, no ``UV_CONFIG_FILE``), ``--index-strategy first-index``,
and an environment without any ``UV_`` variable but those in ``UV_KEPT`` (none of which adds a source or
moves the install: ``UV_CONSTRAINT`` goes too, a constraints file can name a ``--find-links`` of its own
and uv takes torch from it) and without pip's ``PIP_`` ones. The settings it would otherwise have read are
named in the summary as not used. After the install, doctor/fix/installed_wheels.py compares the
installed torch files with the plan's wheels where the plan's sources are local.

Where pip looks (pip's documentation, "Configuration"): ``PIP_CONFIG_FILE``; global
``$XDG_CONFIG_DIRS/pip/pip.conf`` (``/etc/xdg``) and ``/etc/pip.conf``; user ``~/.pip/pip.conf`` and
``$XDG_CONFIG_HOME/pip/pip.conf``
(skipped where ``PIP_CONFIG_FILE`` names an existing file); site ``<prefix>/pip.conf``; none of them where
``PIP_CONFIG_FILE`` is ``os.devnull``; sections
``[global]`` and ``[install]``; every ``PIP_<OPTION>`` variable (none of them in isolated mode). Where uv
looks (uv's documentation, "Configuration files"): ``UV_CONFIG_FILE`` alone when set, nothing with
``UV_NO_CONFIG``; else the nearest ``uv.toml`` or ``pyproject.toml`` with ``[tool.uv]`` from the working
folder up, ``$XDG_CONFIG_HOME/uv/uv.toml`` and the first of ``$XDG_CONFIG_DIRS/uv/uv.toml`` and
``/etc/uv/uv.toml``; top level and ``[pip]``; and its ``UV_*`` variables.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from doctor import exitcodes
from doctor.errors import DoctorError
from doctor.model.files import read_text, toml_module
from doctor.model.versions import normalize_name
from doctor.plan import installers
from doctor.plan.commands import PIP, UV, named_sources

CONFIG_LIMIT = 1 << 20
# Options that add or change where packages come from, and those that change where they go.
PIP_SOURCES = ("index-url", "extra-index-url", "find-links", "no-index")
UV_SOURCES = ("index", "index-url", "default-index", "extra-index-url", "find-links", "no-index",
              "index-strategy", "torch-backend")
PIP_REDIRECTS = ("target", "prefix", "root", "user")
UV_REDIRECTS = ("target", "prefix")
UV_VARIABLES = {
    "UV_INDEX": "index", "UV_INDEX_URL": "index-url", "UV_DEFAULT_INDEX": "default-index",
    "UV_EXTRA_INDEX_URL": "extra-index-url", "UV_FIND_LINKS": "find-links", "UV_NO_INDEX": "no-index",
    "UV_INDEX_STRATEGY": "index-strategy", "UV_TORCH_BACKEND": "torch-backend",
}
# Replaced by the command's own --index-url (or made moot by --no-index).
DEFAULT_INDEX_KEYS = ("index-url", "default-index")
# The uv variables fix keeps: they change how uv downloads and links, never from where, to where or what.
UV_KEPT = (
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_OFFLINE", "UV_NATIVE_TLS", "UV_KEYRING_PROVIDER", "UV_HTTP_TIMEOUT",
    "UV_REQUEST_TIMEOUT", "UV_HTTP_RETRIES", "UV_CONCURRENT_DOWNLOADS", "UV_CONCURRENT_INSTALLS",
    "UV_CONCURRENT_BUILDS", "UV_LINK_MODE", "UV_COMPILE_BYTECODE", "UV_NO_PROGRESS",
)
_TRUE = ("1", "y", "yes", "t", "true", "on")
_PIP_SECTIONS = {"global", "install"}  # the sections a pip install reads (the others are other commands')


@dataclass(frozen=True)
class Setting:
    key: str  # the option: "extra-index-url", "target", "find-links", ...
    value: str
    origin: str  # "environment variable PIP_EXTRA_INDEX_URL", "/etc/pip.conf [global]", ...

    def describe(self) -> str:
        return f"{self.key}={shown(self.value)} (from {self.origin})"


def shown(value: str) -> str:
    """A value for the screen: a URL without its user name and password."""
    parts = urlsplit(value) if "://" in value else None
    if parts is None or "@" not in parts.netloc:
        return value
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


# --- reading the settings ------------------------------------------------------------------------------


def read(installer: str, prefix: str, env: dict, cwd: Path, platform: str = sys.platform) -> list[Setting]:
    """Every setting the installer will apply to fix's install, of the keys that matter here."""
    if installer == UV:
        return uv_settings(env, cwd, platform)
    return pip_settings(env, prefix, platform)


def pip_settings(env: dict, prefix: str, platform: str = sys.platform) -> list[Setting]:
    out = []
    for path, level in pip_config_files(env, prefix, platform):
        out += _pip_file(path, level)
    if not _true(env.get("PIP_ISOLATED_MODE")):
        for name in sorted(env):
            key = name[4:].lower().replace("_", "-") if name.startswith("PIP_") else ""
            if key in PIP_SOURCES + PIP_REDIRECTS:
                out.append(Setting(key, env[name], f"environment variable {name}"))
    return out


def pip_config_files(env: dict, prefix: str, platform: str = sys.platform) -> list[tuple[str, str]]:
    """(path, level) of every configuration file pip reads, in pip's order (later ones win)."""
    files = []
    given = env.get("PIP_CONFIG_FILE")
    if given == os.devnull:  # pip then loads no configuration file at all
        return []
    if given:
        files.append((given, "PIP_CONFIG_FILE"))
    home = env.get("HOME") or env.get("USERPROFILE") or ""
    if platform == "win32":
        files.append((os.path.join(env.get("PROGRAMDATA") or r"C:\ProgramData", PIP, "pip.ini"), "global"))
    else:
        if platform == "darwin":
            files.append(("/Library/Application Support/pip/pip.conf", "global"))
        for folder in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep):
            if folder:
                files.append((os.path.join(folder, PIP, "pip.conf"), "global"))
        files.append(("/etc/pip.conf", "global"))
    user_too = not _true(env.get("PIP_ISOLATED_MODE")) and not (given and os.path.exists(given))
    if user_too and home:
        if platform == "win32":
            files.append((os.path.join(home, PIP, "pip.ini"), "user"))
            if env.get("APPDATA"):
                files.append((os.path.join(env["APPDATA"], PIP, "pip.ini"), "user"))
        else:
            files.append((os.path.join(home, ".pip", "pip.conf"), "user"))
            if platform == "darwin":
                files.append((os.path.join(home, "Library", "Application Support", PIP, "pip.conf"), "user"))
            xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
            files.append((os.path.join(xdg, PIP, "pip.conf"), "user"))
    if prefix:
        files.append((os.path.join(prefix, "pip.ini" if platform == "win32" else "pip.conf"), "site"))
    return files


def _pip_file(path: str, level: str) -> list[Setting]:
    text = read_text(path, CONFIG_LIMIT)
    if not text:
        return []
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, path)
    except configparser.Error:
        return []  # pip itself stops on such a file: nothing it would install from
    out = []
    for section in parser.sections():
        if section in _PIP_SECTIONS:
            for key, value in parser.items(section):
                key = key.replace("_", "-")
                if key in PIP_SOURCES + PIP_REDIRECTS:
                    out.append(Setting(key, value.strip(), f"{path} [{section}] ({level})"))
    return out


def uv_settings(env: dict, cwd: Path, platform: str = sys.platform) -> list[Setting]:
    out = []
    for path, origin, table in uv_config_files(env, cwd, platform):
        out += _uv_file(path, origin, table)
    for name, key in UV_VARIABLES.items():
        if env.get(name):
            out.append(Setting(key, env[name], f"environment variable {name}"))
    return out


def uv_config_files(env: dict, cwd: Path, platform: str = sys.platform) -> list[tuple[str, str, str]]:
    """(path, origin, "uv" or "pyproject") of the configuration files uv reads."""
    if _true(env.get("UV_NO_CONFIG")):
        return []
    if env.get("UV_CONFIG_FILE"):
        return [(env["UV_CONFIG_FILE"], "UV_CONFIG_FILE", "uv")]
    files = []
    for folder in (cwd, *cwd.parents):
        if (folder / "uv.toml").is_file():
            files.append((str(folder / "uv.toml"), "the working folder's project", "uv"))
            break
        if (folder / "pyproject.toml").is_file() and _uv_table(str(folder / "pyproject.toml"), "pyproject"):
            files.append((str(folder / "pyproject.toml"), "the working folder's project", "pyproject"))
            break
    home = env.get("HOME") or env.get("USERPROFILE") or ""
    if platform == "win32":
        if env.get("APPDATA"):
            files.append((os.path.join(env["APPDATA"], "uv", "uv.toml"), "user", "uv"))
        system = [os.path.join((env.get("SYSTEMDRIVE") or "C:") + "\\", "ProgramData", "uv", "uv.toml")]
    else:
        xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
        if xdg:
            files.append((os.path.join(xdg, "uv", "uv.toml"), "user", "uv"))
        dirs = (env.get("XDG_CONFIG_DIRS") or "").split(os.pathsep)
        system = [os.path.join(d, "uv", "uv.toml") for d in dirs if d] + ["/etc/uv/uv.toml"]
    found = [path for path in system if os.path.isfile(path)]
    if found:  # uv uses the first system file it finds
        files.append((found[0], "system", "uv"))
    return files


def _uv_table(path: str, table: str) -> dict | None:
    tomllib = toml_module()
    text = read_text(path, CONFIG_LIMIT)
    if tomllib is None or not text:
        return None
    try:
        data = tomllib.loads(text)
    except (ValueError, RecursionError):
        return None
    if table == "pyproject":
        data = (data.get("tool") or {}).get("uv") if isinstance(data.get("tool"), dict) else None
    return data if isinstance(data, dict) else None


def _uv_file(path: str, origin: str, table: str) -> list[Setting]:
    data = _uv_table(path, table)
    if not data:
        return []
    out = []
    pip_table = data.get(PIP)  # uv's [pip] table: the settings of `uv pip`
    sections = [("", data)] + ([("[pip] ", pip_table)] if isinstance(pip_table, dict) else [])
    for label, section in sections:
        for key in UV_SOURCES + UV_REDIRECTS:
            if key in UV_REDIRECTS and not label:
                continue  # target and prefix exist only under [pip]
            values = section.get(key)
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, dict):  # [[index]]: url = "...", default = true, ...
                    value = value.get("url")
                if value is not None and value is not False:
                    out.append(Setting(key, str(value), f"{path} {label}({origin})"))
    return out


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


# --- judging them -------------------------------------------------------------------------------------


def redirects(settings: list[Setting], installer: str) -> list[Setting]:
    """The settings that make the installer put packages somewhere other than the target environment."""
    keys = UV_REDIRECTS if installer == UV else PIP_REDIRECTS
    return [s for s in settings if s.key in keys and (s.key != "user" or _true(s.value))]


def refuse_redirects(settings: list[Setting], installer: str) -> None:
    """One line, exit 2: fix would change another folder than the one it checked, backed up and verifies."""
    found = redirects(settings, installer)
    if found:
        setting = found[-1]
        raise DoctorError(
            f"refusing: {setting.describe()} makes {installer} install somewhere other than the target "
            "environment; unset it for this run (or remove it there) and run fix again",
            exitcodes.USAGE,
        )


def extra_sources(settings: list[Setting], install: list[str]) -> list[Setting]:
    """The sources the installer will use besides the ones the install command names (its own --index-url
    replaces the configured default index)."""
    replaced = named_sources(install)[2]
    return [s for s in settings if s.key in UV_SOURCES and not (replaced and s.key in DEFAULT_INDEX_KEYS)
            and not (s.key == "no-index" and not _true(s.value))]


def source_warning(setting: Setting, installer: str) -> str:
    if setting.key == "no-index":
        return f"{setting.describe()}: {installer} will use only find-links locations."
    if setting.key in ("index-strategy", "torch-backend"):
        return f"{setting.describe()}: changes which index {installer} takes each package from."
    return (f"{setting.describe()}: a source beside the plan's; {installer} may take any package from it, "
            "torch included (an exact pin does not say from where): fix checks where the torch wheels come "
            "from.")


# --- where the wheels came from -------------------------------------------------------------------------


def foreign(origins: list[tuple[str, str]], install: list[str], pins: list[str]) -> list[tuple[str, str]]:
    """(name, source) of the torch-family packages in ``origins`` (name, URL of the file, or of the index uv
    named) that come from no source of the install command. The pinned ones always; the rest of the
    family where the command replaces the default index (else that index may serve them)."""
    indexes, links, whole_family = named_sources(install)
    pinned = {normalize_name(p.partition("==")[0]) for p in pins}
    out = []
    for name, url in origins:
        name = normalize_name(name)
        if not installers.in_torch_family(name) or (name not in pinned and not whole_family):
            continue
        if not any(_from(url, index, index=True) for index in indexes) and not any(
            _from(url, link, index=False) for link in links
        ):
            out.append((name, url))
    return out


def _from(url: str, source: str, index: bool) -> bool:
    """Whether the file (or index) at ``url`` belongs to ``source``: the same site for http(s) (an index's
    files may sit on its own CDN host: download-r2.pytorch.org for download.pytorch.org); for local files,
    under the index's base folder (``<base>/<variant>`` pages link ``<base>/...``) or the find-links
    folder."""
    if "://" not in source:
        source = Path(source).absolute().as_uri()
    have, want = urlsplit(url), urlsplit(source)
    if have.scheme != want.scheme:
        return False
    if have.scheme == "file":
        base = unquote(want.path).rstrip("/")
        if index:
            base = base.rpartition("/")[0]
        return unquote(have.path).startswith(base + "/") or unquote(have.path).rstrip("/") == base
    return _site(have.hostname or "") == _site(want.hostname or "") and (have.port == want.port)


def _site(host: str) -> str:
    """The host's last two labels ("pytorch.org"); an IP address or a one-label host as it is."""
    if re.fullmatch(r"[0-9.]+|\[?[0-9a-fA-F:]+\]?", host) or host.count(".") < 1:
        return host
    return ".".join(host.lower().split(".")[-2:])


def uv_environment(env: dict) -> tuple[dict, list[str]]:
    """The environment fix runs uv in (module docstring), and the uv variables it leaves out that change
    something (pip's, which uv does not read, go unnamed; ``UV_NO_CONFIG`` is what --no-config does)."""
    dropped = {k for k in env if (k.startswith("UV_") and k not in UV_KEPT) or k.startswith("PIP_")}
    named = sorted(k for k in dropped if k.startswith("UV_") and k != "UV_NO_CONFIG")
    return {k: v for k, v in env.items() if k not in dropped}, named


def uv_warnings(settings: list[Setting], dropped: list[str], checked_after: bool) -> list[str]:
    """The summary's lines for a uv install: how uv is run, the settings it does not use, and whether what
    it installed is compared with the plan's wheels afterwards."""
    out = []
    for setting in settings:
        out.append(f"{setting.describe()}: not used (uv runs with --no-config and without that variable).")
    unnamed = [k for k in dropped if k not in {s.origin.rpartition(" ")[2] for s in settings}]
    if unnamed:
        out.append(f"uv runs without {', '.join(unnamed)} from this environment: such variables can add a "
                   "source or change what is installed.")
    out.append(
        "uv runs with --no-config and --index-strategy first-index: it takes packages only from the plan's "
        "sources. "
        + ("After the install, fix compares the installed torch files with the plan's wheels."
           if checked_after else
           "uv records nowhere where a wheel came from, and the plan's index is remote: what uv installed "
           "is not checked against it afterwards.")
    )
    return out


def refuse_foreign(found: list[tuple[str, str]], installer: str) -> None:
    if found:
        what = "; ".join(f"{name} from {shown(url)}" for name, url in found[:3])
        raise DoctorError(
            f"refusing: {installer} would take {what}, a source the plan does not name (nothing was "
            "changed); remove that source from the settings named above, or pass --index-url-base to make "
            "it the plan's",
            exitcodes.REFUSED,
        )
