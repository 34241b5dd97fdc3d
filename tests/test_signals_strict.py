"""Signals at the edges test_signals.py leaves: during start-up (before and while the heavy modules load,
for `python -m gpualign` and for the `gpualign` command pip writes from pyproject's entry point), and
into a local Dask cluster (`--cpu-workers`) as it starts: exit 130/143, one line `interrupted`, no
traceback, nothing left in /dev/shm and no process."""

import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import tomllib

import pytest

from gpualign import interrupt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _entry_script(d) -> str:
    """The `gpualign` script pip writes for pyproject.toml's entry point."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        module, func = tomllib.load(fh)["project"]["scripts"]["gpualign"].split(":")
    path = os.path.join(d, "gpualign")
    with open(path, "w") as fh:
        fh.write(f"import sys\nfrom {module} import {func}\nif __name__ == '__main__':\n    sys.exit({func}())\n")
    return path


def _launchers(d) -> dict:
    return {"python -m gpualign": [sys.executable, "-m", "gpualign"], "gpualign": [sys.executable, _entry_script(d)]}


@pytest.mark.parametrize("how", ["python -m gpualign", "gpualign"])
def test_handlers_installed_before_the_heavy_imports(tmp_path, how):
    """By the time click, rich or numpy starts loading (most of the start-up), SIGINT is
    interrupt.py's: a Ctrl-C there ends the run with `interrupted`, not a traceback."""
    spy = ("import signal, sys\n"
           "class Spy:\n"
           "    def find_spec(self, name, path=None, target=None):\n"
           "        if name in ('click', 'rich', 'numpy'):\n"
           "            h = signal.getsignal(signal.SIGINT)\n"
           "            print(name, getattr(h, '__module__', h), file=sys.stderr, flush=True)\n"
           "sys.meta_path.insert(0, Spy())\n")
    launch = _launchers(tmp_path)[how]
    if launch[1] == "-m":
        code = spy + "import runpy\nsys.argv = ['gpualign', '--version']\nrunpy.run_module('gpualign', run_name='__main__')\n"
    else:
        code = spy + f"import runpy\nsys.argv = [{launch[1]!r}, '--version']\nrunpy.run_path({launch[1]!r}, run_name='__main__')\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = p.stderr.split("\n")[:-1]
    assert p.returncode == 0 and lines and "gpualign" in p.stdout, p.stderr
    assert all(line.endswith(" gpualign.interrupt") for line in lines), p.stderr


def test_a_signal_held_before_install_ends_the_run():
    """`python -m gpualign` holds a signal that comes while interrupt.py loads; install() handles it."""
    code = ("import signal, time\n"
            "from gpualign import interrupt\n"
            "interrupt.guard(lambda: (interrupt.install([signal.SIGTERM]), time.sleep(10)))\n")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr) == (143, "interrupted\n") and time.monotonic() - t0 < 5


def _startup_s() -> float:
    """The bare interpreter's start-up here (site included): a signal before it ends is Python's."""
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


@pytest.mark.slow
def test_sigint_during_startup(tmp_path):
    """Ctrl-C from 50 ms to 0.6 s after launch (the first delays no sooner than 2.5 times the bare
    interpreter's start-up), both launchers, a run that would wait for stdin: always exit 130 and only
    `interrupted` (at the first delay, a start slowed by the tests beside this one may still be inside the
    interpreter's own, which then dies of the signal, writing nothing)."""
    for name in ("a.fa", "b.fa"):
        (tmp_path / name).write_text(">r\nACGTACGTAC\n")
    floor = 2.5 * _startup_s()  # (tests beside this one, -n, may slow a start after it was measured)
    delays = sorted({max(d, floor) for d in (0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6)})
    r, w = os.pipe()  # stdin: never ends, so that the run is alive at every delay
    try:
        for how, launch in _launchers(tmp_path).items():
            for delay in delays:
                for _ in range(2):
                    p = subprocess.Popen([*launch, "pairs", str(tmp_path / "a.fa"), "-", "--device", "cpu", "-t", "1",
                                          "-q"], stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         cwd=tmp_path, start_new_session=True)
                    time.sleep(delay)
                    os.killpg(p.pid, signal.SIGINT)
                    try:
                        _, err = p.communicate(timeout=30)
                    finally:
                        if p.poll() is None:
                            os.killpg(p.pid, signal.SIGKILL)
                            p.wait()
                    got = (p.returncode, err.decode())
                    early = delay == delays[0] and got == (-signal.SIGINT, "")
                    assert got == (130, "interrupted\n") or early, f"{how}, SIGINT at {delay:.2f} s: {got}"
    finally:
        os.close(r)
        os.close(w)


