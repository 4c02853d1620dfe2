"""Corpus statistics (frequencies, PMI collocations, informativeness), PMI units and the CLI."""

from __future__ import annotations

import random

import pytest
import torch
from typer.testing import CliRunner

from mlmkit.cli import app
from mlmkit.errors import MlmkitError
from mlmkit.masking import build_policy, compute_stats, load_stats
from mlmkit.masking.stats import save_stats
from mlmkit.masking.vocabulary import word_start_table


@pytest.fixture(scope="module")
def words(wordpiece_tokenizer):
    """Alphabetic whole-word tokens of the fixture vocabulary (one token each)."""
    tok = wordpiece_tokenizer
    starts = word_start_table(tok)
    special = set(tok.all_special_ids)
    out = []
    for token, index in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]):
        if index not in special and starts[index] and token.isalpha() and len(token) >= 4 \
                and tok(token, add_special_tokens=False)["input_ids"] == [index]:
            out.append(token)
    assert len(out) > 60
    return out


def planted_corpus(words, docs=300, length=30, seed=0):
    """Random words, with the bigram (A B) and the trigram (C D E) planted in each document,
    and A also on its own (so A-B is a collocation, not a constant)."""
    rng = random.Random(seed)
    a, b, c, d, e = words[:5]
    filler = words[5:65]
    texts = []
    for _ in range(docs):
        row = [rng.choice(filler) for _ in range(length)]
        row.insert(rng.randrange(len(row)), f"{a} {b}")
        row.insert(rng.randrange(len(row)), f"{c} {d} {e}")
        texts.append(" ".join(row))
    return texts, (a, b), (c, d, e)


@pytest.fixture(scope="module")
def planted(words, wordpiece_tokenizer):
    texts, bigram, trigram = planted_corpus(words)
    stats = compute_stats(texts, wordpiece_tokenizer, min_count=5)
    return stats, texts, bigram, trigram


def test_frequencies_and_document_frequencies(planted, wordpiece_tokenizer):
    stats, texts, (a, _), _ = planted
    tok = wordpiece_tokenizer
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    a_id = tok.convert_tokens_to_ids(a)
    assert stats.token_counts[a_id] == sum(row.count(a_id) for row in ids)
    assert stats.doc_freq[a_id] == sum(a_id in row for row in ids) == len(texts)
    assert stats.n_docs == len(texts) and stats.n_tokens == sum(map(len, ids))
    assert stats.token_counts.sum() == stats.n_tokens


def test_pmi_finds_the_planted_collocations(planted, wordpiece_tokenizer):
    stats, _, bigram, trigram = planted
    top = [text for text, _, _ in stats.top_collocations(wordpiece_tokenizer, 6)]
    assert " ".join(bigram) in top[:4] and " ".join(trigram) in top[:4]
    found = {text: pmi for text, pmi, _ in stats.top_collocations(wordpiece_tokenizer, 10**6)}
    # a trigram's PMI is its weakest binary split: planted pair + a random word scores low
    extended = [t for t in found if t.startswith(" ".join(bigram) + " ")]
    assert all(found[t] < found[" ".join(bigram)] - 1.0 for t in extended)


def test_informativeness_ranks_planted_words_above_filler(planted, wordpiece_tokenizer, words):
    stats, _, bigram, _ = planted
    tok = wordpiece_tokenizer
    planted_score = stats.informativeness[tok.convert_tokens_to_ids(bigram[0])]
    filler = stats.informativeness[tok.convert_tokens_to_ids(words[5:65])]
    assert planted_score > filler.max()


def test_pmi_units_mask_a_collocation_whole(planted, wordpiece_tokenizer, tmp_path):
    stats, texts, bigram, trigram = planted
    tok = wordpiece_tokenizer
    save_stats(stats, tmp_path / "stats")
    units = {"name": "pmi", "max_ngrams": 4}  # the planted ones and the trigram's halves
    policy = build_policy({"units": units, "rate": 0.3}, tok, stats=tmp_path / "stats")
    encoded = tok(texts[:64], padding=True, return_tensors="pt")
    ids = encoded["input_ids"]
    units = policy.unit_ids(ids, encoded["attention_mask"])
    a, b = (tok.convert_tokens_to_ids(w) for w in bigram)
    at = ((ids[:, :-1] == a) & (ids[:, 1:] == b)).nonzero()
    assert len(at) >= 64
    assert torch.all(units[at[:, 0], at[:, 1]] == units[at[:, 0], at[:, 1] + 1])
    c, d, e = (tok.convert_tokens_to_ids(w) for w in trigram)
    at = ((ids[:, :-2] == c) & (ids[:, 1:-1] == d) & (ids[:, 2:] == e)).nonzero()
    assert torch.all(units[at[:, 0], at[:, 1]] == units[at[:, 0], at[:, 1] + 2])
    filler = (ids[:, 1:] != a) & (ids[:, 1:] != b) & (ids[:, 1:] != c) & (ids[:, 1:] != d)
    filler &= (ids[:, 1:] != e) & (units[:, 1:] >= 0) & (units[:, :-1] >= 0)
    filler &= (ids[:, :-1] != a) & (ids[:, :-1] != c) & (ids[:, :-1] != d)
    assert not (units[:, 1:] == units[:, :-1])[filler].any()  # other words stay apart
    out = policy(ids, encoded["attention_mask"], seed=1)
    pair = out.mask[at[:, 0], at[:, 1]]
    assert torch.equal(pair, out.mask[at[:, 0], at[:, 1] + 2])


