"""Embeddings from a masked LM's encoder: pooling, the sentence-transformers directory layout.

`embed(model, texts, pooling=..., normalize=..., dimensions=..., prompt=...)` gives one
float32 vector per text (the encoder only: the MLM head never runs), equal to
sentence-transformers' `encode` on the same model and pooling; `embed_sparse` gives SPLADE's
top-k (token, weight) pairs from the MLM head. `save_st_directory` writes a
model as a folder `SentenceTransformer(dir)` loads; `read_st_config` reads one back.
"""

from mlmkit.embeddings.embed import embed
from mlmkit.embeddings.output import write_npy
from mlmkit.embeddings.pooling import POOLING_FUNCTIONS, pool
from mlmkit.embeddings.sparse import SparseVector, embed_sparse
from mlmkit.embeddings.st_directory import StConfig, read_st_config, save_st_directory
from mlmkit.options.embedding import POOLINGS

__all__ = ["POOLINGS", "POOLING_FUNCTIONS", "SparseVector", "StConfig", "embed", "embed_sparse",
           "pool", "read_st_config",
           "save_st_directory", "write_npy"]
