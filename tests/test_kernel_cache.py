"""Compiled kernels: images on disk (gpu/images.py), the registry of every module the engines ask for
(engines/variants.py), building them ahead with NVRTC (gpu/nvrtc.py, no GPU needed), `gpualign cache`,
and on a GPU: first calls that load built images and compile nothing, with the outputs of compiled ones."""

import hashlib
import json
import os

import pytest
from cli_helper import ROOT, run_cli
from test_genome import mutate, rand

from gpualign.engines import (
    gpu_affine,
    gpu_anchors,
    gpu_dp,
    gpu_edit,
    gpu_long,
    variants,
)
from gpualign.gpu import arrays, images, nvrtc
from gpualign.search import gpu as search_gpu
from gpualign.search import gpu_align, patterns

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")


def test_digest_changes_with_the_code_headers_and_options_not_with_the_directory():
    base = ("code", {"common.cuh": "a"}, ("-std=c++17",))
    dig = images.digest(*base)
    assert dig == images.digest(*base)
    changed = [("code2", *base[1:]), (base[0], {"common.cuh": "b"}, base[2]), (*base[:2], ("-std=c++17", "-DX")),
               (base[0], {**base[1], "other.cuh": ""}, base[2])]
    assert len({images.digest(*c) for c in changed} | {dig}) == len(changed) + 1
    code, headers = images.sources("ewfa.cu")
    assert "common.cuh" in headers and "__global__" in code
    assert not any(o.startswith("-I") for o in images.options(("A=1",)))  # where kernels/ is: not in the digest


def _put(d, target, names=("k<1>", "k<2>"), file="x.cu", dig="d" * 64, image=None):
    image = image if image is not None else f"image {target} {names}".encode()
    return images.store(str(d), file, dig, tuple(names), target, image, {n: f"sym_{n}" for n in names}, (13, 0))


def test_the_best_fitting_image_is_found_first(tmp_path):
    for t in ("sm_75", "sm_80", "sm_90", "sm_100", "sm_120", "compute_75"):
        _put(tmp_path, t)
    dirs = [str(tmp_path)]

    def first(cc, names=("k<1>",), dig="d" * 64):
        hit = next(images.find("x.cu", dig, names, cc, dirs), None)
        return None if hit is None else json.load(open(hit[0].rsplit(".", 1)[0] + ".json"))["target"]

    assert first((9, 0)) == "sm_90"
    assert first((8, 6)) == first((8, 9)) == "sm_80"  # same major, lower minor
    assert first((10, 3)) == "sm_100" and first((12, 1)) == "sm_120"
    assert first((11, 0)) == "compute_75"  # no cubin of its family: the PTX, compiled by the driver
    assert first((7, 0)) is None  # older than every image
    assert first((9, 0), ("k<1>", "k<3>")) is None  # a name the images do not hold
    assert first((12, 0)) == "sm_120" and first((10, 0)) == "sm_100"
    assert first((9, 0), dig="e" * 64) is None  # other sources
    path, mapping, image = next(images.find("x.cu", "d" * 64, ("k<2>",), (9, 0), dirs))
    assert mapping == {"k<1>": "sym_k<1>", "k<2>": "sym_k<2>"} and image == open(path, "rb").read()


def test_newer_cubins_and_ptx_than_the_gpu_are_not_used(tmp_path):
    _put(tmp_path, "sm_86")
    _put(tmp_path, "compute_90")
    dirs = [str(tmp_path)]
    assert next(images.find("x.cu", "d" * 64, ("k<1>",), (8, 0), dirs), None) is None
    for cc, target in (((8, 9), "sm_86"), ((9, 0), "compute_90")):
        path = next(images.find("x.cu", "d" * 64, ("k<1>",), cc, dirs))[0]
        assert json.load(open(path.rsplit(".", 1)[0] + ".json"))["target"] == target


