"""`mlmkit protein`: protein masked LMs — zero-shot variant effects of a deep mutational scan."""

from __future__ import annotations

import csv
import json
import math
from typing import Literal

import typer

import mlmkit
from mlmkit.cli.options import JSON, Runtime, command, command_group, trusting
from mlmkit.core.checks import clipped
from mlmkit.core.correlation import spearman_score
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import status
from mlmkit.core.statistics import check_bootstrap
from mlmkit.errors import InvalidArgument
from mlmkit.options import as_keywords
from mlmkit.options.sampler import Sampling

PROTEIN_HELP = ("Protein masked LMs (ESM-2): zero-shot variant effects of DMS files, binder "
                "design.")
VARIANTS_HELP = "Score every mutant of a DMS file zero-shot; Spearman against measured fitness."
STRATEGIES = ("masked-marginals", "wt-marginals", "mutant-marginals", "pll")
Strategy = Literal["masked-marginals", "wt-marginals", "mutant-marginals", "pll"]
EXAMPLE = """
Examples:

  mlmkit protein variants ./esm2-8m BLAT_ECOLX_Ranganathan2015.csv \\
      --sequence BLAT_ECOLX_wildtype.fasta --offset 24 -o scored.csv \\
      --target-field fitness_2500
"""

protein_app = command_group(PROTEIN_HELP, epilog=EXAMPLE)


