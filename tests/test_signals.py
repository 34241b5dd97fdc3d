"""Signals at many points of every command, as a user (Ctrl-C: SIGINT to the process group) or a
scheduler (SIGTERM, SIGHUP to the process) sends them: the run stops within ~2 s, leaves no process,
temporary file or shared-memory block behind, keeps the output file that was there before, prints one
line `interrupted` and exits 130/143/129.

The command announces its phases in $GPUALIGN_PHASES (interrupt.phase); each case waits for its phase,
then a random 0-300 ms more, then sends the signal. Every case runs once, and REPS - 1 times more among
the slow tests (GPUALIGN_SIGNAL_REPS, default 3: 69 runs in all, about 2-3 minutes on 2 cores); the old
deadlock came about once in ten interrupts.
"""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from cli_helper import cli_command, cli_env
from gpualign import interrupt
from sim_inputs import pairs_and_candidates
from simulate import simulate, write_fasta

REPS = int(os.environ.get("GPUALIGN_SIGNAL_REPS", "3"))
STOP_S = 2.5  # from the signal to the exit (the handler's grace is 1 s, its SIGKILL half a second later)
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
OLD = b"an output file that was here before the run\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """110,000 pairs (pairs; files over 16 MiB: each parsed by a reader process), the same as PAF
    candidates with their reads and references (paf), and one pair of 1 Mbp strings at 10% divergence
    (genome: seconds of CPU kernel)."""
    d = tmp_path_factory.mktemp("signals")
    pairs_and_candidates(d, 110_000, 150, 0.02, seed=3, strands="+")
    gq, gt = simulate(1, 1_000_000, 0.10, seed=4)
    write_fasta(str(d / "ga.fa"), gq, "ga")
    write_fasta(str(d / "gb.fa"), gt, "gb")
    with open(d / "b.fa") as fh:  # search: 60 guides from b.fa's records, searched in b.fa
        seqs = [line.strip() for line in fh if not line.startswith(">")][:6000:100]
    guides = [q[:23] for q in seqs if len(q) >= 23][:60]
    with open(d / "guides.fa", "w") as fh:
        fh.write("".join(f">g{i}\n{g}\n" for i, g in enumerate(guides)))
    return d


def _commands(d, out):
    # batches of 2 Mbp (--batch-bases): the input is ~17 of them, so that "write" (the first batch
    # written) comes with most of the run still ahead
    return {
        "pairs": ["pairs", str(d / "a.fa"), str(d / "b.fa"), "-o", out, "-t", "2", "--batch-bases", "2000000"],
        "pairs-sam": ["pairs", str(d / "a.fa"), str(d / "b.fa"), "-o", out + ".sam", "-t", "2", "--metric", "affine",
                      "--batch-bases", "2000000"],
        # the targets on stdin with SAM output: spooled to a temporary file ($TMPDIR) first
        "pairs-stdin": ["pairs", str(d / "a.fa"), "-", "-o", out + ".bam", "-t", "2", "--batch-bases", "2000000"],
        "paf": ["paf", str(d / "c.paf"), str(d / "a.fa"), str(d / "b.fa"), "-o", out, "-t", "2",
                "--batch-bases", "2000000"],
        "search": ["search", str(d / "guides.fa"), str(d / "b.fa"), "-k", "3", "-o", out, "-t", "2", "--device",
                   "cpu", "--chunk-bases", "1000000"],
        "genome": ["genome", str(d / "ga.fa"), str(d / "gb.fa"), "--distance-only", "--device", "cpu", "-o", out],
        # a local Dask cluster of two CPU workers (the distributed path)
        "pairs-cluster": ["pairs", str(d / "a.fa"), str(d / "b.fa"), "-o", out, "--cpu-workers", "2",
                          "--batch-bases", "2000000"],
    }


def _group(pgid: int) -> list:
    """Living processes of process group pgid."""
    return [p for p, _, group in interrupt.processes() if group == pgid]


def _wait_phase(p, phases: str, name: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(phases):
            with open(phases) as fh:
                if name in fh.read().split():
                    return
        if p.poll() is not None:
            pytest.fail(f"the command ended (exit {p.returncode}) before phase {name!r}: {p.stderr.read().decode()}")
        time.sleep(0.01)
    pytest.fail(f"phase {name!r} not reached in {timeout} s")


def _interrupt(tmp_path, data, command: str, phase: str, sig: int, to_group: bool, rng) -> None:
    out_dir = tmp_path / f"run{rng.randrange(1 << 30)}"
    out_dir.mkdir()
    out = str(out_dir / ("out.tsv" if command == "genome" else "out.paf"))
    args = [*_commands(data, out)[command], "-q"]
    target = args[args.index("-o") + 1]
    with open(target, "wb") as fh:
        fh.write(OLD)
    phases = str(out_dir / "phases")
    env = cli_env({"GPUALIGN_PHASES": phases, "TMPDIR": str(out_dir)})
    with open(data / "b.fa", "rb") as stdin:
        p = subprocess.Popen(cli_command(*args), stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=env, start_new_session=True)
    try:
        _wait_phase(p, phases, phase)
        time.sleep(rng.uniform(0, 0.3))
        sent = time.monotonic()
        if to_group:
            os.killpg(p.pid, sig)
        else:
            os.kill(p.pid, sig)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command}: no exit 30 s after {signal.Signals(sig).name} in phase {phase!r} "
                        f"(processes {_group(p.pid)})")
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    err = err.decode()
    where = f"{command}, {signal.Signals(sig).name} in phase {phase!r}"
    assert p.returncode == EXIT[sig], f"{where}: exit {p.returncode}\n{err}"
    assert err == "interrupted\n", f"{where}: stderr\n{err}"  # -q: nothing else
    assert took < STOP_S, f"{where}: {took:.2f} s to stop"
    end = time.monotonic() + 2  # the resource tracker leaves once its pipe from the parent closes
    while _group(p.pid) and time.monotonic() < end:
        time.sleep(0.02)
    assert not _group(p.pid), f"{where}: processes left {_group(p.pid)}"
    left = sorted(set(os.listdir(out_dir)) - {"phases", os.path.basename(target)})
    assert not left, f"{where}: files left {left}"
    with open(target, "rb") as fh:
        assert fh.read() == OLD, f"{where}: the existing output was changed"
    shm = [n for n in os.listdir("/dev/shm") if n.startswith(f"gpa{p.pid}_")] if os.path.isdir("/dev/shm") else []
    assert not shm, f"{where}: shared memory left {shm}"


CASES = [  # (command, phase, signal, to the process group)
    ("pairs", "start", signal.SIGINT, True),
    ("pairs", "pools", signal.SIGINT, True),
    ("pairs", "read", signal.SIGINT, True),
    ("pairs", "align", signal.SIGINT, True),
    ("pairs", "write", signal.SIGINT, True),
    ("pairs", "write", signal.SIGTERM, False),
    ("pairs", "align", signal.SIGHUP, False),
    ("pairs-sam", "start", signal.SIGINT, True),  # (b.fa over 16 MiB: its @SQ scan in a child, running)
    ("pairs-sam", "align", signal.SIGINT, True),
    ("pairs-sam", "write", signal.SIGTERM, False),
    ("pairs-stdin", "read", signal.SIGINT, True),
    ("pairs-stdin", "write", signal.SIGHUP, False),
    ("paf", "pools", signal.SIGINT, True),
    ("paf", "write", signal.SIGINT, True),
    ("paf", "align", signal.SIGTERM, False),
    ("search", "pools", signal.SIGINT, True),
    ("search", "search", signal.SIGINT, True),
    ("search", "write", signal.SIGTERM, False),
    ("search", "search", signal.SIGHUP, False),
    ("genome", "kernel", signal.SIGINT, True),
    ("genome", "kernel", signal.SIGTERM, False),
    ("genome", "kernel", signal.SIGHUP, False),
    ("pairs-cluster", "write", signal.SIGINT, True),
    ("pairs-cluster", "write", signal.SIGTERM, False),
]


@pytest.mark.parametrize("reps", ["once", pytest.param("again", marks=pytest.mark.slow)])
@pytest.mark.parametrize("command,phase,sig,to_group", CASES,
                         ids=[f"{c}-{p}-{signal.Signals(s).name}" for c, p, s, _ in CASES])
def test_signal_stops_cleanly(tmp_path, data, command, phase, sig, to_group, reps):
    """Each case once, and (slow) REPS - 1 times more with other delays."""
    rng = random.Random(f"{command}{phase}{sig}{reps}")
    for _ in range(1 if reps == "once" else REPS - 1):
        _interrupt(tmp_path, data, command, phase, sig, to_group, rng)


def test_forked_children_ignore_sigint_and_take_sigterm():
    """interrupt.install(): a forked child ignores SIGINT (the parent ends it) and dies on SIGTERM."""
    code = ("import os, signal, time\n"
            "from gpualign import interrupt\n"
            "interrupt.install()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    time.sleep(0.3); os._exit(7)\n"
            "os.kill(pid, signal.SIGINT)\n"
            "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    time.sleep(5); os._exit(7)\n"
            "time.sleep(0.3)\n"  # (a signal before the child's fork hooks ran is lost: CPython clears it)
            "os.kill(pid, signal.SIGTERM)\n"
            "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["7", str(-signal.SIGTERM)], p.stderr


def test_workers_end_with_a_parent_killed_outright():
    """A parent killed by SIGKILL (the OOM killer, a job scheduler: no handler runs) left its pool workers and
    Forked helpers running for good. They now end within a second of it (workers.fork_pool's and Forked's
    watch of the parent), whichever thread forked them: here a thread that ended before the kill."""
    code = ("import threading, time\n"
            "from gpualign import interrupt, workers\n"
            "interrupt.install()\n"
            "pools = []\n"
            "t = threading.Thread(target=lambda: pools.append(workers.fork_pool(2)))\n"
            "t.start(); t.join()\n"
            "job = workers.Forked(time.sleep, 60)\n"
            "print(*pools[0]._processes, job._proc.pid, flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert len(pids) == 3
        time.sleep(0.5)
        assert all(_alive(pid) for pid in pids)
        p.kill()
        p.wait(timeout=10)
        end = time.monotonic() + 5
        while any(_alive(pid) for pid in pids) and time.monotonic() < end:
            time.sleep(0.05)
        assert not [pid for pid in pids if _alive(pid)]
    finally:
        p.kill()


def _alive(pid: int) -> bool:
    """Whether process pid runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_no_child_after_the_signal():
    """A process forked once the run is interrupted (multiprocessing.Pool replaces the workers the handler
    ended) exits at once instead of outliving the run."""
    code = ("import os, signal\n"
            "from gpualign import interrupt\n"
            "interrupt.install()\n"
            "interrupt._signum = signal.SIGTERM\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(7)\n"
            "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == [str(128 + signal.SIGTERM)], p.stderr


def test_thread_exceptions_after_the_signal_print_nothing():
    """Once the run is interrupted, an exception in a thread prints nothing (concurrent.futures' management
    thread, finding the pool's workers ended, raised InvalidStateError on a future the interrupt had cancelled:
    its traceback came before `interrupted`); before the signal, Python's own traceback."""
    code = ("import signal, threading\n"
            "from gpualign import interrupt\n"
            "interrupt.install()\n"
            "def boom(word):\n"
            "    raise ValueError(word)\n"
            "t = threading.Thread(target=boom, args=('before',)); t.start(); t.join()\n"
            "interrupt._signum = signal.SIGTERM\n"
            "t = threading.Thread(target=boom, args=('after',)); t.start(); t.join()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "ValueError: before" in p.stderr and "after" not in p.stderr, p.stderr


def _watchdog_ends(code: str) -> None:
    """code, after `from gpualign import interrupt; interrupt.install()`, signals its own process where the
    handler's exception cannot unwind the main thread: the watchdog ends the run within seconds, which
    prints only `interrupted` and exits 130."""
    code = "import os, signal, time, weakref\nfrom gpualign import interrupt\ninterrupt.install()\n" + code
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and p.stderr == "interrupted\n" and time.monotonic() - t0 < 5, p.stderr


def test_signal_inside_the_fork_hooks():
    """A signal that comes while the fork hooks run (ours starts the resource tracker, which unblocks
    SIGINT; logging's release its locks) raises nothing there (CPython would print the exception and drop
    it)."""
    _watchdog_ends("interrupt._forking = True\n"
                   "os.kill(os.getpid(), signal.SIGINT)\n"
                   "time.sleep(10)\n")


def test_signal_inside_a_weakref_callback():
    """A signal whose exception lands where CPython prints and drops it (a weakref callback: CI saw it
    once, in importlib's module-lock clean-up during an import at the start of `pairs`): nothing printed."""
    _watchdog_ends("class A: pass\n"
                   "a = A()\n"
                   "r = weakref.ref(a, lambda _: os.kill(os.getpid(), signal.SIGINT))\n"
                   "del a\n"
                   "time.sleep(10)\n")


def test_signal_inside_importlib():
    """A signal handled while importlib's own code runs (a module lock taken during an import) raises nothing
    there: the import may have come from C code that prints the exception and goes on (CI saw a traceback
    from importlib's _lock_unlock_module, and the run ended by the watchdog after it)."""
    _watchdog_ends("src = 'def f():\\n    os.kill(os.getpid(), signal.SIGINT)\\n    for _ in range(10000):\\n"
                   "        pass\\n'\n"
                   "ns = {'os': os, 'signal': signal}\n"
                   "exec(compile(src, '<frozen importlib._bootstrap>', 'exec'), ns)\n"
                   "ns['f']()\n"
                   "time.sleep(10)\n")


def test_no_log_line_after_the_signal():
    """A library's log line during the unwinding (asyncio's "Task exception was never retrieved" for the
    Dask gather an interrupt cancelled: CI saw it once in ~30 cluster interrupts) does not reach stderr:
    only `interrupted`."""
    code = ("import logging, os, signal, time\n"
            "from gpualign import interrupt\n"
            "interrupt.install()\n"
            "def body():\n"
            "    try:\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "        time.sleep(10)\n"
            "    finally:\n"
            "        logging.getLogger('asyncio').error('Task exception was never retrieved')\n"
            "interrupt.guard(body)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and p.stderr == "interrupted\n", p.stderr


def test_no_word_from_a_child_started_as_the_run_ends():
    """A child that a thread starts after finish() ended the run's children (a Dask nanny spawning a worker:
    its interpreter comes up after this process is gone, finds the run's semaphores removed and prints a
    traceback; CI saw it once) writes to /dev/null: stderr holds only `interrupted`."""
    late = "import sys, time; time.sleep(0.5); sys.stderr.write('late')"
    code = ("import os, signal, subprocess, sys, time\n"
            "from gpualign import interrupt\n"
            "interrupt.install()\n"
            "real = interrupt.end_children\n"
            "def end_children(wait):\n"
            "    real(wait)\n"
            "    if wait:  # (a thread starts a child just after; the one after finish()'s last outlives it)\n"
            f"        subprocess.Popen([sys.executable, '-c', {late!r}])\n"
            "interrupt.end_children = end_children\n"
            "def body():\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    time.sleep(10)\n"
            "interrupt.guard(body)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and p.stderr == "interrupted\n", p.stderr


def test_killable_returns_and_raises():
    from gpualign import interrupt
    from gpualign.errors import InputError

    assert interrupt.killable(pow, 3, 4) == 81
    with pytest.raises(InputError, match="bad"):
        interrupt.killable(_raise, "bad")
    with pytest.raises(RuntimeError, match="Odd: odd"):  # (pickles, but its class needs two arguments)
        interrupt.killable(_raise_odd)


def test_killable_child_never_returns_to_its_caller():
    """The child's send failing (here: its descriptors closed; in CI: the pipe's reader gone after an
    interrupt) ends the child, not its stack: it came back out of killable into the caller's frames, and in a
    Dask worker ran the executor thread's loop for ever, holding the run's stderr (CI's 30 s signal-test
    timeouts, `multiprocessing.spawn` processes left for hours)."""
    code = ("import os, sys\n"
            "from gpualign import interrupt\n"
            "from gpualign.errors import WorkerLost\n"
            "try:\n"
            "    interrupt.killable(os.closerange, 3, 65536)\n"
            "except WorkerLost as e:\n"
            "    print('caller', os.getpid(), e, flush=True)\n"
            "except BaseException as e:\n"
            "    print('escaped', os.getpid(), type(e).__name__, flush=True)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("caller "), p.stdout
    assert "ended without its result (exit code 1;" in lines[0], p.stdout


def test_killable_child_ends_with_its_parent():
    """A parent killed while its killable child computes takes the child with it (PR_SET_PDEATHSIG): no
    orphan left computing."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    code = ("import os, time\n"
            "from gpualign import interrupt\n"
            "interrupt.killable(time.sleep, 60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        end = time.monotonic() + 30
        while len(_group(p.pid)) < 2 and time.monotonic() < end:
            time.sleep(0.02)
        assert len(_group(p.pid)) == 2, _group(p.pid)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        end = time.monotonic() + 5
        while _group(p.pid) and time.monotonic() < end:
            time.sleep(0.02)
        assert not _group(p.pid), f"the child outlived its parent: {_group(p.pid)}"
    finally:
        if _group(p.pid):
            os.killpg(p.pid, signal.SIGKILL)


def _raise(text):
    from gpualign.errors import InputError

    raise InputError(text)


class Odd(Exception):
    def __init__(self, a, b):
        super().__init__(a)
        self.b = b


def _raise_odd():
    raise Odd("odd", 1)


def test_forked_child_does_not_wait_for_a_stream_lock_held_at_fork():
    """The deadlock's cause: a worker forked while another thread held stdin's lock (a reader thread
    blocked in a read of a pipe; stderr's alike, rich's progress thread writing) waited for it forever as
    multiprocessing closed stdin in the child, and the parent waited for the worker. After install() the
    child has streams of its own."""
    code = ("import multiprocessing as mp, sys, threading, time\n"
            "from gpualign import interrupt\n"
            "interrupt.install()\n"
            "threading.Thread(target=sys.stdin.buffer.read, args=(1,), daemon=True).start()\n"
            "time.sleep(0.3)\n"
            "p = mp.get_context('fork').Process(target=print, args=('child',))\n"
            "p.start(); p.join(20)\n"
            "print(p.exitcode, flush=True)\n"
            "import os; os._exit(0)\n")
    r, w = os.pipe()  # stdin: a pipe nobody writes to, so the thread's read holds the lock
    try:
        p = subprocess.run([sys.executable, "-c", code], stdin=r, capture_output=True, text=True, timeout=60)
    finally:
        os.close(r)
        os.close(w)
    assert p.stdout.split() == ["child", "0"], p.stderr


@pytest.mark.parametrize("threads", ["1", "2"])
def test_signal_during_one_long_c_call(tmp_path, threads):
    """One pair whose WFA2-lib call takes a minute or more (two unrelated sequences of 10 and 11 kbp at 97/100/89,
    over the cells cpu_wfa hands to parasail's DP): with -t 1, or a batch of one pair, the CPU engine ran it in the
    aligning thread, and the call held the interpreter until it returned (92 s to stop after SIGTERM). Now such a
    batch runs in a killable child: exit 143 at once, nothing left."""
    rng = np.random.default_rng(2)
    (tmp_path / "q.fa").write_text(">q\n" + "".join(rng.choice(list("ACGT"), 10_000)) + "\n")
    (tmp_path / "t.fa").write_text(">t\n" + "".join(rng.choice(list("ACGT"), 11_000)) + "\n")
    phases = str(tmp_path / "phases")
    args = cli_command("pairs", tmp_path / "q.fa", tmp_path / "t.fa", "--device", "cpu", "-t", threads, "--metric",
                       "affine", "-x", "97", "-O", "100", "-E", "89", "-q", "-o", tmp_path / "o.paf")
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                         env=cli_env({"GPUALIGN_PHASES": phases, "TMPDIR": str(tmp_path)}))
    try:
        _wait_phase(p, phases, "align")
        time.sleep(0.5)
        sent = time.monotonic()
        os.kill(p.pid, signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("no exit 30 s after SIGTERM")
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 143 and err.decode() == "interrupted\n" and took < STOP_S, (p.returncode, err, took)
    end = time.monotonic() + 2
    while _group(p.pid) and time.monotonic() < end:
        time.sleep(0.02)
    assert not _group(p.pid) and not (tmp_path / "o.paf").exists()
