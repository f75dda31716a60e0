"""`python -m modtrans` runs the command line."""

from modtrans.cli import run

run()
