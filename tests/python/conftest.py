# Test helpers (reference.py) live next to the tests; make them importable in any import mode.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "all_majors: GEMM layouts beyond A row-major / B column-major / C, D row-major (A "
        "column-major, B row-major, C or D column-major, incl. every GEMM backward); deselect "
        "with -m 'not all_majors' on a C++ library that does not support them yet")
