"""One module per subcommand: its options -> its config -> its runner."""
