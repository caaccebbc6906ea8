"""Exit codes, in one place. Documented in `torchdoctor --help` and docs/usage.md (every use of each code)."""

OK = 0  # no error finding (warnings alone do not fail unless --strict)
FINDINGS = 1  # at least one error finding (or a warning with --strict)
USAGE = 2  # bad command line, unreadable input (a table, a report), or output that cannot be written
INTERNAL = 3  # torchdoctor itself failed: please report it
REQUIREMENT = 4  # a CI requirement (--require, --min-gpus, ...) is not met
FIX_FAILED = 5  # `fix` ran and a step failed; the restore command was printed
REFUSED = 6  # `fix` refused, nothing changed: no consent, PEP 668, conda base, changes outside torch,
# a foreign package source, another fix holding the environment's lock
INTERRUPTED = 130

HELP = """Exit codes:
  0  healthy: no error finding
  1  error findings (warnings too with --strict)
  2  usage error, an input (table, report) that cannot be read, or output that cannot be written
  3  internal error in torchdoctor (please report it)
  4  a CI requirement (--require, --min-gpus, ...) is not met
  5  fix: a step failed (the restore command is printed)
  6  fix: refused, nothing changed (no consent, externally-managed or conda base environment,
     changes outside torch without --force, a package source the plan does not name,
     another fix holding the environment's lock)
  130 interrupted"""
