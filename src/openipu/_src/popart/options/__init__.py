"""PopART's session options: SessionOptions, its option classes and enums, and Patterns."""

from openipu._src.popart.options.patterns import Patterns, PatternsLevel
from openipu._src.popart.options.session_options import SessionOptions

__all__ = ["Patterns", "PatternsLevel", "SessionOptions"]
