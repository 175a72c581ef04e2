# Test helpers (reference.py) live next to the tests; make them importable in any import mode.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
