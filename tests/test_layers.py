"""The layering, held by a test: every import of every module under doctor/ (lazy ones inside
functions included) is parsed and checked against the layer map below, and the module graph must
have no circle. A new module must find its place here, so the architecture cannot erode silently.

Lower layers never import higher ones: the model knows nothing of the table, rules never reach the
system (probes, runner), the plan never carries anything out (fix), renderers never judge (rules),
and the stdlib-only scripts the target interpreter runs import nothing of torchdoctor.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "doctor"

# layer -> the layers it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "base": set(),  # doctor/__init__, errors, exitcodes
    "model": {"base"},
    "runner": {"base"},
    "table": {"base", "model"},
    "compat": {"base", "model", "table"},
    "target": set(),  # stdlib only: runs in the target interpreter (Python 3.8+)
    "probes": {"base", "model", "runner", "compat"},
    "inputs": {"base", "model", "compat"},
    "rules": {"base", "model", "table", "compat"},
    "plan": {"base", "model", "table", "compat"},
    "render": {"base", "model"},
    "fix": {"base", "model", "runner", "table", "compat", "plan", "render"},
    # render: rank 0 writes the plain-text view itself (render/distributed.py, stdlib only)
    "distributed": {"base", "model", "runner", "compat", "plan", "render", "target"},
    "app": {
        "base",
        "model",
        "runner",
        "table",
        "compat",
        "probes",
        "inputs",
        "rules",
        "plan",
        "render",
        "fix",
        "distributed",
    },
    "cli": {"base", "app"},
}
LOOSE = {"__init__": "base", "errors": "base", "exitcodes": "base", "runner": "runner", "cli": "cli",
         "__main__": "cli"}
# A soft cap, measured in lines of code after ruff's E501 at 110 columns: a module past it is a sign that it
# holds more than one concept and should be split where the concepts split. doctor/target/ is exempt: each of
# its scripts is shipped to the target interpreter as one file.
MAX_LINES = 800
MAX_LOOSE = 6


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(("doctor",) + parts)] = path
    return out


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "base"
    if parts[1] in ALLOWED and len(parts) > 2 or (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return LOOSE[parts[1]]


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if not name.startswith("doctor"):
                continue
            # the deepest known module the name refers to ("doctor.rules.Rule" -> "doctor.rules")
            while name not in known and "." in name:
                name = name.rpartition(".")[0]
            if name in known and name != module:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports_of(m, p, set(mods)) for m, p in mods.items()}


def test_every_module_has_a_layer():
    for module in modules():
        assert layer_of(module) in ALLOWED, module


def test_layers_import_only_downward():
    wrong = []
    for module, deps in graph().items():
        mine = layer_of(module)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{module} ({mine}) imports {dep} ({theirs})")
    assert not wrong, "upward or sideways imports:\n" + "\n".join(wrong)


def test_no_import_circle():
    g = graph()
    # a package's __init__ re-exporting its own modules is not a circle between layers
    edges = {
        m: {
            d
            for d in deps
            if not (m == d.rpartition(".")[0] and (PACKAGE / "/".join(m.split(".")[1:])).is_dir())
        }
        for m, deps in g.items()
    }
    state: dict[str, int] = {}
    circles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                circles.append(" -> ".join(stack[stack.index(dep):] + [dep]) if dep in stack else f"{node} "
                    f"-> {dep}")
            elif not state.get(dep):
                visit(dep, stack + [dep])
        state[node] = 2

    for module in sorted(edges):
        if not state.get(module):
            visit(module, [module])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_target_scripts_are_stdlib_only():
    # the rank side is imported as doctor.target.*; the inspector and smoke scripts run as bare files
    for module, deps in graph().items():
        if layer_of(module) == "target":
            outside = {d for d in deps if layer_of(d) != "target"}
            assert not outside, f"{module} imports {outside}: the target interpreter has no torchdoctor"
            if module.rpartition(".")[2] in ("inspector", "smoke"):
                assert not deps, f"{module} runs as a bare file: it can import no other module of ours"


def test_modules_are_small():
    big = {
        str(p.relative_to(REPO)): n
        for p in PACKAGE.rglob("*.py")
        if p.parent.name != "target" and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not big, f"over {MAX_LINES} lines: {big}"


def test_few_loose_modules():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE, loose


def test_the_check_catches_an_upward_import(tmp_path):
    # the checker itself: a rules module importing a probe must be reported
    fake = tmp_path / "mod.py"
    fake.write_text("from doctor.probes.nvidia import probe_nvidia\n")
    found = imports_of("doctor.rules.fake", fake, set(modules()))
    assert "doctor.probes.nvidia" in found and "probes" not in ALLOWED[layer_of("doctor.rules.fake")]
