"""Redaction for reports pasted into public bug tickets (`--markdown`, `--json` unless --no-redact).

What goes: the user name, the home folder (becomes ``~``), the host name, GPU and MIG UUIDs,
IP addresses (v4 and v6, loopback kept), credentials in URLs, token-looking strings, and every
environment variable that is not on ``ENV_ALLOW_LIST``. What stays: versions, GPU names, PCI bus
ids (they identify a slot, not a person), paths below home. Every string in the report is walked,
dict keys included, because probes may put a path anywhere.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

# Variables that explain GPU/torch behaviour and carry no secrets (paths are still redacted).
ENV_ALLOW_LIST = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "CUDA_DEVICE_ORDER",
        "CUDA_MODULE_LOADING",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "CUDNN_HOME",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PATH_TO_CUDA",
        "TORCH_CUDA_ARCH_LIST",
        "TORCH_HOME",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_HIP_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "PYTORCH_NVML_BASED_CUDA_CHECK",
        "PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK",
        "PYTORCH_ENABLE_MPS_FALLBACK",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HSA_OVERRIDE_GFX_VERSION",
        "ZE_AFFINITY_MASK",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "CONDA_SHLVL",
        "PYTHONNOUSERSITE",
        "PYTHONPATH",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "PIP_NO_INDEX",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_DEFAULT_INDEX",
        "UV_INDEX",
        "UV_TORCH_BACKEND",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "WSL_DISTRO_NAME",
        "NO_COLOR",
    }
)
# dict keys under which probes keep environment variables; their contents are filtered by the allow-list.
ENV_CONTAINER_KEYS = frozenset({"env", "environ", "env_vars", "environment_variables", "variables"})

REDACTED = "<redacted>"
USER = "<user>"
HOST = "<host>"

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSWD|APIKEY|API_KEY|ACCESS_KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|SESSION"
)
_GPU_UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_MIG_OLD_UUID = re.compile(r"\bMIG-GPU-[0-9a-fA-F-]{36}/\d+/\d+\b")  # R450-era MIG ids
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@:]*(?::[^/\s@]*)?@")
_TOKENS = re.compile(
    r"\b(?:ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|hf_|glpat-|xox[abposr]-|sk-|AKIA|ASIA|npm_|pypi-)"
    r"[A-Za-z0-9_\-]{12,}"
)
# Not after "==" / ">=" / "~=" or inside a longer dotted number: "cuda-toolkit==13.0.3.0" is a version.
_IPV4 = re.compile(r"(?<![\w.])(?<![=~<>!]=)(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
_IPV6 = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)[0-9A-Fa-f:]{2,39}(?:%[\w.]+)?(?![\w:])")
_HOME_GENERIC = re.compile(
    r"(?<![\w/.-])(?:/home/|/Users/|/var/home/)(?!<user>)[^/\s\"':]+|[A-Za-z]:\\{1,2}Users\\{1,2}(?!<user>)[^\\\s\"':]+"
)
# Keys whose values are version strings; "13.0.3.0" there is not an IP address.
_VERSIONISH_KEY = re.compile(r"version|requires", re.IGNORECASE)


def redact_report(
    report: dict,
    env: Mapping[str, str] | None = None,
    hostname: str | None = None,
    username: str | None = None,
    home: str | None = None,
) -> dict:
    """A redacted deep copy of ``report``; the arguments default to this process's values."""
    if env is None:
        import os

        env = os.environ
    if hostname is None:
        hostname = _default_hostname()
    if username is None:
        username = _default_username()
    if home is None:
        import os.path

        home = os.path.expanduser("~")
    redactor = _Redactor(env, hostname, username, home)
    return redactor.walk(report, key="")


def _default_hostname() -> str:
    import socket

    try:
        return socket.gethostname()
    except OSError:
        return ""


def _default_username() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return ""