def test_stats_round_trip_and_vocabulary_check(planted, tmp_path, bpe_tokenizer,
                                               wordpiece_tokenizer):
    stats = planted[0]
    save_stats(stats, tmp_path / "s")
    loaded = load_stats(tmp_path / "s")
    assert torch.equal(loaded.ngram_ids, stats.ngram_ids)
    assert torch.equal(loaded.informativeness, stats.informativeness)
    assert loaded.meta["n_collocations"] == len(stats.ngram_pmi)
    with pytest.raises(MlmkitError, match="mask stats"):
        load_stats(tmp_path / "missing")
    named = build_policy({"preset": "pmi", "stats": str(tmp_path / "s")}, wordpiece_tokenizer)
    assert "pmi(" in named.describe()
    if len(bpe_tokenizer) != stats.vocab_size:
        with pytest.raises(MlmkitError, match="recompute"):
            build_policy("pmi", bpe_tokenizer, stats=loaded)


def test_weights_from_statistics(planted, wordpiece_tokenizer, words):
    """Frequency weights favour rare tokens; tf-idf favours a term repeated in its document."""
    stats, _, _, _ = planted
    tok = wordpiece_tokenizer
    common, rare = (tok.convert_tokens_to_ids(w) for w in (words[0], words[5]))
    assert stats.token_counts[common] > stats.token_counts[rare]
    policy = build_policy({"weights": {"name": "frequency", "alpha": 1.0}, "rate": 0.02}, tok,
                          stats=stats)
    ids = torch.tensor([[common, rare] * 25] * 2000)
    picked = policy(ids).labels
    share = (picked == rare).sum() / (picked != -100).sum()
    ratio = (stats.token_counts[common] + 1) / (stats.token_counts[rare] + 1)
    assert abs(share - ratio / (1 + ratio)) < 0.03
    tfidf = build_policy({"weights": "tfidf"}, tok, stats=stats)
    row = torch.tensor([[common, common, common, rare]])
    weights = tfidf.weights.token_weights(row, None, None)
    assert weights[0, 0] == weights[0, 1] and weights[0, 0] != weights[0, 3]
    docs = torch.tensor([[0, 0, 1, 1]])
    split = tfidf.weights.token_weights(row, None, docs)
    assert split[0, 0] > split[0, 2]  # tf 2 in document 0, tf 1 in document 1


