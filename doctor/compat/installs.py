"""Which of an environment's conda records belong to torch, decided once for the rules and the plan (pure).

The same records answer two questions, so there are two kinds of list:

- what a record *is*: torch itself as conda builds it (``CONDA_TORCH``), the CUDA conda installs for it
  (``CONDA_CUDA``), the companions (``CONDA_COMPANIONS``). The hazard rules use these: conda's torch beside a
  pip torch is ``mixed-conda-pip-torch``, conda's CUDA of another version is ``conda-cuda-mismatch``.
- what must leave before pip installs the wheels (``CONDA_REMOVE_BEFORE_PIP``): the plan's ``conda remove``
  step and ``fix``'s restore file. It holds conda's torch, the companions pip reinstalls, and the
  metapackages that pin conda's build of torch (``pytorch-cuda``, ``cpuonly``). It leaves ``cudatoolkit``,
  a plain CUDA runtime other conda packages may need (the wheels bring their own CUDA libraries), and it
  has never held ``pytorch-cpu``, which ``CONDA_TORCH`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.model.environment import CondaRecord
from doctor.model.snapshot import Snapshot
from doctor.model.versions import normalize_name

CONDA_TORCH = ("pytorch", "pytorch-gpu", "pytorch-cpu", "libtorch")
CONDA_CUDA = ("pytorch-cuda", "cudatoolkit")
CONDA_COMPANIONS = ("torchvision", "torchaudio")
CONDA_REMOVE_BEFORE_PIP = (
    "pytorch",
    "pytorch-gpu",
    "pytorch-cuda",
    "cpuonly",
    "libtorch",
    "torchvision",
    "torchaudio",
)


@dataclass(frozen=True, slots=True)
class CondaTorch:
    """The target environment's conda records of torch's family, each list in conda-meta order."""

    prefix: str | None = None  # the conda environment; None when the inspector found none
    torch: tuple[CondaRecord, ...] = ()  # conda owns torch itself when this is not empty
    cuda: tuple[CondaRecord, ...] = ()
    companions: tuple[CondaRecord, ...] = ()
    remove_before_pip: tuple[CondaRecord, ...] = ()


def conda_torch(snap: Snapshot) -> CondaTorch:
    """What conda installed of torch's family in the target environment (from the inspector's conda-meta)."""
    python = snap.environment.python
    conda = python.conda if python is not None else None
    if conda is None:
        return CondaTorch()

    def named(names: tuple[str, ...]) -> tuple[CondaRecord, ...]:
        return tuple(r for r in conda.records if normalize_name(r.name) in names)

    return CondaTorch(
        prefix=conda.prefix,
        torch=named(CONDA_TORCH),
        cuda=named(CONDA_CUDA),
        companions=named(CONDA_COMPANIONS),
        remove_before_pip=named(CONDA_REMOVE_BEFORE_PIP),
    )