def variants_command(
    model: str = typer.Argument(..., help="Model directory or hub name (an ESM-2 model)."),
    dms: str = typer.Argument(..., metavar="DMS", help="CSV with one variant per row (- for "
                              "standard input)."),
    sequence: str = typer.Option(..., "--sequence", help="The wild type: amino-acid letters "
                                 "or a FASTA file of one record (- for standard input)."),
    mutation_col: str = typer.Option("mutant", "--mutation-field", help="The column of the "
                                     "mutations (A42G; multi-mutants A42G:V50L)."),
    offset: int = typer.Option(1, "--offset", help="The number of the sequence's first "
                               "residue in the mutations."),
    strategy: Strategy = typer.Option("masked-marginals", "--strategy",
                                      help=f"One of {', '.join(STRATEGIES)}."),
    output: str = typer.Option(None, "-o", "--output", help="Write the rows with a score "
                               "column here (- for standard output)."),
    score_col: str = typer.Option("score", "--score-field", help="Name of the added column."),
    target_col: str = typer.Option(None, "--target-field", help="Measured fitness: print "
                                   "Spearman's ρ of the scores against it, with an interval."),
    n_boot: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples of the "
                               "interval (0: none)."),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """Score the variants of a deep mutational scan with a masked LM (Meier et al. 2021):
    writes the input rows plus a score column, and with --target-field prints Spearman's ρ
    against the measured column (with a bootstrap interval)."""
    with trusting(runtime.trust_remote_code):
        if strategy not in STRATEGIES:
            raise InvalidArgument(f"--strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        if output is None and target_col is None:
            raise InvalidArgument("nothing to do: give -o/--output for the scores and/or "
                                  "--target-field for a correlation")
        check_bootstrap(n_boot)
        if not score_col.strip():
            raise InvalidArgument("--score-field is empty: name the column the scores go in")
        if target_col is not None and not target_col.strip():
            raise InvalidArgument("--target-field is empty: name the column of measured "
                                  "fitness, or leave --target-field out")
        if target_col is not None and target_col == mutation_col:
            raise InvalidArgument(f"--target-field {target_col!r} is the mutation column "
                                  "(--mutation-field): name the column of measured fitness")
        if output is not None:
            check_output_path(output, [dms, sequence], "-o/--output")
        if dms == "-" and sequence == "-":
            raise InvalidArgument("the DMS file and --sequence both read standard input: give "
                                  "one of them as a file")
        protein = mlmkit.protein
        wild_type = protein.check_sequence(protein.read_sequence(sequence),
                                           f"--sequence {clipped(sequence)}")
        scan = protein.dms.read_scan(dms, mutation_col)
        if score_col in scan.columns:
            raise InvalidArgument(f"{scan.path} already has a column {score_col!r}: name the "
                                  "new one with --score-field")
        mutations = protein.dms.check_mutations(scan, wild_type, mutation_col, offset)
        target = (protein.dms.check_varied(protein.dms.numbers(scan, target_col), scan,
                                           f"--target-field {target_col}")
                  if target_col else None)
        mlm = mlmkit.load(model, **runtime.load_keywords())
        scores = mlm.variant_effects(wild_type, mutations, strategy=strategy, offset=offset,
                                     progress=None)
        if output is not None:
            with open_output(output, [dms, sequence], "-o/--output") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow([*(scan.header or scan.columns), score_col])
                for row, value in zip(scan.rows, scores, strict=True):
                    writer.writerow([*(row[c] for c in scan.columns), repr(float(value))])
            status(f"wrote {len(scores)} scores to {output}")
        correlation = (spearman_score(scores, target, n_boot=n_boot, seed=runtime.seed)
                       if target is not None else None)
        if correlation is not None or as_json:
            _report(correlation, len(scores), output, target_col, strategy, as_json,
                    to_stderr=output == "-")


def _report(result, scores: int, output: str | None, target_col: str | None, strategy: str,
            as_json: bool, to_stderr: bool) -> None:
    """Spearman's ρ as a line, or with --json a JSON summary (the scores written, and ρ
    when a target was given); on stderr where standard output holds the scores."""
    if as_json:
        line = {"strategy": strategy, "scores": scores, "output": output}
        if result is not None:
            value = result.value if math.isfinite(result.value) else None  # JSON: no NaN
            line.update(target=target_col, spearman=value, low=result.low, high=result.high,
                        n=result.n, note=result.note)
        text = json.dumps(line)
    else:
        interval = f" [{result.low:.3f}, {result.high:.3f}]" if result.low is not None else ""
        text = (f"Spearman ρ ({strategy} vs {target_col}, n={result.n}): "
                f"{result.value:.4f}{interval}" + (f" ({result.note})" if result.note else ""))
    if to_stderr:
        status(text)
    else:
        typer.echo(text)


BINDERS_HELP = "Design peptide binders of a target by masked infilling (PepMLM); PLL-scored."
BINDERS_EXAMPLE = """
Examples:

  mlmkit protein binders ./esm2-8m MKTAYIAKQRQISFVKSHFSRQ --length 12 -n 20 \\
      --seed 1 --json
"""


def binders_command(
    model: str = typer.Argument(..., help="Model directory or hub name (an ESM-2 model)."),
    target: str = typer.Argument(..., metavar="TARGET", help="The target protein: amino-acid "
                                 "letters or a FASTA file of one record (- for standard "
                                 "input)."),
    length: int = typer.Option(..., "--length", help="Residues of each binder."),
    n: int = typer.Option(8, "-n", "--n", help="Binders to design."),
    terminus: Literal["C", "N"] = typer.Option("C", "--terminus", help="Where the binder "
                                               "goes: C (after the target) or N (before it)."),
    residues: Literal["standard", "all"] = typer.Option(
        "standard", "--residues", help="standard: the 20 standard amino acids only; all: "
        "also the rare and ambiguous letters (X B U Z O)."),
    output: str = typer.Option(None, "-o", "--output", help="Write the binders as CSV here "
                               "(- for standard output)."),
    *, sampling: Sampling, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """Design binders of a target protein as PepMLM does: a fully masked binder at the
    terminus, filled by iterative unmasking (the sampler flags of mlmkit infill); each
    binder scored by the PLL and pseudo-perplexity of its residues given the target, best
    first."""
    with trusting(runtime.trust_remote_code):
        if output == "-" and as_json:
            raise InvalidArgument("--json and -o - both write standard output: drop one (-o - "
                                  "writes CSV, --json a JSON line per binder)")
        if output is not None:
            check_output_path(output, [target], "-o/--output")
        mlmkit.generation.SamplerOptions(**as_keywords(sampling))  # checked before loading
        protein = mlmkit.protein
        sequence = protein.read_sequence(target, "TARGET")
        mlm = mlmkit.load(model, **runtime.load_keywords())
        binders = mlm.design_binders(sequence, length, n, terminus=terminus, residues=residues,
                                     **as_keywords(sampling), progress=None)
        if output is not None:
            with open_output(output, [target], "-o/--output") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow(["binder", "pll", "pseudo_perplexity"])
                for b in binders:
                    writer.writerow([b.sequence, repr(b.pll), repr(b.pseudo_perplexity)])
            if output == "-":
                return
        for b in binders:
            typer.echo(b.to_json() if as_json else
                       f"{b.sequence}\tPLL {b.pll:.3f}\tpseudo-perplexity "
                       f"{b.pseudo_perplexity:.3f}")


VARIANTS_DETAILS = (
    "\n\nStrategies: masked-marginals (one masked copy per mutated position, batched), "
    "wt-marginals, mutant-marginals, pll; multi-mutants summed; proteins longer than the "
    "model's window scored in ProteinGym's sliding windows.")
BINDERS_DETAILS = (
    "\n\nThe binder is masked at the target's C or N terminus and filled with the generation "
    "samplers (seeded); binders are listed by pseudo-perplexity, lowest first.")


def register(app: typer.Typer) -> None:
    command(protein_app, "variants", variants_command, short_help=VARIANTS_HELP,
            help=VARIANTS_HELP + VARIANTS_DETAILS + EXAMPLE)
    command(protein_app, "binders", binders_command, short_help=BINDERS_HELP,
            help=BINDERS_HELP + BINDERS_DETAILS + BINDERS_EXAMPLE)
    app.add_typer(protein_app, name="protein", short_help=PROTEIN_HELP)
