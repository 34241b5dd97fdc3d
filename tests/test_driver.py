"""driver.py: which command lines start CUDA early, forks wait for the starting thread, the teardown
handed to a child at exit."""

import os

import pytest

from gpualign import driver


def test_commands_that_may_use_a_gpu_start_it():
    for argv in (["gpualign", "pairs", "a.fa", "b.fa"], ["gpualign", "search", "p.fa", "g.fa", "-k", "2"],
                 ["gpualign", "genome", "a", "b", "--device", "gpu"], ["gpualign", "paf", "c", "q", "t"]):
        assert driver.wanted(argv), argv
    for argv in (["gpualign"], ["gpualign", "--version"], ["gpualign", "cache", "build"],
                 ["gpualign", "pairs", "a", "b", "--device", "cpu"], ["gpualign", "pairs", "--device=cpu", "a", "b"],
                 ["gpualign", "pairs", "-h"], ["gpualign", "search", "--help"]):
        assert not driver.wanted(argv), argv


def test_other_processes_hold_the_gpus_of_cluster_runs():
    for opt in (["--scheduler", "tcp://h:8786"], ["--cpu-workers", "2"]):
        assert not driver.wanted(["gpualign", "pairs", "a.fa", "b.fa", *opt]), opt
    for opt in (["--gpus", "2"], ["--gpus=all"], ["--gpus", "0,0"], ["--gpus", "1,0"]):  # this process drives them
        assert driver.wanted(["gpualign", "pairs", "a.fa", "b.fa", *opt]), opt
    for opt in (["--gpus", "1,2"], ["--gpus=2,3"]):  # (devices.py), device 0 left out: no context made on it
        assert not driver.wanted(["gpualign", "pairs", "a.fa", "b.fa", *opt]), opt


def test_a_fork_waits_for_the_starting_thread_and_the_child_runs(monkeypatch):
    import time

    def slow(ctypes) -> None:  # (a driver that takes its time; no CUDA in the test process)
        time.sleep(0.3)

    monkeypatch.setattr(driver, "_run", slow)
    monkeypatch.setattr(driver, "_thread", None)
    driver.start()
    driver.start()  # once per process
    assert driver._thread.is_alive()
    pid = os.fork()  # the registered hook joins the thread first
    if pid == 0:
        os._exit(7)
    assert not driver._thread.is_alive()
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 7


# -- the driver's teardown handed to a child at exit (hand_off) ---------------------------------------------
_HANDER = r"""
import gc, os, sys, threading, time
sys.path.insert(0, sys.argv[3])
from gpualign import driver, interrupt
interrupt.install()  # (the real fork hooks)
interrupt.ending()
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # (a process with threads, as a command is)
fd = int(sys.argv[1])
want = os.readlink(f"/proc/self/fd/{fd}")  # the stand-in for the driver's device files
took = driver.hand_off(keep=lambda target: target == want, check_devices=lambda: sys.argv[2] == "shared")
from multiprocessing import resource_tracker
started = resource_tracker._resource_tracker._pid is not None
# the collector off before the fork, so in the child too (no finalizer runs there), and off in this process
print("took" if took else "kept", "tracker" if started else "no-tracker", "gc-on" if gc.isenabled() else "gc-off",
      flush=True)
os.close(fd)  # this process's own reference gone: the child's (if any) holds the stand-in
os.close(1)   # stdout's reader sees its end now unless the child kept a copy
time.sleep(2.0)
os._exit(3)
"""


def _hand_off_run(tmp_path, devices: str):
    """The script above with a pipe's write end as the stand-in: (its first line, whether stdout ended while
    the script still ran, whether the stand-in was still held then, the exit code, whether the stand-in's end
    came within 5 s of the exit)."""
    import select
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "hander.py"
    script.write_text(_HANDER)
    r, w = os.pipe()
    root = str(Path(driver.__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, str(script), str(w), devices, root], stdout=subprocess.PIPE,
                            pass_fds=(w,))
    os.close(w)
    try:
        first = proc.stdout.readline().decode().strip()
        stdout_ended = proc.stdout.read() == b"" and proc.poll() is None  # (the script sleeps 2 s after closing it)
        time.sleep(0.2)
        held = not select.select([r], [], [], 0)[0] and proc.poll() is None
        code = proc.wait(timeout=30)
        ready, _, _ = select.select([r], [], [], 5)
        ended = bool(ready) and os.read(r, 1) == b""
    finally:
        os.close(r)
        proc.stdout.close()
    return first, stdout_ended, held, code, ended


