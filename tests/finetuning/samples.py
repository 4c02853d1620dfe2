"""Small samples of the project's SST-2 for the fine-tuning tests."""

from __future__ import annotations

from pathlib import Path


def write_sst_sample(shared_data: Path, root: Path, per_class: int, valid_rows: int) -> Path:
    """`root` with train.tsv (`per_class` positive then `per_class` negative SST-2 training
    rows, a header) and validation.tsv (the header and the first `valid_rows` rows)."""
    rows = (shared_data / "sst2" / "train.tsv").read_text().splitlines()
    pos = [r for r in rows[1:] if r.endswith("\t1")][:per_class]
    neg = [r for r in rows[1:] if r.endswith("\t0")][:per_class]
    (root / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(pos + neg) + "\n")
    valid = (shared_data / "sst2" / "validation.tsv").read_text().splitlines()[:valid_rows + 1]
    (root / "validation.tsv").write_text("\n".join(valid) + "\n")
    return root