def test_images_are_readable_by_everyone_and_foreign_json_is_passed_over(tmp_path):
    path = _put(tmp_path, "sm_90")
    for name in os.listdir(tmp_path):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o644, name
    good = json.load(open(path.rsplit(".", 1)[0] + ".json"))
    broken = [{k: v for k, v in good.items() if k != "mapping"}, {**good, "target": "sm_9"}, {**good, "names": None},
              {**good, "names": ["k<1>", "k<9>"]}, [1, 2], {**good, "sha256": 5}]
    for i, meta in enumerate(broken):
        other = tmp_path / f"x-{'d' * 20}-sm_90-bad{i}.json"
        other.write_text(json.dumps(meta))
    (tmp_path / f"x-{'d' * 20}-sm_90-text.json").write_text("not json")
    assert [m["path"] for m in images.entries(str(tmp_path))] == [path]
    assert [p for p, _, _ in images.find("x.cu", "d" * 64, ("k<1>",), (9, 0), [str(tmp_path)])] == [path]


def test_a_damaged_image_is_passed_over_and_directories_keep_their_order(tmp_path):
    first, second = tmp_path / "jit", tmp_path / "shared"
    damaged = _put(first, "sm_90")
    good = _put(second, "compute_75")
    with open(damaged, "ab") as fh:
        fh.write(b"!")
    found = [p for p, _, _ in images.find("x.cu", "d" * 64, ("k<1>",), (9, 0), [str(first), str(second)])]
    assert found == [good]
    _put(first, "sm_90")  # mended: the first directory wins again
    found = [p for p, _, _ in images.find("x.cu", "d" * 64, ("k<1>",), (9, 0), [str(first), str(second)])]
    assert found[0].startswith(str(first))
    assert not [n for n in os.listdir(first) if n.startswith(".tmp-")]


