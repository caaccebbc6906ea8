"""torchdoctor: find out why PyTorch does not fit this machine, and print the exact fix."""

__version__ = "0.2.0.dev1"
