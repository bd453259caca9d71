"""The package's version, in a module of its own: anything may read it without importing the package's surface."""

__version__ = "0.1.0"