def test_directories_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(images.CACHE_ENV, str(tmp_path / "jit"))
    monkeypatch.setenv(images.PATH_ENV, f"{tmp_path / 'a'}::{tmp_path / 'b'}")
    monkeypatch.delenv(images.PREBUILT_ENV, raising=False)
    assert images.search_dirs() == [str(tmp_path / "jit"), str(tmp_path / "a"), str(tmp_path / "b"),
                                     images.install_dir()]
    monkeypatch.setenv(images.PREBUILT_ENV, "0")  # built-ahead images ignored: the JIT cache alone
    assert images.search_dirs() == [str(tmp_path / "jit")]
    monkeypatch.delenv(images.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert images.cache_dir() == os.path.join(str(tmp_path / "xdg"), "gpualign", "kernels")


def test_every_request_of_the_engines_is_served_by_a_registered_module():
    # the requests as each engine makes them (engines' own name functions), against the registry
    requests = [gpu_edit.KERNELS, gpu_affine.KERNELS, gpu_dp.kernels(), gpu_long.WFA_KERNELS,
                ("bp_long.cu", ("bp_long", "bp_split_min"), gpu_long.BP_DEFINES),
                ("bp_long.cu", ("bp_long_jobs", "bp_split_min", "bp_piece_codes"), gpu_long.BP_DEFINES),
                gpu_align.KERNELS, arrays.KERNELS, gpu_anchors.KERNELS]
    for w in patterns.WORDS:  # every pattern width, with as many patterns as a launch can hold
        for n in (1, 2, 3, 5, 8, 100, search_gpu.MAX_PS - 1):
            requests.append(("myers_search.cu", (search_gpu.kernel_name(w, search_gpu.per_thread(w, n)),), ()))
    for dense in (False, True):
        for table in (False, True):
            for peq in (False, True):
                requests.append(("myers_search.cu", search_gpu.seed_names(dense, table, peq), ()))
    for file, names, defines in requests:
        assert variants.serving(file, names, defines) is not None, (file, names)
    # what is left to compile on first use: a benchmark's own defines
    assert variants.serving("wfa_affine.cu", gpu_affine.KERNELS[1], ("WFA_AFFINE_MIN_BLOCKS=2",)) is None
    assert {v[0] for v in variants.VARIANTS} == {n for n in os.listdir(os.path.join(ROOT, "kernels"))
                                                  if n.endswith(".cu")}


@pytest.mark.slow  # (NVRTC: about 25 s on 2 cores)
@needs_nvrtc
def test_every_module_builds_without_a_gpu_and_a_second_build_keeps_them(tmp_path, monkeypatch):
    built = variants.build(str(tmp_path), ("sm_90",), jobs=2)
    assert len(built) == len(variants.VARIANTS) and all(b.seconds > 0 and b.size > 1000 for b in built)
    for file, names, defines in variants.VARIANTS:
        code, headers = images.sources(file)
        dig = images.digest(code, headers, images.options(defines))
        path, mapping, image = next(images.find(file, dig, names, (9, 0), [str(tmp_path)]))
        assert set(mapping) == set(names) and image[:4] == b"\x7fELF"
        meta = json.load(open(path.rsplit(".", 1)[0] + ".json"))
        assert meta["sha256"] == hashlib.sha256(image).hexdigest() and tuple(meta["nvrtc"]) == nvrtc.version()

    def no_compile(*a, **k):
        raise AssertionError("compiled again")

    monkeypatch.setattr(nvrtc, "compile_source", no_compile)
    again = variants.build(str(tmp_path), ("sm_90",), jobs=2)
    assert len(again) == len(built) and all(b.seconds == 0.0 for b in again)


@needs_nvrtc
def test_targets_for_a_gpu_and_for_the_command_line(tmp_path):
    archs = nvrtc.supported()
    assert 90 in archs and nvrtc.target_for((9, 0)) == "sm_90"
    assert nvrtc.target_for((99, 9)) == f"compute_{max(archs)}"  # newer than NVRTC: PTX the driver compiles
    with pytest.raises(nvrtc.KernelError):
        nvrtc.target_for((1, 0))
    r = run_cli("cache", "build", "--arch", "sm_90,sm_91", "--dir", tmp_path / "out", text=True)
    assert r.returncode == 2 and "sm_91" in r.stderr and r.stderr.count("\n") == 1
    assert not os.path.exists(tmp_path / "out")  # nothing made before the targets are known good


@needs_nvrtc
def test_nvrtc_names_template_instances_and_reports_errors():
    code = "template <int N> __global__ void k(int* x) { x[0] = N; }\nextern \"C\" __global__ void plain() {}\n"
    image, mapping = nvrtc.compile_source(code, "t.cu", {}, ("-std=c++17",), ("k<3>", "plain"), "compute_75")
    assert mapping["plain"] == "plain" and mapping["k<3>"].startswith("_Z") and b".entry" in image
    with pytest.raises(nvrtc.KernelError, match="t.cu for sm_90"):
        nvrtc.compile_source("__global__ void f() { nonsense; }", "t.cu", {}, (), (), "sm_90")


def test_cache_command_checks_its_options_and_clears_only_its_own_files(tmp_path):
    r = run_cli("cache", "build", "--arch", "sm_9,gpu", "--dir", tmp_path, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "sm_9, gpu" in r.stderr and not os.listdir(tmp_path)
    jit = tmp_path / "jit"
    _put(jit, "sm_90")
    (jit / ("ab" * 32 + ".cubin")).write_bytes(b"old")  # an earlier release's cache file
    (jit / "notes.txt").write_text("mine")
    env = {images.CACHE_ENV: str(jit), images.PATH_ENV: str(tmp_path / "shared")}
    r = run_cli("cache", "info", env=env, text=True)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    dirs = [row[1:4] for row in rows if row[0] == "dir"]
    assert dirs[0][0] == str(jit) and dirs[0][2] == "1 images" and dirs[1][0] == str(tmp_path / "shared")
    r = run_cli("cache", "clear", env=env, text=True)
    assert r.returncode == 0 and r.stdout == f"{jit}\t3 files removed\n", r.stdout + r.stderr
    assert os.listdir(jit) == ["notes.txt"]


@pytest.fixture(scope="module")
def built_here(tmp_path_factory):
    """Every module built ahead for this GPU, in a directory of its own (about 30 s of NVRTC)."""
    if not nvrtc.available():
        pytest.skip("NVRTC not installed")
    d = tmp_path_factory.mktemp("built")
    r = run_cli("cache", "build", "--arch", "native", "--dir", d, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return d


FIRST_RUNS = [  # a first run of each engine on the demo: (name, arguments after the inputs)
    ("edit", ["pairs", "data/demo/a.fa", "data/demo/b.fa", "--device", "gpu"]),
    ("affine", ["pairs", "data/demo/a.fa", "data/demo/b.fa", "--device", "gpu", "--metric", "affine"]),
    ("local", ["pairs", "data/demo/a.fa", "data/demo/b.fa", "--device", "gpu", "--mode", "local", "--match", "2"]),
    ("genome", ["genome", "data/demo/a.fa", "data/demo/b.fa", "--device", "gpu"]),
    ("genome long", ["genome", "LONG_A", "LONG_B", "--device", "gpu"]),  # bit-parallel splits, anchors
    ("genome long distance", ["genome", "LONG_A", "LONG_B", "--device", "gpu", "--distance-only"]),
    ("search", ["search", "data/demo/a.fa", "data/demo/b.fa", "-k", "3", "--device", "gpu", "-f", "tsv"]),
]


def _untimed(tsv: bytes) -> list:
    """genome --distance-only's rows without the columns that time the run (seconds, cups, cells_per_second)."""
    return [row.split(b"\t")[:6] + row.split(b"\t")[9:] for row in tsv.splitlines()]


@pytest.mark.gpu
def test_first_runs_load_built_images_compile_nothing_and_match_compiled_kernels(built_here, tmp_path):
    # nothing compiled: neither gpualign's kernels (built ahead) nor CuPy's own (the engines ask CuPy for
    # allocations and copies only, gpu/arrays.py)
    ahead, compiled, cupys = tmp_path / "ahead", tmp_path / "compiled", tmp_path / "cupy"
    q = rand(300_000, 31)  # a long pair for genome: 12% apart, the bit-parallel kernel, split in halves
    long_a, long_b = tmp_path / "long_a.fa", tmp_path / "long_b.fa"
    long_a.write_bytes(b">a\n" + q + b"\n")
    long_b.write_bytes(b">b\n" + mutate(q, 0.12, 32) + b"\n")
    for name, args in FIRST_RUNS:
        args = [{"LONG_A": str(long_a), "LONG_B": str(long_b)}.get(a, a) for a in args]
        if name == "search":  # patterns: the first 40 bases of a few records of a.fa
            pats = tmp_path / "pats.fa"
            with open(os.path.join(ROOT, "data/demo/a.fa")) as fh:
                recs = fh.read().split(">")[1:6]
            pats.write_text("".join(f">p{i}\n{''.join(r.splitlines()[1:])[:40]}\n" for i, r in enumerate(recs)))
            args = [args[0], str(pats), *args[2:]]
        outs = []
        for env in ({images.CACHE_ENV: str(ahead), images.PATH_ENV: str(built_here), "CUPY_CACHE_DIR": str(cupys)},
                    {images.CACHE_ENV: str(compiled), images.PREBUILT_ENV: "0"}):
            r = run_cli(*args, "-q", "-o", "-", env=env, cwd=ROOT, timeout=600)
            assert r.returncode == 0, (name, r.stderr)
            outs.append(_untimed(r.stdout) if "distance" in name else r.stdout)
        assert outs[0] == outs[1] and outs[0], name
        assert not os.path.exists(ahead) or not os.listdir(ahead), f"{name}: compiled instead of loading"
        assert not os.path.exists(cupys) or not os.listdir(cupys), f"{name}: CuPy compiled {os.listdir(cupys)}"
        assert os.listdir(compiled), f"{name}: nothing compiled without the built images"


@pytest.mark.gpu
def test_a_kernel_compiled_on_first_use_is_said_once(tmp_path):
    env = {images.CACHE_ENV: str(tmp_path / "jit"), images.PREBUILT_ENV: "0"}
    args = ("pairs", "data/demo/a.fa", "data/demo/b.fa", "--device", "gpu", "-o", "-")
    first = run_cli(*args, env=env, cwd=ROOT, text=True)
    assert first.returncode == 0 and first.stderr.count("compiling kernels/ewfa.cu for sm_") == 1, first.stderr
    again = run_cli(*args, env=env, cwd=ROOT, text=True)
    assert again.returncode == 0 and "compiling" not in again.stderr and again.stdout == first.stdout


def test_without_nvrtc_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(nvrtc, "_candidates", lambda: ["/nonexistent/libnvrtc.so.13"])
    nvrtc.library.cache_clear()
    try:
        assert not nvrtc.available()
        with pytest.raises(nvrtc.KernelError, match="pip install nvidia-cuda-nvrtc"):
            variants.build("/nonexistent-dir", ("sm_90",))
    finally:
        nvrtc.library.cache_clear()
