"""Stand-in start-up hook for the smoke-test tests (copied into the throw-away venv's site-packages).

With ``"startup_garbage"`` in the ``TD_STANDIN_SCENARIO`` file it prints that text on stdout and
exits 0 before any script runs: an interpreter whose start-up (a site hook, a wrapper) replaces
the program, so the torch child's protocol never appears. Otherwise it does nothing.
"""

import json
import os
import sys

if os.environ.get("TD_STANDIN_SCENARIO"):
    with open(os.environ["TD_STANDIN_SCENARIO"]) as _f:
        _garbage = json.load(_f).get("startup_garbage")
    if _garbage:
        sys.stdout.write(_garbage + "\n")
        sys.stdout.flush()
        os._exit(0)
