"""Where mlmkit looks for the public data sets its evaluations read by default.

`$MLMKIT_DATA`, else the `data` folder of mlmkit's cache: a path that does not depend on the
working directory (a default relative to a checkout of this repository meant nothing to an
installed mlmkit). `mlmkit data fetch NAME` fills it.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_data_dir() -> Path:
    """`$MLMKIT_DATA`, else `$MLMKIT_CACHE/data` (default `~/.cache/mlmkit/data`)."""
    chosen = os.environ.get("MLMKIT_DATA")
    if chosen:
        return Path(chosen).expanduser()
    cache = Path(os.environ.get("MLMKIT_CACHE", Path.home() / ".cache" / "mlmkit"))
    return cache.expanduser() / "data"
