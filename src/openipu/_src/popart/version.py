"""`popart.versionString()`, `versionNumber()`, `packageHash()`.

The PopART these front ends follow is graphcore/popart 3.4.0 (its version.json); the
package hash names this implementation's build instead of a git commit.
"""

from __future__ import annotations

import openipu

VERSION = (3, 4, 0)


def versionString() -> str:  # noqa: N802 - the original's name
    return ".".join(str(part) for part in VERSION)


def versionNumber() -> tuple[int, int, int]:  # noqa: N802 - the original's name
    return VERSION


def packageHash() -> str:  # noqa: N802 - the original's name
    return f"openipu-{openipu.__version__}"
