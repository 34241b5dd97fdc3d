"""The compiled-kernel cache (engines/_cuda.py): keys, files, and on a GPU a module loaded from it."""

import os

import numpy as np
import pytest

from gpualign.engines import _cuda


def test_key_changes_with_everything_a_module_depends_on():
    base = ("code", {"common.cuh": "a"}, ("-std=c++17",), ("k<1>",), ("14.0", (13, 0), "90"))
    key = _cuda.cache_key(*base)
    assert key == _cuda.cache_key(*base)
    changed = [("code2", *base[1:]), (base[0], {"common.cuh": "b"}, *base[2:]),
               (*base[:2], ("-std=c++17", "-DX"), *base[3:]), (*base[:3], ("k<2>",), base[4]),
               (*base[:4], ("14.0", (13, 1), "90")), (base[0], {**base[1], "other.cuh": ""}, *base[2:])]
    assert len({_cuda.cache_key(*c) for c in changed} | {key}) == len(changed) + 1


def test_stored_module_comes_back_and_a_damaged_one_does_not(tmp_path):
    stem = str(tmp_path / "sub" / "abc")
    mapping = {"k<1>": "_Z1kILi1EEvv"}
    assert _cuda._cached(stem) is None
    assert _cuda._store(stem, b"\x7fELF binary", mapping)
    assert _cuda._cached(stem) == mapping
    with open(stem + ".cubin", "wb") as fh:
        fh.write(b"\x7fELF other")
    assert _cuda._cached(stem) is None
    os.unlink(stem + ".json")
    assert _cuda._cached(stem) is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert not _cuda._store(str(blocker / "abc"), b"x", mapping)  # a directory that cannot be made


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(_cuda.CACHE_ENV, str(tmp_path))
    assert _cuda.cache_dir() == str(tmp_path)
    monkeypatch.delenv(_cuda.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cuda.cache_dir() == os.path.join(str(tmp_path / "xdg"), "gpualign", "kernels")


@pytest.mark.gpu
def test_second_load_comes_from_the_cache_and_aligns_exactly(monkeypatch, tmp_path):
    from cupy.cuda import compiler
    from oracles import affine
    from oracles import check_against as verify
    from strategies import to_batch

    from gpualign.config import AlignConfig, Penalties
    from gpualign.engines.gpu_affine import GpuAffineEngine

    monkeypatch.setenv(_cuda.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(_cuda, "_modules", {})
    rng = np.random.default_rng(3)
    pairs = []
    for ln in (1, 40, 300, 2000):
        q = bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), ln))
        t = bytearray(q)
        for i in rng.integers(0, ln, max(1, ln // 10)):
            t[i] = b"ACGT"[(b"ACGT".index(t[i]) + 1) % 4]
        pairs.append((q, bytes(t[: ln - ln // 20])))
    batch = to_batch(pairs)
    pen = Penalties(4, 6, 2)
    cfg = AlignConfig(metric="affine", penalties=pen)
    want = np.array([affine(q, t, pen) for q, t in pairs])
    verify(batch, GpuAffineEngine().align(batch, cfg), cfg, want)  # compiled, then stored
    assert any(name.endswith(".cubin") for name in os.listdir(tmp_path))
    assert any(name.endswith(".json") for name in os.listdir(tmp_path))

    def no_compile(*a, **k):
        raise AssertionError("compiled again instead of loading the cache")

    monkeypatch.setattr(_cuda, "_modules", {})
    monkeypatch.setattr(compiler, "compile_using_nvrtc", no_compile)
    verify(batch, GpuAffineEngine().align(batch, cfg), cfg, want)
