"""driver.py: which command lines start CUDA early, and forks wait for the starting thread."""

import os

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
