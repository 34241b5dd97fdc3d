"""engines/gpu_anchors.py (kernels/anchors.cu: the genome bound's exact 16-mer anchors) with its kernels compiled
for the CPU (tests/emu) and its host code on numpy arrays, against long_bound's numpy anchors: what
test_arrays checks on the device, in CI."""

import numpy as np
import pytest
from test_long_bound import CASES, u8

import emu
from gpualign import long_bound as LB

pytestmark = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")


@pytest.fixture
def anchors(monkeypatch):
    from gpualign.engines import gpu_anchors

    monkeypatch.setattr(gpu_anchors, "load_module", emu.load_module)
    with emu.cupy_on_numpy():
        yield gpu_anchors.anchors


@pytest.mark.parametrize("case", sorted(CASES))
def test_emulated_anchors_are_the_numpy_anchors(anchors, case):
    q, t = (u8(s) for s in CASES[case]())
    dq, dt = anchors(q, t)
    hq, ht = LB.raw_anchors(q, t)
    assert dq.dtype == hq.dtype == np.int64 and np.array_equal(dq, hq) and np.array_equal(dt, ht)
    assert [a.tolist() for a in LB.anchors(q, t, anchors)] == [a.tolist() for a in LB.anchors(q, t)]
