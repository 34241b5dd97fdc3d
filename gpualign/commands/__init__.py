"""The subcommands, one module each: its click options -> AlignConfig -> its runner. cli.py registers them."""
