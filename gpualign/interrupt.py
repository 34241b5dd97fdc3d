"""SIGINT, SIGTERM and SIGHUP: every command stops within a second or two, leaves nothing behind.

install() (the CLI, first thing) puts one handler on the three signals. On the first signal the handler
ends every worker process of this run at once (SIGTERM to all descendants, found in /proc; SIGKILL to
any left half a second later), starts a watchdog and raises ``Interrupted`` (a KeyboardInterrupt) in
the main thread, whose normal unwinding removes the temporary output and shuts the pools down. The CLI
then calls finish(): the files still registered with track() are removed, shared-memory blocks of this
run unlinked, one line ``interrupted`` goes to stderr and the process exits 130 (SIGINT), 143 (SIGTERM)
or 129 (SIGHUP). If the unwinding has not reached finish() within GRACE_S, the watchdog calls it.

Forked worker processes ignore SIGINT (Ctrl-C reaches the whole process group: the parent ends them)
and die at once on SIGTERM/SIGHUP (the default action): install() registers that for every fork. A
process forked after the signal exits at once, and while fork hooks run or importlib's own code runs the
handler raises nothing (the watchdog ends the run): an exception there could be printed and lost. Where
the handler's exception lands in code whose exceptions CPython prints and drops (a weakref callback, such
as importlib's module lock clean-up during an import; a __del__), the drop is silent too
(sys.unraisablehook) and the watchdog ends the run.
Why: with the workers taking Ctrl-C themselves, `pairs` hung about once in ten (stacks dumped from a hung
run, 2-core host): the pool's manager thread sat forever in recv() of a result message cut short, as a
CPU worker's KeyboardInterrupt came while it wrote a large result to the pipe (header and body are
separate writes; inferred: the worker's own stack was gone), so it never saw the worker die nor failed its futures; the aligner thread waited for them, the
main thread joined the aligner thread (ThreadPoolExecutor.__exit__), and each further Ctrl-C moved it on
to the next join (shutdown(wait=True) of the pools). Now no worker is interrupted mid-message, the parent
ends them all at once, and the watchdog bounds whatever joins remain.

killable(fn, *args) runs a long C call (WFA2-lib, edlib: they hold the process until they return, so no
Python handler could run) in a forked child that the parent waits for in slices, interruptibly.
"""

from __future__ import annotations

# few and small modules (logging, pickle, select come later): this module loads before the handlers
# are installed (__main__.py holds a signal meanwhile)
import atexit
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
GRACE_S = 1.0  # the main thread's time to unwind before the watchdog ends the process
KILL_AFTER_S = 0.5  # descendants still alive this long after SIGTERM get SIGKILL
SHM_PREFIX = "gpa"  # shared-memory blocks of a run: gpa<run's pid>_<random> (shm_name)

_root_pid = os.getpid()  # the process that installed the handlers (forked children inherit the value)
_signum: int | None = None
_temps: set = set()
_finishing = threading.Lock()
_installed = False
_inherited: list = []  # a forked child's inherited standard streams (_in_child)
_forking = False  # the fork hooks are running (the handler must not raise there)
_ending = False  # the process is ending (ending()): its last fork starts no worker


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by the first SIGINT/SIGTERM/SIGHUP."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install(held: list = ()) -> None:
    """Handlers for SIGINT, SIGTERM and SIGHUP in this (the main) process; every process forked from it
    from now on ignores SIGINT and takes SIGTERM/SIGHUP's default action. held: signals that came before
    (`python -m gpualign` holds them while this module loads): the first is handled now."""
    global _root_pid, _installed
    if _installed:
        return
    _installed = True
    _root_pid = os.getpid()
    for sig in EXIT_CODES:  # first: a signal from here on ends the run cleanly (guard() around this call)
        signal.signal(sig, _handler)
    if held:
        _handler(held[0], None)
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    threading.excepthook = _thread_hook(threading.excepthook)
    import logging  # noqa: F401 - its fork hooks registered before ours, so that _forking spans them

    os.register_at_fork(before=_before_fork, after_in_parent=_fork_done, after_in_child=_in_child)
    # at a normal exit too, no shared-memory block of the run is left (one a thread had not freed yet)
    atexit.register(_unlink_prefixed, "/dev/shm", f"{SHM_PREFIX}{_root_pid}_")


