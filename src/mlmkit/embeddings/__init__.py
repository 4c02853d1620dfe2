"""Embeddings from a masked LM's encoder: pooling, the sentence-transformers directory layout.

`embed(model, texts, pooling=..., normalize=..., dimensions=..., prompt=...)` gives one
float32 vector per text (the encoder only: the MLM head never runs), equal to
sentence-transformers' `encode` on the same model and pooling; `embed_sparse` gives SPLADE's
top-k (token, weight) pairs from the MLM head; `embed_file` embeds a file of any size by
chunks, resumably and in shards (`merge_shards` joins them). `save_st_directory` writes a
model as a folder `SentenceTransformer(dir)` loads; `read_st_config` reads one back. The
contrastive losses of embedding training (`ranking_loss`, `cosent_loss`, `matryoshka_loss`,
equal to sentence-transformers'), TSDAE's noise, decoder and reconstruction loss
(`mlmkit.embeddings.denoising`) and the examples (`read_examples`) are here too; the
training run is `mlmkit.train_embeddings`.
"""

from mlmkit.embeddings.embed import embed
from mlmkit.embeddings.file_job import EmbedFileSummary, embed_file, merge_shards
from mlmkit.embeddings.losses import LOSSES, cosent_loss, matryoshka_loss, ranking_loss
from mlmkit.embeddings.output import vector_lines, write_npy
from mlmkit.embeddings.pairs import Examples, cosine_rows, read_examples, read_sts_pairs
from mlmkit.embeddings.pooling import POOLING_FUNCTIONS, pool
from mlmkit.embeddings.sparse import SparseVector, embed_sparse
from mlmkit.embeddings.st_directory import StConfig, read_st_config, save_st_directory
from mlmkit.options.embedding import POOLINGS

__all__ = ["LOSSES", "POOLINGS", "POOLING_FUNCTIONS", "EmbedFileSummary", "Examples",
           "SparseVector", "StConfig", "cosent_loss", "cosine_rows", "embed", "embed_file",
           "embed_sparse", "merge_shards", "matryoshka_loss", "pool",
           "ranking_loss", "read_examples", "read_st_config", "read_sts_pairs",
           "save_st_directory", "vector_lines", "write_npy"]
