"""The package version (one place; pyproject.toml repeats it for the build)."""

__version__ = "0.1.0"
