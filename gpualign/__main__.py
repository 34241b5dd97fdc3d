if __name__ == "__main__":  # not when a spawned worker process imports it
    from . import interrupt

    interrupt.install()  # before the imports below: a signal from the start on ends the run cleanly
    interrupt.guard(lambda: __import__("gpualign.cli").cli.main())