def test_hand_off_child_holds_the_driver_files_until_the_process_is_gone(tmp_path):
    first, stdout_ended, held, code, ended = _hand_off_run(tmp_path, "shared")
    assert first == "took no-tracker gc-off" and code == 3  # (interrupt.ending(): the fork starts no tracker)
    assert stdout_ended  # the child closed its copy of stdout at once
    assert held  # the stand-in stayed open in the child after the process closed its own
    assert ended  # ... and the child let it go once the process was gone


def test_no_hand_off_for_exclusive_devices(tmp_path):
    first, stdout_ended, held, code, ended = _hand_off_run(tmp_path, "exclusive")
    assert first == "kept no-tracker gc-on" and code == 3 and stdout_ended and not held and ended


@pytest.fixture
def collector_back():
    """The garbage collector on again after the test, whatever hand_off left (a regression that forks)."""
    import gc

    yield
    gc.enable()


def test_no_fork_where_the_hand_off_does_not_apply(monkeypatch, collector_back):
    import gc

    forks = []
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or -1)  # (recorded; never a child)
    assert not driver.hand_off(keep=lambda target: False, check_devices=lambda: True)  # no driver files
    assert not driver.hand_off(keep=lambda target: True, check_devices=lambda: False)  # an exclusive device
    monkeypatch.setattr(driver, "_resident", lambda: driver.HAND_OFF_MAX_RSS + 1)
    assert not driver.hand_off(keep=lambda target: True, check_devices=lambda: True)  # too large to fork
    monkeypatch.setattr(driver, "_resident", lambda: 0)
    monkeypatch.setenv(driver.HAND_OFF_ENV, "0")
    assert not driver.hand_off(keep=lambda target: True, check_devices=lambda: True)  # turned off
    monkeypatch.delenv(driver.HAND_OFF_ENV)

    class Starting:  # the CUDA start thread still in cuInit: the fork hooks would wait for it
        def is_alive(self):
            return True

    monkeypatch.setattr(driver, "_thread", Starting())
    assert not driver.hand_off(keep=lambda target: True, check_devices=lambda: True)
    assert not forks and gc.isenabled()


def test_a_failed_hand_off_is_no_error(monkeypatch, collector_back):
    """Out of descriptors at the end (EMFILE): the command still exits with its own code."""
    import errno
    import gc

    def no_pipe():
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_pipe)
    monkeypatch.delenv(driver.HAND_OFF_ENV, raising=False)
    assert not driver.hand_off(keep=lambda target: True, check_devices=lambda: True)
    assert gc.isenabled()


_PROBE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import cupy
from gpualign import driver
cupy.arange(3).sum().get()
print(len(driver._driver_files(driver._is_driver_file)) > 0, driver._shared_devices())
"""


@pytest.mark.gpu
def test_a_gpu_process_finds_the_driver_files_and_a_shared_device(tmp_path):
    """The hand-off's two tests on a real driver: the device files are found (else no child ever takes the
    teardown) and the device machine's GPUs are in the default compute mode."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(driver.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", _PROBE, root], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.gpu
def test_gpu_commands_hand_off_and_run_back_to_back(tmp_path):
    """Each GPU command hands its teardown to a child (the phase it announces) while the next command starts:
    every run complete, exit 0, the same output."""
    from cli_helper import run_cli

    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text("".join(f">q{i}\nACGTACGTTTGACCA{'ACGT' * (i % 7)}\n" for i in range(200)))
    b.write_text("".join(f">t{i}\nACGTACCTTTGACA{'ACGT' * (i % 5)}\n" for i in range(200)))
    outs = []
    for k in range(3):
        phases = tmp_path / f"phases{k}"
        p = run_cli("pairs", a, b, "--device", "gpu", "-q", "-f", "tsv", "-o", "-", text=True, timeout=120,
                    env={"GPUALIGN_PHASES": str(phases)})
        assert p.returncode == 0, p.stderr
        assert "handed-off" in phases.read_text().split()
        outs.append(p.stdout)
    assert len(outs[0].splitlines()) == 201 and outs[0] == outs[1] == outs[2]