class _Redactor:
    def __init__(self, env: Mapping[str, str], hostname: str, username: str, home: str):
        self.env = env
        self.home = home.rstrip("/\\") if home and home not in ("/", "\\") else ""
        self.hostnames = _useful_names(
            {hostname, hostname.split(".")[0]} if hostname else set(), {"localhost"}
        )
        self.usernames = _useful_names({username} if username else set(), {"root"})
        # Values of secret-looking variables, wherever they were copied (a token in a URL, a command line).
        self.secret_values = sorted(
            {
                value
                for name, value in env.items()
                if isinstance(value, str)
                and len(value) >= 6
                and name not in ENV_ALLOW_LIST
                and (_SECRET_NAME.search(name.upper()) or _looks_like_token(value))
            },
            key=len,
            reverse=True,
        )

    def walk(self, value: Any, key: str) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                name = k if isinstance(k, str) else str(k)
                if name.lower() in ENV_CONTAINER_KEYS and isinstance(v, dict):
                    out[self.text(name, "")] = self.env_vars(v)
                    continue
                if self.is_dropped_env_key(name):
                    continue
                out[self.text(name, "") if isinstance(k, str) else k] = self.walk(v, name)
            return out
        if isinstance(value, list):
            return [self.walk(v, key) for v in value]
        if isinstance(value, tuple):
            return [self.walk(v, key) for v in value]
        if isinstance(value, str):
            return self.text(value, key)
        return value

    def env_vars(self, variables: dict) -> dict:
        return {
            name: self.walk(value, name)
            for name, value in variables.items()
            if isinstance(name, str) and name in ENV_ALLOW_LIST
        }

    def is_dropped_env_key(self, name: str) -> bool:
        """An environment variable stored as a plain key outside an env container."""
        if not _ENV_NAME.match(name) or name in ENV_ALLOW_LIST:
            return False
        return name in self.env or bool(_SECRET_NAME.search(name))

    def text(self, s: str, key: str) -> str:
        for secret in self.secret_values:
            if secret in s:
                s = s.replace(secret, REDACTED)
        s = _URL_CREDENTIALS.sub(lambda m: m.group("scheme"), s)
        s = _TOKENS.sub(REDACTED, s)
        if self.home:
            s = _replace_path_prefix(s, self.home, "~")
        s = _HOME_GENERIC.sub("~", s)
        for name in self.usernames:
            s = _replace_word(s, name, USER)
        for name in self.hostnames:
            s = _replace_word(s, name, HOST)
        s = _MIG_OLD_UUID.sub("MIG-<redacted>", s)
        s = _GPU_UUID.sub(lambda m: f"{m.group(1)}-<redacted>", s)
        if not _VERSIONISH_KEY.search(key):
            s = _IPV4.sub(_ipv4, s)
        s = _IPV6.sub(_ipv6, s)
        return s


def _useful_names(names: set[str], skip: set[str]) -> list[str]:
    # A one- or two-letter name would redact half the report; "root" and "localhost" are not personal.
    return sorted((n for n in names if len(n) >= 3 and n.lower() not in skip), key=len, reverse=True)


def _looks_like_token(value: str) -> bool:
    return bool(
        len(value) >= 20
        and " " not in value
        and "/" not in value
        and "\\" not in value
        and re.search(r"[A-Za-z]", value)
        and re.search(r"\d", value)
        and not re.match(r"^[\d.]+$", value)
    )


def _replace_path_prefix(s: str, prefix: str, replacement: str) -> str:
    pattern = re.compile(re.escape(prefix) + r"(?=$|[/\\\s\"':;,)\]])")
    return pattern.sub(replacement, s)


def _replace_word(s: str, word: str, replacement: str) -> str:
    return re.sub(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", replacement, s)


def _ipv4(m: re.Match) -> str:
    try:
        address = ipaddress.IPv4Address(m.group(0))
    except ValueError:
        return m.group(0)
    return m.group(0) if address.is_loopback or address.is_unspecified else "<ip>"


def _ipv6(m: re.Match) -> str:
    text = m.group(0)
    try:
        address = ipaddress.IPv6Address(text.split("%")[0])
    except ValueError:
        return text
    return text if address.is_loopback or address.is_unspecified else "<ip>"
