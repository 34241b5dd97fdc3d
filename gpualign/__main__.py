"""`python -m gpualign` and the `gpualign` command (pyproject's entry point: main).

The signal handlers come first, before click, numpy and the commands load (a second or more on a busy
host): a signal from then on ends the run with `interrupted` and its exit code, never a traceback. Only
the interpreter's own start-up and this package's small modules come before them; the CUDA driver
starts right after (driver.py), for a command that may use a GPU."""


def main() -> None:
    import signal

    held = []  # a signal that comes while interrupt.py loads: handled once install() has run
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: held.append(signum))
    import sys

    from . import stdio

    stdio.reopen_closed_std()  # (before any file is opened: none takes a closed standard descriptor's number)
    from . import driver, interrupt

    if driver.wanted(sys.argv):  # CUDA starts on its own thread while the rest loads
        driver.start()

    def run() -> None:
        interrupt.install(held)
        from .cli import main as cli_main

        cli_main()

    interrupt.guard(run)


if __name__ == "__main__":  # not when a spawned worker process imports it
    main()
