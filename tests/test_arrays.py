"""gpu/arrays.py (kernels/arrays.cu) and engines/gpu_anchors.py (kernels/anchors.cu) on the GPU,
against numpy on the same data (the kernels replace CuPy operations that compile on first use)."""

import numpy as np
import pytest
from test_long_bound import CASES, u8

from gpualign import long_bound as LB

SIZES = [0, 1, 255, 4095, 4096, 4097, 70_001, 1_000_003]
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def A():
    from gpualign.gpu import arrays

    return arrays


@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_full_arange_gather_scatter_reverse(A, cp, dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    for n in SIZES[:7]:
        value = dtype(info.max - 3)
        assert np.array_equal(A.full(n, value, dtype).get(), np.full(n, value, dtype))
        src = rng.integers(0, min(info.max, 1 << 30), n, dtype=np.int64).astype(dtype)
        d_src = cp.asarray(src)
        assert np.array_equal(A.reverse(d_src).get(), src[::-1])
        idx = rng.integers(0, max(1, n), n // 2 if n else 0).astype(np.int64)
        if n:
            assert np.array_equal(A.gather(d_src, cp.asarray(idx)).get(), src[idx])
        perm = rng.permutation(n).astype(np.int64)[:n // 3]
        vals = rng.integers(0, 100, len(perm)).astype(dtype)
        dst = src.copy()
        dst[perm] = vals
        d_dst = cp.asarray(src)
        A.scatter(d_dst, cp.asarray(perm), cp.asarray(vals))
        assert np.array_equal(d_dst.get(), dst)
    if dtype in (np.int32, np.int64):
        for start, stop, step in ((0, 0, 1), (0, 10, 1), (3, 100_000, 7), (0, 5000, 4096)):
            assert np.array_equal(A.arange(start, stop, step, dtype).get(), np.arange(start, stop, step, dtype=dtype))


def test_copy_of_a_slice(A, cp):
    """A contiguous slice copied (eWFA's CIGARs compacted after a batch of several levels): its own memory, the
    same values; CuPy's ndarray.copy() would compile a kernel (test_kernel_cache's first runs compile none)."""
    src = np.arange(70_001, dtype=np.uint32) * 7
    d = cp.asarray(src)
    for a, b in ((0, 0), (0, 1), (5, 70_001), (3, 40_000)):
        out = A.copy(d[a:b])
        assert out.data.ptr != d[a:b].data.ptr or a == b
        assert np.array_equal(out.get(), src[a:b])
    A.fill(d, 0)
    assert np.array_equal(out.get(), src[3:40_000])


def test_translate_and_byte_counts(A, cp):
    rng = np.random.default_rng(2)
    for n in SIZES:
        a = rng.integers(0, 256, n).astype(np.uint8)
        d_a = cp.asarray(a)
        assert np.array_equal(A.byte_counts(d_a), np.bincount(a, minlength=256))
        for table in (rng.integers(0, 256, 256).astype(np.uint8), (np.arange(256) * 128 % 65536).astype(np.uint16)):
            assert np.array_equal(A.translate(d_a, table).get(), table[a])
            assert np.array_equal(A.translate(d_a, cp.asarray(table)).get(), table[a])
        out = A.full(n + 10, 7, np.uint16)
        A.translate(d_a, np.arange(256, dtype=np.uint16), out=out[5:5 + n])
        want = np.full(n + 10, 7, np.uint16)
        want[5:5 + n] = a
        assert np.array_equal(out.get(), want)


def test_cumsum_inclusive_exclusive_and_in_place(A, cp):
    rng = np.random.default_rng(3)
    for n in [*SIZES, 4096 * 4096 + 5]:  # the last: more tiles than scan_top takes in one sweep
        x = rng.integers(-1000, 1 << 20, n).astype(np.int64)
        inc = np.cumsum(x)
        d_x = cp.asarray(x)
        assert np.array_equal(A.cumsum(d_x).get(), inc)
        assert np.array_equal(A.cumsum(d_x, exclusive=True).get(), inc - x)
        A.cumsum(d_x, out=d_x)
        assert np.array_equal(d_x.get(), inc)


def test_narrow_rows(A, cp):
    rng = np.random.default_rng(4)
    for n in SIZES:
        rows = [rng.integers(0, 1 << 31, n, dtype=np.int64) for _ in range(4)]
        got = A.narrow_rows([cp.asarray(r) for r in rows])
        assert got.dtype == np.int32 and got.shape == (4, n)
        assert np.array_equal(got.get(), np.stack(rows).astype(np.int32))


@pytest.mark.parametrize("kdtype", [np.uint32, np.uint64])
def test_sort_pairs_is_a_stable_sort(A, cp, kdtype):
    rng = np.random.default_rng(4)
    for n in SIZES:
        for high in (4, 1 << 20, np.iinfo(kdtype).max):  # many equal keys; few; the full range
            keys = rng.integers(0, high, n, dtype=np.uint64, endpoint=True).astype(kdtype)
            vals = rng.integers(-(1 << 40), 1 << 40, n).astype(np.int64)
            d_k, d_v = cp.asarray(keys), cp.asarray(vals)
            sk, sv = A.sort_pairs(d_k, d_v)
            order = np.argsort(keys, kind="stable")
            assert np.array_equal(sk.get(), keys[order]) and np.array_equal(sv.get(), vals[order])
            assert np.array_equal(d_k.get(), keys) and np.array_equal(d_v.get(), vals)  # inputs kept
            assert np.array_equal(A.argsort(d_k).get(), order)
    keys = rng.integers(0, 1 << 12, 10_000).astype(kdtype)  # bits: only the low bits are sorted on
    sk, _ = A.sort_pairs(cp.asarray(keys), cp.asarray(np.arange(10_000, dtype=np.int64)), bits=12)
    assert np.array_equal(sk.get(), np.sort(keys))


@pytest.mark.parametrize("case", sorted(CASES))
def test_device_anchors_are_the_numpy_anchors(case):
    from gpualign.engines import gpu_anchors

    q, t = (u8(s) for s in CASES[case]())
    dq, dt = gpu_anchors.anchors(q, t)
    hq, ht = LB.raw_anchors(q, t)
    assert dq.dtype == hq.dtype == np.int64 and np.array_equal(dq, hq) and np.array_equal(dt, ht)
    assert [a.tolist() for a in LB.anchors(q, t, gpu_anchors.anchors)] == [a.tolist() for a in LB.anchors(q, t)]
