"""Redaction for output meant to be shared: `report`, `-o FILE`, and the Markdown, GitHub and JUnit formats
(on stdout too), unless --no-redact. docs/safety.md lists what goes; tests/hostile/secrets.json holds a
planted example of every shape, checked in every shared output.

What goes: the user name (also where ``_`` or digits join it to more: ``/opt/alice_env``, ``/data/alice2``),
the home folder (becomes ``~``; other users' folders under /home, /Users and /scratch anywhere in a path
become ``<user>``), the host name (in any letter case), GPU and MIG UUIDs (also cut ones), IP addresses
(v4 with or without leading zeros, v6; loopback kept), credentials in URLs and ``user:password@host``,
conda's ``/t/<token>/`` channel tokens, secret query parameters and ``key=value`` pairs (``?token=``,
``sig=``, ``api_key=``), ``Authorization`` values (Bearer, Basic), JWTs, private-key blocks, Slack
webhooks, known token shapes (GitHub, GitLab, Hugging Face, OpenAI, Google, AWS, Slack, npm, PyPI),
AWS-style 40-character secrets, long base64 runs, every environment variable that is not on
``ENV_ALLOW_LIST`` (as a variable, and as ``NAME=value`` in any text), and the values of this machine's
(or the report's) variables wherever they were copied. A report read back with ``check --from`` may
come from another machine: its own host name, the user names in its home paths and variables, and its
variables' values go as well. What stays: versions, GPU names, PCI bus ids (they identify a slot, not a
person), paths below home. Every string in the report is walked, dict keys included, because probes may
put a path anywhere.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

from doctor.model.i18n import Msg

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
_GPU_UUID_PART = re.compile(r"\b(GPU|MIG)-(?!<)[0-9a-fA-F]{4,}(?:-[0-9a-fA-F]{1,12}){0,4}\b")  # a cut one
# ``scheme://user:password@host``: everything up to the LAST "@" before the host's first "/", "?", "#" or
# whitespace goes ("p@ss@host" loses "p@ss"). A password may hold "/" ("bob:s3cr/t@host"): after "user:" the
# match may cross "/" up to an "@", unless what follows the ":" is a port ("host:8080/repo.git@v1").
# "file:///home/u/x@y" has no "@" in its (empty) authority and is left alone.
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?:[^/?#\s:]*:(?!\d+(?:[/?#\s]|$))[^\s@]*@|[^/?#\s]*@)"
    r"(?:[^/?#\s@]*@)*"
)
_TOKENS = re.compile(
    r"\b(?:ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|hf_|glpat-|xox[abposr]-|sk-|AKIA|ASIA|npm_|pypi-|AIza)"
    r"[A-Za-z0-9_\-]{12,}"
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( "
    r"BLOCK)?-----|\Z)", re.S
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}")
_AUTH_VALUE = re.compile(r"(?i)\b(Bearer|Basic|Token|Digest|Negotiate)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_SLACK_HOOK = re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+")
# conda's token in a channel URL: https://conda.anaconda.org/t/<token>/<channel>/... (anaconda.org, binstar).
_CONDA_TOKEN = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/]+(?:/[^\s/]+)*?/t/)(?!<redacted>)[^/\s'\"<>]+")
# key=value where the key names a secret: query strings (?token=, &sig=, ?private_token=) and logs (api_key=).
_SECRET_PAIR = re.compile(
    r"(?i)(?<![A-Za-z0-9_])((?:[A-Za-z0-9_.-]*[_.-])?"
    r"(?:token|secret|password|passwd|pwd|key|sig|signature|credential|credentials|auth|session)=)"
    r"(?!<redacted>)[^&#\s'\";,)]+"
)
# NAME=value in text (a variable echoed in a log): its value goes unless NAME is on the allow-list.
_ENV_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s'\";,]+)")
# user:password@host without a scheme (a DSN in an error message).
_USER_PASSWORD = re.compile(
    r"(?<![\w/@.:%+-])[A-Za-z0-9._%+-]+:[^\s@/:'\"\\]+@(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
)
# AWS-style secret keys and other long base64 runs (the body of a key whose BEGIN line was cut off).
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9+][A-Za-z0-9/+]{39}(?![A-Za-z0-9/+=])")
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9+/]{60,}={0,2}(?![A-Za-z0-9/+=])")
# Not after "==" / ">=" / "~=" or inside a longer dotted number: "cuda-toolkit==13.0.3.0" is a version.
_IPV4 = re.compile(r"(?<![\w.])(?<![=~<>!]=)(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
_IPV6 = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)[0-9A-Fa-f:]{2,39}(?:%[\w.]+)?(?![\w:])")
# The user segment of a home folder holds no character a user name may not hold, but may hold spaces
# ("C:\\Users\\John Smith\\venv"): then it runs to the next separator, quote, colon, ";", ",", ")" or line
# end. Where none follows ("/home/alice and /home/bob"), it is the first word only.
_HOME_SEGMENT = r"[^%s\s\"':;,|<>*?=+()\[\]{}]+"
_HOME_END = r"(?=[%s\"':;,)\]\r\n]|$)"


def _home_pattern(separators: str) -> str:
    segment, end = _HOME_SEGMENT % separators, _HOME_END % separators
    return rf"{segment}(?: +{segment})*{end}|{segment}"


_HOME_GENERIC = re.compile(
    r"(?<![\w/.-])(?:/home/|/Users/|/var/home/)(?!<user>)(?P<posix>" + _home_pattern("/") + ")"
    r"|[A-Za-z]:(?:\\{1,2}|/)Users(?:\\{1,2}|/)(?!<user>)(?P<windows>" + _home_pattern(r"\\/") + ")"
)
# Other users' folders: /home/<user> anywhere in a path (/data/home/...), /scratch/<user>, /Users/<user>.
_USER_FOLDER = re.compile(r"(?<=/)(home|Users|scratch|nobackup)/(?!<user>)(" + _HOME_SEGMENT % "/" + ")")
# Keys whose values are version strings; "13.0.3.0" there is not an IP address.
_VERSIONISH_KEY = re.compile(r"version|requires", re.IGNORECASE)


def redact_report(
    report: dict,
    env: Mapping[str, str] | None = None,
    hostname: str | None = None,
    username: str | None = None,
    home: str | None = None,
) -> dict:
    """A redacted deep copy of ``report``; the arguments default to this process's values.

    A report read with ``check --from`` comes from another machine: its own host name
    (``snapshot.environment.hostname``), the user names in its home paths and in its environment
    variables, and its secret-looking variables are redacted too.
    """
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
    identity = _ReportIdentity(report)
    redactor = _Redactor(
        env,
        hostnames=[hostname, *identity.hostnames],
        usernames=[username, *identity.usernames],
        homes=[home, *identity.homes],
        secret_env=[*env.items(), *identity.env_items],
    )
    out = redactor.walk(report, key="")
    environment = _snapshot_environment(out)
    if environment is not None and isinstance(environment.get("hostname"), str) and environment["hostname"]:
        environment["hostname"] = HOST
    return out


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


def _snapshot_environment(report: Any) -> dict | None:
    snapshot = report.get("snapshot") if isinstance(report, dict) else None
    environment = snapshot.get("environment") if isinstance(snapshot, dict) else None
    return environment if isinstance(environment, dict) else None


# Environment variables of the reporting machine that name its host, its user and its home.
_HOST_VARS = ("HOSTNAME", "COMPUTERNAME")
_USER_VARS = ("USER", "USERNAME", "LOGNAME")
_HOME_VARS = ("HOME", "USERPROFILE")


class _ReportIdentity:
    """Who and where the report itself comes from (another machine's, under ``check --from``)."""

    def __init__(self, report: Any):
        self.hostnames: list[str] = []
        self.usernames: list[str] = []
        self.homes: list[str] = []
        self.env_items: list[tuple[str, str]] = []
        self._seen: set[str] = set()  # strings already scanned: a report repeats its paths
        environment = _snapshot_environment(report)
        if environment is not None and isinstance(environment.get("hostname"), str):
            self.hostnames.append(environment["hostname"].strip())
        self._scan(report, key="")

    def _scan(self, value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                name = k if isinstance(k, str) else str(k)
                self._scan(name, "")
                if name.lower() in ENV_CONTAINER_KEYS and isinstance(v, dict):
                    self._env(v)
                self._scan(v, name)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._scan(v, key)
        elif isinstance(value, str) and ("/" in value or "Users" in value):  # what both patterns need
            if value in self._seen:
                return
            self._seen.add(value)
            for m in _HOME_GENERIC.finditer(value):
                self.usernames.append((m.group("posix") or m.group("windows") or "").rstrip("."))
            for m in _USER_FOLDER.finditer(value):
                self.usernames.append(m.group(2).rstrip("."))

    def _env(self, variables: dict) -> None:
        for name, value in variables.items():
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            self.env_items.append((name, value))
            if name in _HOST_VARS:
                self.hostnames.append(value.strip())
            elif name in _USER_VARS:
                self.usernames.append(value.strip())
            elif name in _HOME_VARS:
                self.homes.append(value.strip())


class _Redactor:
    def __init__(
        self,
        env: Mapping[str, str],
        hostnames: list[str],
        usernames: list[str],
        homes: list[str],
        secret_env: list[tuple[str, str]],
    ):
        self.env = env
        self.homes = sorted(
            {h.rstrip("/\\") for h in homes if h and h.strip("/\\")}, key=len, reverse=True
        )
        hosts: set[str] = set()
        for name in hostnames:
            if name:
                hosts |= {name, name.split(".")[0]}
        users: set[str] = set()
        for name in usernames:
            if name:
                users |= {name, *name.split()}  # "John Smith": the whole name and each word
        # One list, longest first: host "alice-box" goes before user "alice" can split it.
        self.names = sorted(
            [(n, HOST) for n in _useful_names(hosts, _GENERIC_HOSTS)]
            + [(n, USER) for n in _useful_names(users, _GENERIC_USERS)],
            key=lambda pair: len(pair[0]),
            reverse=True,
        )
        # Values of secret-looking variables, wherever they were copied (a token in a URL, a command line).
        self.secret_values = sorted(
            {
                value
                for name, value in secret_env
                if isinstance(name, str)
                and isinstance(value, str)
                and len(value) >= 6
                and name not in ENV_ALLOW_LIST
                and (_SECRET_NAME.search(name.upper()) or _looks_like_token(value) or _looks_private(value))
            },
            key=len,
            reverse=True,
        )
        self.steps_for_text = self._steps(with_ipv4=True)
        self.steps_for_versions = self._steps(with_ipv4=False)  # "13.0.3.0" under a version key is no address
        self._memo: dict[tuple[str, bool], str] = {}
        self._versionish: dict[str, bool] = {}

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
        if isinstance(value, Msg):  # the message stays one, its parameters redacted too
            return value.map(lambda text: self.text(text, key))
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
        """``s`` redacted; ``key`` (the dict key it sits under) matters only as "versionish" or not. A report
        holds the same strings many times (keys, sources, paths), so each is worked out once per redactor."""
        versionish = self._versionish.get(key)
        if versionish is None:
            versionish = self._versionish[key] = bool(_VERSIONISH_KEY.search(key))
        done = self._memo.get((s, versionish))
        if done is None:
            done = s
            for may_match, apply in self.steps_for_versions if versionish else self.steps_for_text:
                if may_match(done):
                    done = apply(done)
            self._memo[(s, versionish)] = done
        return done

    def _steps(self, with_ipv4: bool) -> list[tuple[Callable[[str], bool], Callable[[str], str]]]:
        """The redaction steps in order, each with a cheap test that is False only where its pattern cannot
        match (a literal the pattern needs is missing), so skipping it changes nothing: most strings in a
        report are short words and versions that no step touches. tests/test_redact_steps.py holds every
        test to that on the planted secrets and real reports."""
        steps: list[tuple[Callable[[str], bool], Callable[[str], str]]] = []
        for secret in self.secret_values:
            steps.append((_contains(secret), _replacer(secret, REDACTED)))
        steps += _FIXED_STEPS
        for home in self.homes:
            steps.append((_contains(home), _path_prefix_replacer(home, "~")))
        steps += _HOME_STEPS
        for name, replacement in self.names:
            # A user name is part of folder names ("/opt/alice_env", "/data/alice2"); a host name is not
            # ("node1" must not redact "node10").
            loose = replacement == USER
            steps.append((_contains_any_case(name), _word_replacer(name, replacement, loose=loose)))
        steps += _ID_STEPS
        if with_ipv4:
            steps.append((_may_hold_ipv4, lambda s: _IPV4.sub(_ipv4, s)))
        steps.append((_may_hold_ipv6, lambda s: _IPV6.sub(_ipv6, s)))
        return steps


def _contains(literal: str) -> Callable[[str], bool]:
    return lambda s: literal in s


def _contains_any_case(word: str) -> Callable[[str], bool]:
    # re.IGNORECASE also pairs some non-ASCII letters with ASCII ones (the Kelvin sign with "k"): only
    # where both are ASCII does a lower-case substring test decide.
    lowered, ascii_word = word.lower(), word.isascii()
    return lambda s: not (ascii_word and s.isascii()) or lowered in s.lower()


def _replacer(old: str, new: str) -> Callable[[str], str]:
    return lambda s: s.replace(old, new)


def _path_prefix_replacer(prefix: str, replacement: str) -> Callable[[str], str]:
    pattern = re.compile(re.escape(prefix) + r"(?=$|[/\\\s\"':;,)\]])")
    return lambda s: pattern.sub(replacement, s)


def _word_replacer(word: str, replacement: str, loose: bool = False) -> Callable[[str], str]:
    # Host and user names in any letter case ("DGX-NODE-0417" in a log names host dgx-node-0417). ``loose``:
    # only a letter next to it makes it part of another word; "_" and digits do not.
    edge = r"[^\W\d_]" if loose else r"[A-Za-z0-9_]"
    pattern = re.compile(rf"(?<!{edge})" + re.escape(word) + rf"(?!{edge})", re.IGNORECASE)
    return lambda s: pattern.sub(replacement, s)


def _may_hold_ipv4(s: str) -> bool:
    return s.count(".") >= 3


def _may_hold_ipv6(s: str) -> bool:
    return s.count(":") >= 2


def _may_name_auth_scheme(s: str) -> bool:
    if len(s) < 14:  # the shortest: "Basic" or "Token", a space and 8 characters
        return False
    if not s.isascii():  # re.IGNORECASE pairs "ſ" with "s", the Kelvin sign with "k"
        return True
    lowered = s.lower()
    return any(word in lowered for word in ("bearer", "basic", "token", "digest", "negotiate"))


# (may it match?, redact) in the order they run; the test before each names what its pattern cannot do
# without.
_FIXED_STEPS: list[tuple[Callable[[str], bool], Callable[[str], str]]] = [
    (lambda s: "-----BEGIN " in s, lambda s: _PRIVATE_KEY.sub(REDACTED, s)),
    (lambda s: "://" in s and "@" in s, lambda s: _URL_CREDENTIALS.sub(lambda m: m.group("scheme"), s)),
    (lambda s: "hooks.slack.com/" in s, lambda s: _SLACK_HOOK.sub(lambda m: m.group(1) + REDACTED, s)),
    (lambda s: "/t/" in s and "://" in s, lambda s: _CONDA_TOKEN.sub(lambda m: m.group(1) + REDACTED, s)),
    (lambda s: "eyJ" in s, lambda s: _JWT.sub(REDACTED, s)),
    (_may_name_auth_scheme, lambda s: _AUTH_VALUE.sub(lambda m: m.group(1) + m.group(2) + REDACTED, s)),
    (lambda s: "=" in s, lambda s: _SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, s)),
    (lambda s: "=" in s, lambda s: _ENV_ASSIGNMENT.sub(_env_assignment, s)),
    (lambda s: ":" in s and "@" in s, lambda s: _USER_PASSWORD.sub(REDACTED + "@", s)),
    (lambda s: len(s) >= 15, lambda s: _TOKENS.sub(REDACTED, s)),  # the shortest: a 3-letter prefix + 12
    (lambda s: len(s) >= 40, lambda s: _AWS_SECRET.sub(_aws_secret, s)),
    (lambda s: len(s) >= 60, lambda s: _BASE64_RUN.sub(_base64_run, s)),
]
_HOME_STEPS: list[tuple[Callable[[str], bool], Callable[[str], str]]] = [
    (lambda s: "/home/" in s or "Users" in s, lambda s: _HOME_GENERIC.sub("~", s)),
    (lambda s: "/" in s, lambda s: _USER_FOLDER.sub(lambda m: f"{m.group(1)}/{USER}", s)),
]
_ID_STEPS: list[tuple[Callable[[str], bool], Callable[[str], str]]] = [
    (lambda s: "MIG-GPU-" in s, lambda s: _MIG_OLD_UUID.sub("MIG-<redacted>", s)),
    (lambda s: "GPU-" in s or "MIG-" in s, lambda s: _GPU_UUID.sub(lambda m: f"{m.group(1)}-<redacted>", s)),
    (
        lambda s: "GPU-" in s or "MIG-" in s,
        lambda s: _GPU_UUID_PART.sub(lambda m: f"{m.group(1)}-<redacted>", s),
    ),
]


# Names that are no one's in particular; scrubbing them would wreck the report ("ubuntu-drivers",
# "/Users/Shared").
_GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "<host>"})
_GENERIC_USERS = frozenset(
    {
        "root", "user", "users", "shared", "public", "default", "default user", "all users", "guest",
        "admin", "administrator", "nobody", "runner", "ubuntu", "debian", "centos", "fedora", "linuxbrew",
        "jovyan", "vscode", "codespace", "docker", "conda", "cuda", "nvidia", "torch", "python", "home",
        "<user>", "~",
    }
)


