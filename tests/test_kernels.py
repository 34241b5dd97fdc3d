"""Every kernel file compiles with nvcc for Hopper (when nvcc is on the machine; CI has it)."""

import glob
import os
import shutil
import subprocess

import pytest

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def _kernels(root):
    return sorted(glob.glob(os.path.join(root, "kernels", "*.cu")))


def test_there_are_kernels(root):
    assert _kernels(root)


@pytest.mark.slow  # (nvcc: 16 s for the kernels on 2 cores)
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_kernels_compile(root, tmp_path):
    for path in _kernels(root):
        p = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90", f"-I{os.path.join(root, 'kernels')}", "-cubin",
                            "-o", str(tmp_path / "k.cubin"), path], capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{path}:\n{p.stderr}"
        assert "warning" not in p.stderr.lower(), p.stderr
