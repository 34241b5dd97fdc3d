"""Every input path the README promises, and the options' edges: stdin for paf, binary PAF, -t beyond
the cores, penalties only checked where used, the rate of a slow run."""

import gzip
import os

import pytest

from cli_helper import run_cli
from sim_inputs import pairs_and_candidates


def run(args, stdin=None):
    p = run_cli(*args, stdin=stdin)
    return p.returncode, p.stdout, p.stderr.decode()


@pytest.fixture(scope="module")
def cands(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    pairs_and_candidates(d, 40, 200, 0.05, seed=6, queries="r.fa", targets="ref.fa")
    return d


def test_paf_reads_or_candidates_on_stdin(cands):
    paf, reads, ref = str(cands / "c.paf"), str(cands / "r.fa"), str(cands / "ref.fa")
    rc, want, err = run(["paf", paf, reads, ref, "-q"])
    assert rc == 0 and want.count(b"\n") == 40, err
    for args, data in (([paf, "-", ref], reads), (["-", reads, ref], paf)):
        with open(data, "rb") as fh:
            rc, out, err = run(["paf", *args, "-q"], stdin=fh.read())
        assert (rc, out, err) == (0, want, "")


@pytest.mark.parametrize("args,message", [
    (["c.paf", "r.fa", "-"], "gpualign paf reads the target FASTA by random access: it cannot be '-' (stdin)"),
    (["-", "-", "ref.fa"], "only one of the candidates and the queries can be '-' (stdin)"),
])
def test_paf_stdin_refused_where_it_cannot_work(cands, args, message):
    rc, _, err = run(["paf", *[a if a == "-" else str(cands / a) for a in args], "-q"], stdin=b"")
    assert rc == 2 and err == f"error: {message}\n"


@pytest.mark.parametrize("content", [os.urandom(3000), gzip.compress(b"q0\t1\t0\t1\t+\tt0\t1\t0\t1\t1\t1\t60\n")],
                         ids=["random", "gzip"])  # (ids that stay the same from run to run)
def test_binary_paf_is_one_error_line(cands, tmp_path, content):
    bad = tmp_path / "bad.paf"
    bad.write_bytes(b"\xa1" + content)  # (not UTF-8 from the first byte on)
    rc, _, err = run(["paf", str(bad), str(cands / "r.fa"), str(cands / "ref.fa"), "-q"])
    assert rc == 1 and err.startswith(f"error: {bad}: line 1: not PAF text") and err.count("\n") == 1, err


def test_threads_capped_at_the_cores(root):
    demo = [os.path.join(root, "data", "demo", n) for n in ("a.fa", "b.fa")]
    rc, _, err = run(["pairs", *demo, "-t", "1000"])
    cores = len(os.sched_getaffinity(0))
    assert rc == 0 and f"-t 1000 is more than the {cores} usable cores: using {cores} processes" in err
    assert f"WFA2-lib, {cores} process" in err  # the engine line says what runs


def test_affine_penalties_checked_only_where_used(root):
    demo = [os.path.join(root, "data", "demo", n) for n in ("a.fa", "b.fa")]
    rc, _, err = run(["pairs", *demo, "-E", "0", "-x", "0", "-q"])  # --metric edit: unused, so refused
    assert rc == 2 and "-x/-E set affine penalties" in err and "must be > 0" not in err
    rc, _, err = run(["pairs", *demo, "-E", "0", "--metric", "affine", "-q"])
    assert rc == 2 and err == "error: --gap-extend must be > 0 (got 0)\n"


def test_rate_of_a_slow_run_is_not_zero():
    from gpualign.stages import Summary

    rows = dict(Summary(pairs=1, seconds=2.5).rows())
    assert rows["pairs_per_second"] == "0.4"
    assert dict(Summary(pairs=250_000, seconds=2.0).rows())["pairs_per_second"] == "125000"


def test_the_summary_reports_peak_memory():
    from gpualign.memory import peak_rows
    from gpualign.stages import Summary

    rows = dict(Summary(pairs=1, seconds=1.0).rows())
    assert int(rows["peak_rss_mib"]) >= 10  # (an interpreter with numpy holds tens of MiB)
    assert dict(peak_rows()).keys() <= {"peak_rss_mib", "peak_worker_rss_mib"}


def test_an_existing_output_is_replaced_whole(tmp_path):
    """The output written over a file already at its path (the finished file renamed over it): the new bytes
    only, the mode a plain open() gives (the old file's: it was 0644 whatever the old one's), no temporary
    file left; a new file's mode from the umask; over a symbolic link, its target replaced and the link kept
    (it was replaced by a plain file)."""
    from gpualign.stages import Output

    def write(path, data):
        out = Output(str(path), binary_via_path=False)
        out.target.write(data)
        out.commit()

    path = tmp_path / "out.paf"
    path.write_bytes(b"old bytes, longer than the new ones\n")
    os.chmod(path, 0o640)
    write(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.paf"]
    umask = os.umask(0)
    os.umask(umask)
    write(tmp_path / "fresh.paf", b"x\n")
    assert os.stat(tmp_path / "fresh.paf").st_mode & 0o777 == 0o666 & ~umask
    (tmp_path / "d").mkdir()
    (tmp_path / "link.paf").symlink_to(tmp_path / "d" / "real.paf")  # (dangling: its target made)
    for data in (b"first\n", b"second\n"):
        write(tmp_path / "link.paf", data)
        assert (tmp_path / "link.paf").is_symlink() and (tmp_path / "d" / "real.paf").read_bytes() == data
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["real.paf"]


def test_the_switch_interval_is_set_back():
    import sys

    from gpualign.stages import switching

    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError), switching(0.001):
        assert sys.getswitchinterval() == pytest.approx(0.001)
        raise RuntimeError
    assert sys.getswitchinterval() == before
