"""Kept only so that ``-m doctor.distributed.core`` (named in older help text and job scripts) still
runs a rank; the code lives in entry.py, analysis.py, report.py and launch.py beside this file."""

import sys

from doctor.distributed.entry import main

if __name__ == "__main__":
    sys.exit(main())
