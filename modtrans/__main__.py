"""`python -m modtrans` runs the command line, the cyclic collector off before it is imported: its
young passes over the classes and functions typer and the library make would be a pass per 700 new
containers while nothing they make is freed (cli.run turns it off for the command, for the same reason)."""

import gc

gc.disable()

from modtrans.cli import run  # noqa: E402

run()
