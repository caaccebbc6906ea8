"""The list of every rule, in the order they run. Adding a rule is adding it here: a rule module that
fails to import fails loudly, so no rule can vanish without a word."""

from __future__ import annotations

from doctor.rules import core, dependencies, hazards, runtime, wanted

RULES = [*core.RULES, *dependencies.RULES, *wanted.RULES, *runtime.RULES, *hazards.RULES]
