"""Fill, generate and score by iterative unmasking: fill-mask, diffusion samplers, infilling,
and the masked-diffusion likelihood bound. Works with any masked LM.

The function names equal their module names (`mlmkit.generation.generate` is the module of
`generate`); the imports below bind the package attributes to the functions.
"""

from __future__ import annotations

from mlmkit.generation.confidence import CONFIDENCES
from mlmkit.generation.cost import Cost
from mlmkit.generation.elbo import Elbo, elbo
from mlmkit.generation.fill_mask import FillResult, fill_mask
from mlmkit.generation.generate import Generation, generate
from mlmkit.generation.infill import Infilled, infill
from mlmkit.generation.options import SamplerOptions
from mlmkit.generation.samplers import SAMPLERS

__all__ = ["CONFIDENCES", "SAMPLERS", "Cost", "Elbo", "FillResult", "Generation", "Infilled",
           "SamplerOptions", "elbo", "fill_mask", "generate", "infill"]

