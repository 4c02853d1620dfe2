"""Fill, generate and score by iterative unmasking: fill-mask, diffusion samplers, infilling,
and the masked-diffusion likelihood bound. Works with any masked LM.

The function names equal their module names (`mlmkit.generate.generate` is the module of
`generate`); the imports below bind the package attributes to the functions.
"""

from __future__ import annotations

import sys
import types

from mlmkit.generate.confidence import CONFIDENCES
from mlmkit.generate.cost import Cost
from mlmkit.generate.elbo import Elbo, elbo
from mlmkit.generate.fill_mask import FillResult, fill_mask
from mlmkit.generate.generate import Generation, generate
from mlmkit.generate.infill import Infilled, infill
from mlmkit.generate.options import SamplerOptions
from mlmkit.generate.samplers import SAMPLERS

__all__ = ["CONFIDENCES", "SAMPLERS", "Cost", "Elbo", "FillResult", "Generation", "Infilled",
           "SamplerOptions", "elbo", "fill_mask", "generate", "infill"]


class _CallablePackage(types.ModuleType):
    """`mlmkit.generate(...)` calls `generate(...)`.

    `mlmkit.generate` resolves to this package once it is imported (the package and the
    function share the name), so the package itself forwards calls to the function.
    """

    def __call__(self, *args, **kwargs):
        return generate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
