"""Command line: builds objects, calls the library, picks the exit code. typer is imported only here.

common.py holds the apps, option types and output helpers; each other module registers its commands.
"""

# Importing a module registers its commands, in the order `modtrans --help` lists them.
from modtrans.cli import workload  # noqa: F401

# isort: split
from modtrans.cli import models  # noqa: F401

# isort: split
from modtrans.cli import compare, editor  # noqa: F401
from modtrans.cli.common import app, cost_app, zoo_app

app.add_typer(zoo_app, name="zoo")
app.add_typer(cost_app, name="cost")


def main() -> None:
    app()  # typer exits with the command's status


__all__ = ["app", "main"]
