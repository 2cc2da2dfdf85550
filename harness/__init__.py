"""dialeval-harness: multilingual open-domain dialogue evaluation and meta-evaluation."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dialeval-harness")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