def _before_fork() -> None:
    """This process's resource tracker started before its first worker: the workers then share it (a
    worker without one starts its own, which, when the worker is ended, warns on stderr of the
    shared-memory blocks the worker had open). finish() ends it."""
    global _forking
    if os.getpid() == _root_pid and not _ending:
        from multiprocessing import resource_tracker

        _forking = True  # until _fork_done: the fork hooks run (logging's, this one, ...)
        resource_tracker.ensure_running()  # (it unblocks SIGINT/SIGTERM: a signal can come in here)


def _fork_done() -> None:
    """The parent's last fork hook (logging registered its own before install())."""
    global _forking
    _forking = False


def _in_child() -> None:
    """Signals as the module says; and fresh standard streams. The inherited ones hold locks that another
    thread of the parent may have held at the fork (the reader thread blocked in a read of stdin, rich's
    progress thread writing to stderr): a forked child that touches them waits forever. multiprocessing
    closes stdin and flushes stdout/stderr in every child it starts (Process._bootstrap). They are kept
    (never used nor collected: the child leaves by os._exit) and replaced."""
    # forked after the run was interrupted (a multiprocessing.Pool replacing the workers the handler
    # ended): it would outlive the run
    if _signum is not None:
        os._exit(128 + _signum)
    _inherited.extend((sys.stdin, sys.stdout, sys.stderr))
    sys.stdin = None
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if old is not None:
            setattr(sys, name, open(fd, "w", encoding=old.encoding, errors=old.errors, closefd=False,
                                    buffering=1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _handler(signum, frame) -> None:
    global _signum
    if os.getpid() != _root_pid:  # a child forked a moment ago, before _in_child ran
        if signum != signal.SIGINT:
            os._exit(128 + signum)
        return
    if _signum is not None:  # already stopping
        return
    _signum = signum
    # nothing but `interrupted` on stderr from here: libraries' log lines of the unwinding (asyncio's
    # "Task exception was never retrieved" for a Dask gather the interrupt cancelled) are noise
    logging = sys.modules.get("logging")
    if hasattr(logging, "disable"):  # (not yet imported, or half: a signal during install())
        logging.disable(logging.CRITICAL)
    end_children(wait=False)
    threading.Thread(target=_watchdog, name="gpualign-interrupt", daemon=True).start()
    if _forking:  # an exception in a fork hook is printed and dropped: the watchdog ends the run
        return
    if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        # importlib's own code: the import may come from C code that prints the exception and goes on (CI
        # saw a traceback from _lock_unlock_module, the run then ended by the watchdog): the watchdog ends it
        return
    raise Interrupted(signum)


def _unraisable(previous):
    """A sys.unraisablehook: an Interrupted that CPython dropped, nothing printed (the watchdog ends the
    run); once the run is interrupted, nothing at all (a finalizer of the unwinding that fails because
    finish(), in the watchdog's thread, removed its file already: a semaphore's); others to previous."""
    def hook(unraisable) -> None:
        if _signum is None and not isinstance(unraisable.exc_value, Interrupted):
            previous(unraisable)

    return hook


def _thread_hook(previous):
    """A threading.excepthook: once the run is interrupted, a thread's exception is the unwinding's and nothing
    is printed (concurrent.futures' management thread, finding the pool's workers ended, set an exception on a
    future the interrupt had cancelled: InvalidStateError, a traceback before `interrupted`); before, previous."""
    def hook(args) -> None:
        if _signum is None:
            previous(args)

    return hook


def ending() -> None:
    """The command is done and the process leaves now (cli.quick_exit): a fork from here on
    (driver.hand_off's) is no worker's, so no resource tracker is started for it."""
    global _ending
    _ending = True


def signalled() -> int | None:
    """The signal that interrupted this run, or None."""
    return _signum


def guard(body) -> None:
    """body(); when a signal arrived meanwhile (whatever body raised or returned), finish()."""
    try:
        body()
    except BaseException:
        if _signum is not None:
            finish()
        raise
    if _signum is not None:
        finish()


def _watchdog() -> None:
    time.sleep(GRACE_S)
    finish()


def finish() -> None:
    """End the interrupted run now: workers ended, temporary files and shared-memory blocks removed, one
    line `interrupted` on stderr, exit code by signal. Never returns."""
    _finishing.acquire()  # the main thread or the watchdog: the first one ends the process
    _no_restarts()
    end_children(wait=True)
    for path in list(_temps):
        try:
            if os.path.isdir(path):  # (a cluster's scratch directory)
                import shutil

                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass
    import tempfile

    _unlink_prefixed("/dev/shm", f"{SHM_PREFIX}{_root_pid}_")  # shared-memory blocks (Linux)
    _unlink_semaphores()
    # a child a thread starts from here on (a Dask nanny's spawned worker, whose interpreter comes up after
    # this process is gone and finds the semaphores above removed) writes its complaint to /dev/null; the
    # one line below goes to the real stderr
    stderr = _quiet_stderr()
    end_children(wait=True)  # one a thread was starting meanwhile, before its interpreter is up to complain
    _unlink_prefixed(tempfile.gettempdir(), temp_prefix())
    # the resource tracker last: the blocks this process had open when the signal came are still
    # registered with it, and at its exit it would warn of each (`leaked shared_memory objects`, `No such
    # file`); they are removed above, and every block of the run is named and removed so
    tracker = _tracker_pid()
    if tracker:
        # its lock held to the end: a thread of this process that registers or unregisters a resource
        # meanwhile (a reader's shared memory) waits here instead of finding the tracker dead, warning
        # on stderr (`resource_tracker: process died unexpectedly`) and starting another
        _tracker_object()._lock.acquire(timeout=1.0)
        try:
            os.kill(tracker, signal.SIGKILL)
            os.waitpid(tracker, 0)
        except OSError:
            pass
    try:
        os.write(stderr, b"interrupted\n")
    except OSError:
        pass
    os._exit(EXIT_CODES.get(_signum, 130))


def _quiet_stderr() -> int:
    """Descriptor 2 pointed at /dev/null for the children started from now on; returns a descriptor of the
    stderr it had (not inherited by children), or 2 where that fails."""
    try:
        saved = os.dup(2)
    except OSError:
        return 2
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass
    return saved


def _no_restarts() -> None:
    """Dask's nannies (threads of this process, under --cpu-workers) told they are closing, so that
    they do not start again the workers finish() ends."""
    nanny = sys.modules.get("distributed.nanny")
    if nanny is None:
        return
    try:
        from distributed.core import Status

        for n in list(nanny.Nanny._instances):
            n.status = Status.closing
    except Exception:  # noqa: BLE001 - ending anyway
        pass


def track(path: str) -> None:
    """A temporary file (or directory) finish() removes if the run is interrupted before untrack(path)."""
    _temps.add(path)


def untrack(path: str) -> None:
    _temps.discard(path)


def temp_prefix() -> str:
    """The name prefix of temporary files that worker processes make in the temporary directory (they
    cannot track() them in this process): finish() removes those left."""
    return f"gpualign-{_root_pid}-"


def _unlink_prefixed(where: str, prefix: str) -> None:
    """Remove the files of directory where whose names start with prefix."""
    try:
        names = [n for n in os.listdir(where) if n.startswith(prefix)]
    except OSError:
        return
    for n in names:
        try:
            os.unlink(os.path.join(where, n))
        except OSError:
            pass


def shm_mapped(pid: int | str = "self") -> set:
    """(device, inode) of each /dev/shm file process pid has mapped (OSError when it cannot be read). By inode,
    not name: glibc maps a new semaphore under a temporary name before linking it under its own."""
    mapped = set()
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            f = line.split(None, 5)  # address, perms, offset, major:minor (hex), inode, path
            if len(f) == 6 and f[5].startswith("/dev/shm/"):
                major, minor = f[3].split(":")
                mapped.add((os.makedev(int(major, 16), int(minor, 16)), int(f[4])))
    return mapped


def _unlink_semaphores() -> None:
    """multiprocessing's named semaphores that this process holds (/dev/shm/sem.mp-*: the locks and queues
    of a spawn context, such as those Dask's nanny makes for each worker it starts). Their finalizers or
    the resource tracker remove them, neither of which runs when finish() ends the process. Each is found
    by its inode among this process's mappings (shm_mapped), so another program's are never touched."""
    try:
        mapped = shm_mapped()
        names = [n for n in os.listdir("/dev/shm") if n.startswith("sem.mp-")] if mapped else []
    except (OSError, ValueError):
        return
    for n in names:
        path = os.path.join("/dev/shm", n)
        try:
            st = os.stat(path)
            if (st.st_dev, st.st_ino) in mapped:
                os.unlink(path)
        except OSError:
            pass


@contextmanager
def sigint_blocked():
    """SIGINT blocked in this thread for the block: the threads it starts keep it blocked for good (the
    signal goes to the main thread, whose handler ends the run). Processes spawned from them do not keep
    it (multiprocessing's spawn starts them with no signal blocked): spawn_ignoring_sigint does that. A
    SIGINT that comes meanwhile is handled as the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def spawn_ignoring_sigint(directory: str):
    """Until the returned function is called, processes started by multiprocessing's spawn method (Dask's
    local workers and their restarts) ignore SIGINT from their first instruction: they are started through
    a two-line shell script in directory that ignores it and execs this interpreter (an ignored signal
    stays ignored across exec, and Python leaves an ignored SIGINT so). Ctrl-C reaches the whole process
    group: a child importing its modules printed a KeyboardInterrupt traceback; this process ends them
    (finish()). Without multiprocessing's spawn method, or /bin/sh, nothing changes."""
    import multiprocessing.spawn as spawn
    import shlex

    if os.name != "posix" or not os.path.exists("/bin/sh"):
        return lambda: None
    before = spawn.get_executable()
    path = os.path.join(directory, "python-ignoring-sigint")
    with open(path, "w") as fh:
        fh.write(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(os.fsdecode(before))} \"$@\"\n")
    os.chmod(path, 0o755)
    spawn.set_executable(path)

    def restore() -> None:
        if os.fsdecode(spawn.get_executable()) == path:  # (kept as bytes by multiprocessing)
            spawn.set_executable(before)

    return restore


