# Test helpers (reference.py) live next to the tests; make them importable in any import mode.
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "all_majors: GEMM layouts beyond A row-major / B column-major / C, D row-major (A "
        "column-major, B row-major, C or D column-major, incl. every GEMM backward); deselect "
        "with -m 'not all_majors' on a C++ library that does not support them yet")


@pytest.fixture(scope="module", autouse=True)
def _stand_in_kernels(request):
    """QUACK_TEST_DEVICE=cpu: a module that sets STAND_IN = True runs with the CPU stand-ins of
    the CUDA kernels registered (cpu_stand_in.py); otherwise nothing happens."""
    if os.environ.get("QUACK_TEST_DEVICE", "cuda") != "cpu" or not getattr(request.module, "STAND_IN", False):
        yield
        return
    import cpu_stand_in
    with cpu_stand_in.registered():
        yield