def _semaphores() -> set:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("sem.mp-")}
    except OSError:
        return set()


def _mapped_by_a_process(names: set) -> set:
    """Those of names (/dev/shm semaphores) a living process has mapped: another run's in use (tests beside this
    one, -n), not one left behind (matched by device and inode: interrupt.shm_mapped)."""
    want = {}
    for n in names:
        try:
            st = os.stat(os.path.join("/dev/shm", n))
        except OSError:
            continue
        want[(st.st_dev, st.st_ino)] = n
    held = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            held.update(want[k] for k in interrupt.shm_mapped(pid) if k in want)
        except (OSError, ValueError):
            continue
    return held


def _left_behind(names: set) -> set:
    """Those of names that stay in /dev/shm, mapped by no process, for 10 s: a semaphore another run beside this
    one still holds is mapped, or is removed by that run's resource tracker once its processes end; one this
    run left behind stays (its tracker was ended with it)."""
    end = time.monotonic() + 10
    while True:
        left = (names & _semaphores()) - _mapped_by_a_process(names)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster_pairs(tmp_path_factory):
    from simulate import simulate, write_fasta

    d = tmp_path_factory.mktemp("cluster")
    q, t = simulate(4000, 150, 0.02, seed=5)
    write_fasta(str(d / "a.fa"), q, "r")
    write_fasta(str(d / "b.fa"), t, "r")
    return d


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cluster_interrupted_as_it_starts_leaves_nothing(tmp_path, cluster_pairs, sig):
    """SIGINT (to the process group, as Ctrl-C) or SIGTERM at points of a `--cpu-workers 2` run from its
    start to its cluster's first batches: Dask's nanny had named semaphores in /dev/shm (sem.mp-*, six
    left per run) and its spawned workers printed KeyboardInterrupt tracebacks."""
    d = cluster_pairs
    interrupted = []
    for delay in (0.2, 0.6, 1.0, 1.5):
        out = tmp_path / f"out{delay}.paf"
        phases = tmp_path / f"phases{delay}"
        env = dict(os.environ, GPUALIGN_PHASES=str(phases))
        before = _semaphores()
        p = subprocess.Popen([sys.executable, "-m", "gpualign", "pairs", str(d / "a.fa"), str(d / "b.fa"), "-o",
                              str(out), "--cpu-workers", "2", "--batch-bases", "30000", "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            end = time.monotonic() + 60
            while not (phases.exists() and "start" in phases.read_text().split()) and time.monotonic() < end:
                assert p.poll() is None, p.stderr.read().decode()
                time.sleep(0.01)
            time.sleep(delay)
            if sig == signal.SIGINT:
                os.killpg(p.pid, sig)
            else:
                os.kill(p.pid, sig)
            _, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        where = f"{signal.Signals(sig).name} {delay} s after start"
        if p.returncode == 0:  # the run had ended (a fast host): nothing to check
            continue
        interrupted.append(delay)
        assert (p.returncode, err.decode()) == (EXIT[sig], "interrupted\n"), where
        end = time.monotonic() + 3
        group = [1]
        while group and time.monotonic() < end:
            group = [q for q, _, g in interrupt.processes() if g == p.pid]
            time.sleep(0.05)
        assert not group, f"{where}: processes left {group}"
        left = _left_behind(_semaphores() - before)
        assert not left, f"{where}: left in /dev/shm: {sorted(left)}"
    assert interrupted, "every run ended before its signal"


@pytest.mark.skipif(not shutil.which("gcc"), reason="no gcc")
def test_emulated_kernels_leave_nothing_in_the_temporary_directory(tmp_path):
    """tests/emu outside the test suite's cache (no $GPUALIGN_EMU_DIR): what it compiles lives in a
    temporary directory removed at exit (it left /tmp/gpualign-emu-*.so behind). The compiler is a
    stand-in that builds an empty emu_launch (no kernel compiled: cheap)."""
    cxx = tmp_path / "cxx"
    cxx.write_text("#!/bin/sh\nfor a; do out=$a; done\n"  # the last argument: -o's
                   "echo 'void emu_launch(void) {}' | gcc -shared -fPIC -x c - -o \"$out\"\n")
    cxx.chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = f"import emu\nemu.CXX = {str(cxx)!r}\nemu.library('dp', ('X=1',))\n"
    env = {k: v for k, v in os.environ.items() if k != "GPUALIGN_EMU_DIR"}
    env.update(TMPDIR=str(tmp), PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests"), env.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert os.listdir(tmp) == [], f"left in the temporary directory: {os.listdir(tmp)}"


def _search_files(tmp_path, patterns: list, records: list) -> tuple:
    pp, tp = tmp_path / "p.fa", tmp_path / "t.fa"
    pp.write_text("".join(f">{n}\n{s}\n" for n, s in patterns))
    tp.write_text("".join(f">{n}\n{s}\n" for n, s in records))
    return str(pp), str(tp)


@pytest.mark.parametrize("fmt", ["tsv", "paf", "bed"])
def test_search_takes_repeated_names_where_the_format_allows(tmp_path, fmt):
    """TSV, PAF and BED: text records and patterns that share a name are searched, each hit written
    (only SAM/BAM need unique names)."""
    from gpualign.config import SearchConfig
    from gpualign.search.run import run_search

    pp, tp = _search_files(tmp_path, [("g", "ACGTTGCA"), ("g", "TTTTCCCC")],
                           [("chr", "GGACGTTGCAGG"), ("chr", "CAAATTTTCCCCAA")])
    out = str(tmp_path / f"o.{fmt}")
    summary = run_search(pp, tp, out, None, SearchConfig(k=0, strand="+", device="cpu", threads=1), "x")
    assert summary.hits == 2
    rows = [line.rstrip("\n").split("\t") for line in open(out) if not line.startswith("pattern\t")]
    assert len(rows) == 2 and len({tuple(r) for r in rows}) == 2
    assert all({"g", "chr"} <= set(r) for r in rows), rows


@pytest.mark.parametrize("fmt", ["sam", "bam"])
@pytest.mark.parametrize("what", ["records", "patterns"])
def test_search_refuses_repeated_names_in_sam_bam(tmp_path, fmt, what):
    """SAM/BAM: a record name two text records share (@SQ) or a pattern name two patterns share (QNAME,
    each with a primary hit) is refused in one line naming the file and both records, nothing written."""
    pats = [("g", "ACGTTGCA"), ("g" if what == "patterns" else "h", "TTTTCCCC")]
    recs = [("chr", "GGACGTTGCAGG"), ("chr" if what == "records" else "chr2", "AATTTTCCCCAA")]
    pp, tp = _search_files(tmp_path, pats, recs)
    out = tmp_path / f"o.{fmt}"
    p = subprocess.run([sys.executable, "-m", "gpualign", "search", pp, tp, "-k", "0", "-o", str(out), "--device",
                        "cpu", "-t", "1"], capture_output=True, text=True, timeout=120)
    name, file = ("g", "p.fa") if what == "patterns" else ("chr", "t.fa")
    errors = [x for x in p.stderr.splitlines() if not x.startswith("gpualign: engine: ")]  # (the notice, as pairs')
    assert p.returncode == 1 and len(errors) == 1, p.stderr
    assert f"{file}: record 2: " in p.stderr and f"name '{name}' appears twice (record 1)" in p.stderr, p.stderr
    assert not out.exists() and p.stdout == ""


def _child_sigint(q):
    q.put(int(signal.getsignal(signal.SIGINT) == signal.SIG_IGN))


def test_spawned_processes_ignore_sigint_until_restored(tmp_path):
    """interrupt.spawn_ignoring_sigint: a process of multiprocessing's spawn method ignores SIGINT from its
    start (a blocked mask does not reach it); after the restore, spawned processes take it again."""
    import multiprocessing as mp

    from gpualign import interrupt

    ctx = mp.get_context("spawn")

    def spawned() -> int:
        q = ctx.Queue()
        p = ctx.Process(target=_child_sigint, args=(q,))
        p.start()
        got = q.get(timeout=60)
        p.join(60)
        return got

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # (a background job starts ignoring it)
    try:
        restore = interrupt.spawn_ignoring_sigint(str(tmp_path))
        try:
            assert spawned() == 1
        finally:
            restore()
        assert spawned() == 0
    finally:
        signal.signal(signal.SIGINT, before)


def _die():
    os.kill(os.getpid(), signal.SIGKILL)  # (as the out-of-memory killer ends a process)


def _refuse():
    raise TypeError("an _Unpicklable cannot be rebuilt")


class _Unrebuilt:
    def __reduce__(self):
        return _refuse, ()


class _Unpicklable(Exception):
    def __init__(self, name, detail):  # (pickled with its message alone: its constructor wants two)
        super().__init__(f"{name}: {detail}")
        self.part = _Unrebuilt()  # (and once distributed is imported, tblib pickles it by its args and __dict__:
        # this part is what cannot be rebuilt then; the test failed after a test that imported distributed)


def _raise_unpicklable():
    raise _Unpicklable("out.paf", "x")


def test_a_killed_worker_is_one_line_not_a_traceback(capsys):
    """A CPU engine's worker killed mid-batch (the out-of-memory killer): the pool's BrokenProcessPool, or the
    forked child's 'the computing process ended without a result' (RuntimeError), came out as a traceback.
    Now WorkerLost, one line saying how the process ended; the CLI's guard says the same for any pool."""
    from concurrent.futures.process import BrokenProcessPool

    import click

    from gpualign.commands.common import run_guarded
    from gpualign.engines._pool import Joined
    from gpualign.errors import WorkerLost
    from gpualign.workers import fork_pool

    with pytest.raises(WorkerLost, match=r"a worker process ended without its result \(killed by SIGKILL; out of"):
        interrupt.killable(_die)
    pool = fork_pool(2)
    try:
        with pytest.raises(WorkerLost, match=r"\(killed; out of memory\? try fewer threads, -t\); the run stopped"):
            Joined([pool.submit(_die), pool.submit(int)], list).result()
    finally:
        pool.shutdown(wait=True)
    # a worker's exception the parent cannot unpickle breaks the pool too: a bug, shown as one (not 'killed')
    pool = fork_pool(1)
    try:
        with pytest.raises(BrokenProcessPool) as e:
            Joined([pool.submit(_raise_unpicklable)], list).result()
        assert "_Unpicklable" in str(e.value.__cause__)
    finally:
        pool.shutdown(wait=True)

    def body():
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    with pytest.raises(click.exceptions.Exit) as e:
        run_guarded(body, debug=False)
    err = capsys.readouterr().err
    assert e.value.exit_code == 1 and err.startswith("error: a worker process ended without its result (killed;")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_out_of_memory_is_one_line_not_a_traceback(capsys):
    """numpy's MemoryError (a memory audit: `search` of a 10-mer in a 200 Mbp record under `ulimit -v`, its hits
    held until the record ends) came out as a traceback. Now one line naming the allocation, exit 1."""
    import click

    from gpualign.commands.common import run_guarded

    def body():
        import numpy as np

        np.empty((1 << 50,), np.uint8)  # (a PiB: numpy refuses it at once, _ArrayMemoryError, a MemoryError)

    with pytest.raises(click.exceptions.Exit) as e:
        run_guarded(body, debug=False)
    err = capsys.readouterr().err
    assert e.value.exit_code == 1 and err.startswith("error: out of memory: Unable to allocate"), err
    assert "try fewer threads, -t" in err and err.count("\n") == 1 and "Traceback" not in err
