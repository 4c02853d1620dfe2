"""Optional dependencies: import one, or say in one line which extra installs it.

`pip install mlmkit` installs what scoring, fill-mask, generation and pretraining need;
the server, plots, LoRA and Ray come with extras (`pip install 'mlmkit[serve]'`, see
docs/install.md). A feature that needs an extra imports it through `require`, so a user
without it reads which extra to install instead of a `ModuleNotFoundError` traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mlmkit.errors import MissingExtra


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module` for `feature`; raise `MissingExtra` naming `extra` when it is absent.

    `feature` is what the user asked for, as they would say it ("mlmkit serve"); the
    message names the package that is missing (a dependency of `module` too, when that
    is what failed to import) and the pip command that installs the extra.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        missing = (error.name or module).split(".")[0]
        raise MissingExtra(f"{feature} needs {missing}, which is not installed: "
                           f"pip install 'mlmkit[{extra}]'") from None
