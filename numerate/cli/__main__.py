"""`python -m numerate.cli`: the same as the `numerate` command."""

from numerate.cli import main

main()
