"""The `latchgate` command and its subcommands (the top floor: nothing imports it)."""
