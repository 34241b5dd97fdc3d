import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(ROOT, "scripts"))  # last: scripts/profile.py must not hide the stdlib's profile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    """The CPU-emulated kernels (tests/emu) compiled into pytest's cache directory, kept from one session to
    the next (`pytest --cache-clear` removes them); without the cache plugin, a temporary directory
    removed at exit."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        os.environ.setdefault("GPUALIGN_EMU_DIR", str(cache.mkdir("gpualign-emu")))


def _has_gpu() -> bool:
    from gpualign.gpu.kernels import gpu_status

    return gpu_status()[0]


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def root():
    return ROOT


@pytest.fixture
def real_data():
    """../shared/data/real, or $GPUALIGN_REAL_DATA, or .realdata/ (a copy carried to the GPU machine)."""
    for cand in (os.environ.get("GPUALIGN_REAL_DATA", ""), os.path.join(ROOT, "..", "shared", "data", "real"),
                 os.path.join(ROOT, ".realdata")):
        if cand and os.path.isdir(cand):
            return cand
    pytest.skip("real data not present")
