"""The subcommands, one module each: its Typer options -> AlignConfig -> its runner. cli.py registers them."""
