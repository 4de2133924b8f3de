"""The package version, one place for `judge.__version__` and `judge --version`."""

__version__ = "0.1.0"