def _useful_names(names: set[str], skip: frozenset[str]) -> list[str]:
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


def _looks_private(value: str) -> bool:
    """A variable's value worth hiding wherever it was copied: long enough, letters and digits, one word,
    and not a path, a version or a URL (those are redacted by their own rules)."""
    return bool(
        len(value) >= 8
        and not re.search(r"\s", value)
        and re.search(r"[A-Za-z]", value)
        and re.search(r"\d", value)
        and not value.startswith(("/", "~", "."))
        and "://" not in value
        and not re.match(r"^[A-Za-z]:[\\/]", value)
        and not re.match(r"^v?\d+(\.\d+)*([.+-][A-Za-z0-9.]+)?$", value)
    )


# Variables whose values are places and settings, not secrets: in a log line they keep their value (which
# the path, user and host rules still go over).
_TEXT_KEEPS = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TMPDIR",
        "TEMP",
        "TMP",
        "USER",
        "LOGNAME",
        "HOSTNAME",
        "DISPLAY",
        "MANPATH",
        "PYTHONHOME",
        "EDITOR",
    }
)


def _env_assignment(m: re.Match) -> str:
    name, value = m.group(1), m.group(2)
    if (
        name in ENV_ALLOW_LIST
        or name in _TEXT_KEEPS
        or name.startswith(("LC_", "XDG_"))
        or value == REDACTED
        or len(value.strip("\"'")) <= 4
        or value.isdigit()
    ):
        return m.group(0)
    return f"{name}={REDACTED}"


def _aws_secret(m: re.Match) -> str:
    text = m.group(0)
    mixed = re.search(r"[a-z]", text) and re.search(r"[A-Z]", text) and re.search(r"\d", text)
    return REDACTED if mixed and text.count("/") <= 3 else text


def _base64_run(m: re.Match) -> str:
    text = m.group(0)
    mixed = re.search(r"[a-z]", text) and re.search(r"[A-Z]", text) and re.search(r"\d", text)
    return REDACTED if mixed and text.count("/") <= len(text) // 16 else text


def _ipv4(m: re.Match) -> str:
    text = m.group(0)
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        # 010.077.003.015: leading zeros (ipaddress refuses them, inet_aton does not)
        octets = text.split(".")
        if len(octets) == 4 and all(o.isdigit() and int(o) <= 255 for o in octets):
            address = ipaddress.IPv4Address(".".join(str(int(o)) for o in octets))
        else:
            return text
    return text if address.is_loopback or address.is_unspecified else "<ip>"


def _ipv6(m: re.Match) -> str:
    text = m.group(0)
    try:
        address = ipaddress.IPv6Address(text.split("%")[0])
    except ValueError:
        return text
    return text if address.is_loopback or address.is_unspecified else "<ip>"
