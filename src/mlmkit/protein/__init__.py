"""Protein (and DNA) masked LMs: ESM's amino-acid tokenizer, a k-mer DNA tokenizer,
zero-shot variant effects."""

from mlmkit.core.fasta import Record, read_fasta, read_sequence
from mlmkit.protein import dms
from mlmkit.protein.alphabet import VOCABULARY, protein_tokenizer
from mlmkit.protein.binders import Binder, design_binders
from mlmkit.protein.kmers import dna_tokenizer, dna_vocabulary
from mlmkit.protein.mutations import Mutation, check_sequence, parse_variant
from mlmkit.protein.variants import STRATEGIES, variant_effects
from mlmkit.protein.windows import residue_window

__all__ = ["STRATEGIES", "Binder", "design_binders", "dms", "VOCABULARY", "Mutation", "Record", "check_sequence", "dna_tokenizer", "dna_vocabulary", "parse_variant",
           "protein_tokenizer", "read_fasta", "read_sequence", "residue_window",
           "variant_effects"]