def shm_name() -> str:
    """A name for a new shared-memory block of this run (finish() unlinks those left)."""
    return f"{SHM_PREFIX}{_root_pid}_{os.urandom(6).hex()}"


def processes():
    """(pid, parent pid, process group) of every living process (zombies left out), from /proc; none
    where there is no /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after the command name, which may hold anything
        if fields[0] != b"Z":
            yield int(e), int(fields[1]), int(fields[2])


def descendants(pid: int | None = None) -> list[int]:
    """Every living process below pid (default: this one)."""
    pid = os.getpid() if pid is None else pid
    children: dict = {}
    for p, parent, _ in processes():
        children.setdefault(parent, []).append(p)
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _tracker_object():
    """multiprocessing's resource tracker object, or None when multiprocessing was not imported."""
    return getattr(sys.modules.get("multiprocessing.resource_tracker"), "_resource_tracker", None)


def _tracker_pid() -> int | None:
    """multiprocessing's resource tracker (it ignores SIGINT and SIGTERM; end_children leaves it to
    finish()); None when multiprocessing was not imported (no tracker then)."""
    return getattr(_tracker_object(), "_pid", None)


def end_children(wait: bool) -> None:
    """SIGTERM to every descendant but the resource tracker; wait: SIGKILL to those still alive after
    KILL_AFTER_S, and reap the direct children."""
    keep = _tracker_pid()
    pids = [p for p in descendants() if p != keep]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    if not wait:
        return
    deadline = time.monotonic() + KILL_AFTER_S
    while pids and time.monotonic() < deadline:
        _reap()
        alive = {p for p, _, _ in processes()}
        pids = [p for p in pids if p in alive]
        if pids:
            time.sleep(0.02)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def portable(err: BaseException) -> BaseException:
    """err, if it goes through pickle and comes back (a child hands its exception to its parent so: killable,
    workers.Forked), else a RuntimeError naming it (one holding what cannot be pickled, or whose class
    cannot be rebuilt from its arguments)."""
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - any failure either way
        return RuntimeError(f"{type(err).__name__}: {err}")


