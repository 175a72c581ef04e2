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


# QUACK_TEST_DEVICE=cpu: the stand-ins are torch's own math, so a case of more than this many
# rows x columns (parameters M and N) checks nothing that a smaller one does not, and costs up to
# 40 s on a 2-core machine: such cases skip there (they run on the GPU).
STAND_IN_MAX_ELEMENTS = 1 << 24


def pytest_collection_modifyitems(config, items):
    if os.environ.get("QUACK_TEST_DEVICE", "cuda") != "cpu":
        return
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if not getattr(item.module, "STAND_IN", False) or "M" not in params or "N" not in params:
            continue
        if not all(isinstance(params[k], int) for k in ("M", "N")):
            continue
        if params["M"] * params["N"] > STAND_IN_MAX_ELEMENTS:
            item.add_marker(pytest.mark.skip(
                reason=f"QUACK_TEST_DEVICE=cpu: M x N = {params['M'] * params['N']} > "
                       f"{STAND_IN_MAX_ELEMENTS} (conftest.py, STAND_IN_MAX_ELEMENTS)"))


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
