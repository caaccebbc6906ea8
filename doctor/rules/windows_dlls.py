"""Why `import torch` fails on Windows when a DLL does not load: the release's own known DLL problem, then the
Microsoft Visual C++ runtime that every torch DLL links against (vcruntime140.dll, vcruntime140_1.dll,
msvcp140.dll)."""

from __future__ import annotations

import re

from doctor.model import snapshot as S
from doctor.model.findings import Fix
from doctor.model.i18n import Msg

# How a DLL that torch's own DLLs need fails to load on Windows: "[WinError 126] The specified module could
# not be found. Error loading ...\\torch\\lib\\c10.dll or one of its dependencies", WinError 1114 (its
# initialisation failed), "DLL load failed while importing _C".
WINDOWS_DLL = re.compile(r"WinError (?:126|127|1114)|DLL load failed|Error loading .*\.dll", re.IGNORECASE)
VC_REDIST = "https://aka.ms/vs/17/release/vc_redist.x64.exe"
# Releases with a DLL cause of their own, before the usual one (the Visual C++ runtime).
_WINDOWS_RELEASE_CAUSES = {
    "2.4.0": Msg("torch 2.4.0's fbgemm.dll needs libomp140.x86_64.dll, which the Visual C++ Redistributable "
        "does "
                 "not install: \"[WinError 126] ... Error loading ...\\torch\\lib\\fbgemm.dll or one of its "
                 "dependencies\" (pytorch/pytorch#131662, a 2.4.0 regression, fixed in 2.4.1). Install torch "
                 "2.4.1 or "
                 "later, or the MSVC build tools, which bring that DLL."),
}


_FIXED_IN = {"2.4.0": "2.4.1"}
# A torch DLL whose failure to load is a release's own problem: which release, when the paste names the DLL
# but not the torch version (a traceback pasted with a collect_env text that could not list packages).
_DLL_RELEASE = {"fbgemm.dll": "2.4.0"}


def windows_dll_hint(snapshot: S.Snapshot, retry: str, dll: str | None = None) -> tuple[str, Fix]:
    """The likely causes of a Windows import failure: the release's own known DLL problem first, then a
    missing or old Microsoft Visual C++ runtime, which every torch DLL (c10.dll first) links against.
    ``dll``: the DLL the error names ("...\\torch\\lib\\fbgemm.dll"), when known."""
    dist = snapshot.install.torch
    version = ((dist.version if dist else None) or snapshot.runtime.torch_version or "").split("+")[0]
    guessed = not version and bool(dll)  # the DLL's name points at a release; the paste does not say which
    if guessed:
        version = _DLL_RELEASE.get(re.split(r"[\\/]", dll)[-1].lower(), "")
    known = _WINDOWS_RELEASE_CAUSES.get(version)
    hint = Msg(" On Windows the likely cause is a DLL torch's own DLLs load:")
    if known and guessed:
        hint += Msg(" if this torch is {version} (the text does not say which it is): {known} "
                    "Otherwise:", version=version, known=known)
    elif known:
        hint += Msg(" {known} Otherwise:", known=known)
    hint += Msg(" a missing or old Microsoft Visual C++ Redistributable (vcruntime140.dll, "
                "vcruntime140_1.dll, msvcp140.dll), which shows as \"[WinError 126] The specified module "
                "could not be found\" or \"[WinError 1114] A dynamic link library (DLL) initialization "
                "routine failed\" while loading torch\\lib\\c10.dll (pytorch/pytorch#32916).")
    if known:
        return hint, Fix(Msg("Install torch {fixed} or later (or the MSVC build tools); if the import "
                             "still fails, the latest Microsoft Visual C++ Redistributable (x64). Then retry "
                             "the import.", fixed=_FIXED_IN[version]),
                         [retry], ["https://github.com/pytorch/pytorch/issues/131662", VC_REDIST])
    return hint, Fix(Msg("Install the latest Microsoft Visual C++ Redistributable (x64), then retry the "
                         "import."), [retry], [VC_REDIST])