def ended(exitcode: int | None) -> str:
    """How a child process ended, for messages (multiprocessing's exitcode: -N for signal N)."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return "killed" if exitcode is None else f"exit code {exitcode}"


def killable(fn, *args):
    """fn(*args) in a forked child process (its result and any exception pickled back), waited for in
    slices so that a signal interrupts the wait; the child is killed if the wait ends early. Without
    fork: called here."""
    if not hasattr(os, "fork"):
        return fn(*args)
    import pickle
    import select

    r, w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without any clean-up of the parent's state
        code = 1
        try:  # never back into the caller's frames: a Dask worker's thread would run its task loop forever
            _die_with(parent)
            os.close(r)
            phase("kernel")
            try:
                out = pickle.dumps((True, fn(*args)))
            except BaseException as e:  # noqa: BLE001 - sent to the parent, which raises it
                out = pickle.dumps((False, portable(e)))
            with os.fdopen(w, "wb") as fh:
                fh.write(out)  # (BrokenPipeError where the parent is gone)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    data, done = b"", False
    try:
        with os.fdopen(r, "rb", buffering=0) as fh:
            while True:
                ready, _, _ = select.select([fh], [], [], 0.2)
                if ready:
                    chunk = fh.read(1 << 16)
                    if not chunk:
                        break
                    data += chunk
        done = True
    finally:
        if not done:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
    if not data:
        from .errors import WorkerLost

        raise WorkerLost(ended(os.waitstatus_to_exitcode(status)))  # (-N for signal N)
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


PARENT_POLL_S = 0.5  # how often a worker checks that its parent process lives (end_with_parent)


def end_with_parent(parent: int) -> None:
    """This worker process (a pool's or a Forked helper) ended within PARENT_POLL_S once its parent process
    `parent` is gone, killed without its own clean-up (SIGKILL: the OOM killer, a job scheduler): a daemon
    thread watches the parent's pid. Not PR_SET_PDEATHSIG (_die_with), which follows the parent *thread* that
    forked: a pool may be forked by a reader or aligner thread that ends long before the process."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="gpualign-parent-watch", daemon=True).start()


def _die_with(parent: int) -> None:
    """This process killed when its parent ends (Linux's PR_SET_PDEATHSIG; elsewhere not), and ended now
    where the parent already has (it may have gone before the request)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:
        os._exit(1)


_PHASES = os.environ.get("GPUALIGN_PHASES")  # tests: a file to which each phase's name is appended
_announced: set = set()


def phase(name: str) -> None:
    """Append name to $GPUALIGN_PHASES, once per process (the signal tests wait for a phase, then
    send the signal); nothing when it is not set."""
    if _PHASES is None or name in _announced:
        return
    _announced.add(name)
    fd = os.open(_PHASES, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{name}\n".encode())
    finally:
        os.close(fd)
