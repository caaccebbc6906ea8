import os
import sys

# tests import their helpers (factory, fakeenv, realtorch) as plain modules
sys.path.insert(0, os.path.dirname(__file__))