def test_cli_stats_and_preview(tmp_path, words, fixture_dir, wordpiece_tokenizer):
    texts, bigram, _ = planted_corpus(words, docs=120)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    runner = CliRunner()
    tokenizer = str(fixture_dir / "tok-wordpiece")
    result = runner.invoke(app, ["mask", "stats", str(corpus), tokenizer, "-o",
                                 str(tmp_path / "st"), "--show", "3"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "st" / "stats.safetensors").is_file()
    assert "collocations" in result.output and " ".join(bigram) in result.output
    result = runner.invoke(app, ["mask", "preview", tokenizer, " ".join(texts[0].split()[:12]),
                                 "--policy", "pmi", "--stats", str(tmp_path / "st"),
                                 "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "labels" in result.output and "units=pmi" in result.output
    result = runner.invoke(app, ["mask", "preview", tokenizer, "Return the number of items.",
                                 "--policy", "{units: whole_word, rate: 0.5}"])
    assert result.exit_code == 0 and "[MASK]" in result.output
    result = runner.invoke(app, ["mask", "preview", tokenizer, "x", "--policy", "nope"])
    assert result.exit_code == 1 and "error: unknown masking policy 'nope'" in result.stderr


def reference_pmi_units(ids, maskable, word_starts, docs, table):
    """PMI units of one row by the rule, position by position: longest collocations first;
    a window is a candidate when it starts a word, ends one, spans two words or more, is
    all maskable within one document and touches nothing a longer collocation took; of
    candidates of one length, those with another candidate in the n - 1 positions before
    them give way."""
    length = len(ids)
    cut = [i == 0 or not maskable[i - 1] or docs[i] != docs[i - 1] for i in range(length)]
    start = [word_starts[i] or cut[i] for i in range(length)]

    def ends_word(j):
        return j == length - 1 or start[j + 1] or not maskable[j + 1]

    covered, joined = [False] * length, [False] * length
    for n in sorted(table, reverse=True):
        hits = []
        for i in range(length - n + 1):
            inside = range(i + 1, i + n)
            hits.append(start[i] and ends_word(i + n - 1)
                        and all(maskable[j] for j in range(i, i + n))
                        and not any(cut[j] for j in inside) and any(start[j] for j in inside)
                        and not any(covered[i:i + n]) and tuple(ids[i:i + n]) in table[n])
        for i, hit in enumerate(hits):
            if hit and not any(hits[max(0, i - n + 1):i]):
                covered[i:i + n] = [True] * n
                joined[i + 1:i + n] = [True] * (n - 1)
    units, unit = [], -1
    for i in range(length):
        if not maskable[i]:
            units.append(-1)
            continue
        unit += (start[i] and not joined[i]) or cut[i]
        units.append(unit)
    return units


def test_pmi_units_follow_the_rule_on_random_rows():
    from mlmkit.masking.stats import MaskingStats
    from mlmkit.masking.units import PmiUnits, boundaries, number_units

    g = torch.Generator().manual_seed(0)
    vocab, rows, length = 6, 48, 40  # a small vocabulary: collocations everywhere, overlapping
    ids = torch.randint(0, vocab, (rows, length), generator=g)
    maskable = torch.rand(rows, length, generator=g) > 0.08
    word_starts = torch.rand(rows, length, generator=g) > 0.35
    docs = (torch.rand(rows, length, generator=g) > 0.93).long().cumsum(1)
    grams = set()
    for n in range(2, 6):
        for _ in range(5 if n == 2 else 25):
            r, c = (int(torch.randint(0, m, (1,), generator=g)) for m in (rows, length - n))
            grams.add(tuple(ids[r, c:c + n].tolist()))
    grams = sorted(grams)
    padded = torch.tensor([list(t) + [-1] * (5 - len(t)) for t in grams])
    stats = MaskingStats(
        token_counts=torch.ones(vocab, dtype=torch.long), doc_freq=torch.ones(vocab,
                                                                              dtype=torch.long),
        informativeness=torch.zeros(vocab), ngram_ids=padded,
        ngram_pmi=torch.linspace(10, 1, len(grams)), ngram_counts=torch.ones(len(grams),
                                                                            dtype=torch.long),
        n_docs=1, n_tokens=rows * length)
    units = PmiUnits(stats=stats).assign(ids, maskable, word_starts, docs, None)
    table = {n: {t for t in grams if len(t) == n} for n in range(2, 6)}
    for r in range(rows):
        expected = reference_pmi_units(ids[r].tolist(), maskable[r].tolist(),
                                       word_starts[r].tolist(), docs[r].tolist(), table)
        assert units[r].tolist() == expected, r
    words = number_units(word_starts | boundaries(maskable, docs), maskable)
    merged = (words.max(1).values - units.max(1).values).sum()
    assert merged > 150  # words merged into collocations: the rows do hold many


def test_key_set_membership_matches_a_python_set():
    from mlmkit.masking.ngrams import KeySet

    g = torch.Generator().manual_seed(3)
    stored = torch.randint(0, 1 << 40, (5000,), generator=g)
    queries = torch.cat([stored[:2000], torch.randint(0, 1 << 40, (3000,), generator=g)])
    keys = KeySet(stored)
    assert keys.probes > 1  # collisions happened and were probed past
    expected = torch.tensor([q in set(stored.tolist()) for q in queries.tolist()])
    assert torch.equal(keys.contains(queries), expected)
    assert torch.equal(keys.contains(queries.view(50, 100)), expected.view(50, 100))


def test_tfidf_counts_each_token_within_its_own_document_and_row(planted, wordpiece_tokenizer):
    stats = planted[0]
    tfidf = build_policy({"weights": "tfidf"}, wordpiece_tokenizer, stats=stats).weights
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 12, (6, 30), generator=g)  # few ids: many repeats
    docs = (torch.rand(6, 30, generator=g) < 0.15).long().cumsum(1)  # same ids in every row
    weights = tfidf.token_weights(ids, None, docs)
    idf = tfidf.table[ids]
    for r in range(6):
        for c in range(30):
            tf = sum(1 for k in range(30) if docs[r, k] == docs[r, c] and ids[r, k] == ids[r, c])
            assert torch.isclose(weights[r, c], (1 + torch.log(torch.tensor(float(tf))))
                                 * idf[r, c])
    assert tfidf.token_weights(ids[:, :0], None, docs[:, :0]).shape == (6, 0)  # empty rows


def test_preview_and_stats_of_long_texts_do_not_warn_about_the_model_length(
        tmp_path, wordpiece_tokenizer):
    """Neither feeds a model: transformers' "Token indices sequence length is longer than the
    specified maximum" warning would be about nothing (it reached the preview's stderr)."""
    import logging

    from transformers import AutoTokenizer

    from mlmkit.masking.preview import preview_masking

    wordpiece_tokenizer.save_pretrained(tmp_path)  # a fresh copy: it warns once per object
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    long_text = "Return the number of items in a container. " * 120
    assert len(tokenizer(long_text, verbose=False)["input_ids"]) > tokenizer.model_max_length
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("transformers").addHandler(handler)
    try:
        preview_masking(build_policy("bert", tokenizer), tokenizer, long_text, seed=1)
        compute_stats([long_text, long_text], tokenizer)
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    assert not [m for m in seen if "Token indices" in m]
