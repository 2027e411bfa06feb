"""Train the embedded English -> German translator (a standard Hugging Face Marian checkpoint).

The 2017 recipe where it helps: Adam with betas (0.9, 0.98) and eps 1e-9, the warm-up then
inverse-square-root learning rate, label smoothing 0.1, dropout 0.1; post-norm layers and
sinusoidal positions, as Marian has them.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .alignment import alignment_accuracy
from .checks import FIRST_INPUTS, small_number_checks
from .data import CATEGORIES, Pair, build_dataset
from .forms import VOCABULARY_FORMS
from .tokenizer import build_marian_tokenizer


@dataclass
class TrainConfig:
    out: str = "assets/en-de-numbers"
    seed: int = 0
    data_scale: float = 1.0
    vocab_size: int = 1000
    d_model: int = 256
    layers: int = 3
    heads: int = 4
    d_ff: int = 512
    dropout: float = 0.1
    batch_tokens: int = 1000  # padded tokens a side per batch (grouped by length); small batches, many steps
    steps: int = 10000
    warmup: int = 1200  # with d_model 256: a peak learning rate of 1.8e-3
    cooldown: float = 0.3  # the last 30% of the steps bring the learning rate linearly down to 0
    vocabulary_repeats: int = 16  # see ``with_vocabulary_repeated``
    min_piece_count: int = 0  # a vocabulary pair's rarest piece is seen this often an epoch (0: off)
    regroup_every_epoch: bool = False  # see ``batches``
    max_sentences: int = 0  # pairs a batch holds at most (0: as many as batch_tokens allows); see ``batches``
    lr_factor: float = 1.0
    label_smoothing: float = 0.1
    eval_limit: int | None = None  # test examples to score (None: all)
    threads: int = 2
    init_from: str = ""  # a trained folder to go on training (its tokenizer and weights); "": start anew


def noam_lr(step: int, d_model: int, warmup: int, factor: float) -> float:
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def learning_rate(step: int, config: TrainConfig) -> float:
    """The 2017 warm-up and inverse square root, then a linear cool-down to 0 over the last steps.

    A short run ends while the inverse square root is still high; the weights then jitter
    around a minimum, and exact match (every piece right) pays for it. Cooling down settles them.
    """
    rate = noam_lr(step, config.d_model, config.warmup, config.lr_factor)
    cooldown_steps = int(config.cooldown * config.steps)
    remaining = config.steps - step
    return rate * min(1.0, max(remaining, 0) / cooldown_steps) if cooldown_steps else rate


def with_vocabulary_repeated(
    pairs: list[Pair], repeats: int, encoded: list | None = None, min_piece_count: int = 0
) -> list[Pair]:
    """The vocabulary (every number 0-100 on its own in words and digits, "21st", weekdays,
    months, noon, "a thousand") ``repeats`` times each per epoch, and a pair whose rarest piece
    is rarer still more often: until that piece is seen ``min_piece_count`` times an epoch.

    They are what people type first, and where German's units-before-tens order starts the
    output ("twenty-one" -> "ein" "und" "zwanzig"), yet they are about 1,300 of 100,000 pairs.
    In longer numbers and years the first German piece comes from the first English word; a
    model that saw the vocabulary too rarely wrote "zwölfhundertzwölf" (a year) for "twelve".
    Some words occur nowhere else: "zero" and "null" once in 100,000 pairs, "seventh",
    "twelfth", "noon" twice, while "twenty" is in thousands; with every vocabulary pair
    repeated alike, those were the ones still wrong. ``encoded`` (the pairs as (source ids,
    target ids)) gives the pieces to count. Only the forms of ``VOCABULARY_FORMS`` are
    repeated: "3-5 km" has a small value too, but it is not a word to learn.
    """
    vocabulary = [p for p in pairs if p.form in VOCABULARY_FORMS]
    repeated = pairs + vocabulary * (repeats - 1)  # (this order is what the seed reproduces)
    if encoded is None or not min_piece_count:
        return repeated
    seen = Counter(("source", i) for source, _ in encoded for i in source)
    seen.update(("target", i) for _, target in encoded for i in target)
    for pair, (source, target) in zip(pairs, encoded, strict=True):
        if pair.form in VOCABULARY_FORMS:
            rarest = min([seen["source", i] for i in source] + [seen["target", i] for i in target])
            repeated += [pair] * (-(-min_piece_count // rarest) - repeats)  # none when common enough
    return repeated


def encode(tokenizer, pairs: list[Pair]) -> list[tuple[list[int], list[int]]]:
    sources = tokenizer([p.english for p in pairs])["input_ids"]
    targets = tokenizer(text_target=[p.german for p in pairs])["input_ids"]
    return list(zip(sources, targets, strict=True))


def batches(examples, batch_tokens: int, rng: random.Random, regroup: bool = False, max_sentences: int = 0):
    """Endless batches of similar length: less padding, so more useful work per step.

    Without ``regroup`` the batches are made once, from the examples in order, and only their
    order is shuffled each epoch: so the copies of a repeated pair sit side by side in one batch
    and teach the model once an epoch, however many there are. With ``regroup`` the examples
    of each length are shuffled before every epoch's batches are made, so the copies spread
    over all the batches of their length (what the second training stage uses). Pairs of one
    piece a side ("zero" -> "null") are so few that all of them fit in one batch of
    ``batch_tokens``: ``max_sentences`` (0: no limit) cuts that batch into several, so that
    such a pair's copies teach the model several times an epoch.
    """
    indices = list(range(len(examples)))
    while True:
        if regroup:
            rng.shuffle(indices)  # the sort below is stable: equal lengths stay shuffled
        groups = length_groups(examples, indices, batch_tokens, max_sentences)
        rng.shuffle(groups)
        yield from groups
        if not regroup:
            while True:  # the same groups, in a new order each epoch
                rng.shuffle(groups)
                yield from groups


def length_groups(examples, indices: list[int], batch_tokens: int, max_sentences: int = 0) -> list[list[int]]:
    """``indices`` sorted by length and cut into batches of at most ``batch_tokens`` padded tokens
    (and at most ``max_sentences`` pairs, unless 0)."""
    order = sorted(indices, key=lambda i: (len(examples[i][1]), len(examples[i][0])))
    groups, current, longest = [], [], 0
    for i in order:
        longest = max(longest, len(examples[i][1]), len(examples[i][0]))
        full = max_sentences and len(current) >= max_sentences
        if current and (longest * (len(current) + 1) > batch_tokens or full):
            groups.append(current)
            current, longest = [], max(len(examples[i][1]), len(examples[i][0]))
        current.append(i)
    if current:
        groups.append(current)
    return groups


def collate(examples, indices, pad_id: int, start_id: int):
    src = [examples[i][0] for i in indices]
    tgt = [examples[i][1] for i in indices]
    s_len, t_len = max(map(len, src)), max(map(len, tgt))
    input_ids = torch.full((len(src), s_len), pad_id)
    attention_mask = torch.zeros((len(src), s_len), dtype=torch.long)
    decoder_input = torch.full((len(tgt), t_len), pad_id)
    labels = torch.full((len(tgt), t_len), -100)
    for row, (s, t) in enumerate(zip(src, tgt, strict=True)):
        input_ids[row, : len(s)] = torch.tensor(s)
        attention_mask[row, : len(s)] = 1
        decoder_input[row, : len(t)] = torch.tensor([start_id, *t[:-1]])  # teacher forcing: shift right
        labels[row, : len(t)] = torch.tensor(t)
    return input_ids, attention_mask, decoder_input, labels


@torch.no_grad()
def translate(model, tokenizer, texts: list[str], batch_size: int = 128, max_new_tokens: int = 48) -> list[str]:
    model.eval()
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i : i + batch_size], return_tensors="pt", padding=True)
        generated = model.generate(**enc, max_new_tokens=max_new_tokens, num_beams=1, do_sample=False)
        out += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return out


MAX_ERRORS_KEPT = 200  # every error of a good model; a bad one's first 200
NEW_FORMS_SCORED = 1500  # of the new-forms set (about 5,000 pairs): enough for a percentage, and quick


def write_known_words(folder: Path, pairs: list[Pair]) -> None:
    """Every English word the training data holds: the explorer notes a source with other words."""
    from explorer.analysis.domain import words_of
    from explorer.loading.registry import KNOWN_WORDS_FILE

    words = sorted({w for p in pairs for w in words_of(p.english)})
    (folder / KNOWN_WORDS_FILE).write_text(json.dumps(words, indent=0))


def evaluate(model, tokenizer, pairs: list[Pair], by: str = "category") -> dict:
    """Exact match overall and by ``by`` (the pair's category or its form), chrF, the errors."""
    import sacrebleu

    if not pairs:  # a tiny test run's new-forms set can be empty
        return {"exact_match": float("nan"), "exact_match_by_category": {}, "chrf": float("nan"), "n": 0,
                "n_errors": 0, "errors": [], "examples": {}}  # fmt: skip
    hypotheses = translate(model, tokenizer, [p.english for p in pairs])
    by_category: dict[str, list[bool]] = defaultdict(list)
    for pair, hyp in zip(pairs, hypotheses, strict=True):
        by_category[getattr(pair, by)].append(hyp == pair.german)
    exact = {c: sum(v) / len(v) for c, v in sorted(by_category.items())}
    overall = sum(sum(v) for v in by_category.values()) / len(pairs)
    chrf = sacrebleu.corpus_chrf(hypotheses, [[p.german for p in pairs]]).score
    errors = [(p.english, p.german, h) for p, h in zip(pairs, hypotheses, strict=True) if h != p.german]
    n_errors = len(errors)
    examples = {}  # the first two test pairs of each category, as the model translates them
    for pair, hyp in zip(pairs, hypotheses, strict=True):
        if len(examples.setdefault(pair.category, [])) < 2:
            examples[pair.category].append((pair.english, pair.german, hyp))
    return {"exact_match": overall, "exact_match_by_category": exact, "chrf": chrf, "n": len(pairs),
            "n_errors": n_errors, "errors": errors[:MAX_ERRORS_KEPT],
            "examples": dict(sorted(examples.items()))}  # fmt: skip


def cross_attention_probe(folder: Path):
    """Cross-attention as the explorer shows it: our own model, loaded from the saved folder."""
    from explorer.loading.checkpoints import read_hf_folder
    from explorer.loading.registry import model_from_state
    from explorer.model import Record

    model = model_from_state(*read_hf_folder(folder), device="cpu")
    start = model.config.decoder_start_token_id

    @torch.no_grad()
    def run(source: list[int], target: list[int]):
        memory, _ = model.encode(torch.tensor([source]))
        out = model(torch.tensor([[start, *target[:-1]]]), memory, record=Record.of("attention"))
        layers = range(model.config.n_layers)
        return torch.stack([out.trace.cross_attention(i)[0] for i in layers]).numpy()  # (layers, heads, T, S)

    return run


ROBUSTNESS = [
    ("  twenty-one  ", "einundzwanzig"),
    ("Twenty-One", "einundzwanzig"),
    ("twenty-one.", "einundzwanzig."),
    ("twenty one", "einundzwanzig"),
    ("WEDNESDAY, MARCH 3, 2021", "Mittwoch, 3. März 2021"),
    ("At 3:45PM.", "um 15:45."),
    ("I like cats", None),  # out of domain: must not crash, may translate badly
]


def train(config: TrainConfig, progress: bool = True) -> dict:
    from transformers import AutoTokenizer, MarianMTModel

    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = random.Random(config.seed)
    out = Path(config.out)
    started = time.time()

    data = build_dataset(seed=config.seed, scale=config.data_scale)
    if config.init_from:  # a second stage: the same tokenizer and the weights the first stage left
        tokenizer = AutoTokenizer.from_pretrained(config.init_from)
        tokenizer.save_pretrained(out)
        model = MarianMTModel.from_pretrained(config.init_from)
        model_config = model.config
    else:
        english, german = [p.english for p in data["train"]], [p.german for p in data["train"]]
        build_marian_tokenizer(english, german, out, vocab_size=config.vocab_size, split_digits=True)
        tokenizer = AutoTokenizer.from_pretrained(out)
        model_config = marian_config(config, tokenizer)
        model = MarianMTModel(model_config)

    encoded = encode(tokenizer, data["train"])
    weighted = with_vocabulary_repeated(data["train"], config.vocabulary_repeats, encoded, config.min_piece_count)
    train_examples = encode(tokenizer, weighted)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate(step + 1, config))
    stream = batches(
        train_examples, config.batch_tokens, rng, regroup=config.regroup_every_epoch, max_sentences=config.max_sentences
    )
    model.train()
    bar = tqdm(range(config.steps), desc="Training the translator", unit="step", disable=not progress)
    running = None
    for _ in bar:
        input_ids, mask, decoder_input, labels = collate(
            train_examples, next(stream), tokenizer.pad_token_id, model_config.decoder_start_token_id
        )
        logits = model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_input).logits
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100,
            label_smoothing=config.label_smoothing,
        )  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        bar.set_postfix(loss=f"{running:.3f}", lr=f"{schedule.get_last_lr()[0]:.2e}")
    model.eval()
    train_minutes = (time.time() - started) / 60

    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_known_words(out, data["train"])
    return evaluate_folder(config, data, train_minutes, stages=[*earlier_stages(config), stage(config, train_minutes)])


def marian_config(config: TrainConfig, tokenizer):
    from transformers import MarianConfig

    return MarianConfig(
        vocab_size=len(tokenizer), decoder_vocab_size=len(tokenizer), d_model=config.d_model,
        encoder_layers=config.layers, decoder_layers=config.layers, encoder_attention_heads=config.heads,
        decoder_attention_heads=config.heads, encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff,
        max_position_embeddings=128, dropout=config.dropout, attention_dropout=0.0, activation_dropout=0.0,
        activation_function="swish", scale_embedding=True, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.eos_token_id, bad_words_ids=[[tokenizer.pad_token_id]],
        max_length=64, num_beams=1, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
    )  # fmt: skip


def stage(config: TrainConfig, minutes: float) -> dict:
    """One training run as the model card reproduces it: its settings and how long it took."""
    return {"config": asdict(config), "minutes": minutes}


def earlier_stages(config: TrainConfig) -> list[dict]:
    """The runs that made ``config.init_from``, from its metrics.json (none for a fresh start)."""
    if not config.init_from:
        return []
    trained = json.loads((Path(config.init_from) / "metrics.json").read_text())
    return trained.get("stages") or [stage(TrainConfig(**trained["config"]), trained["train_minutes"])]


def evaluate_folder(
    config: TrainConfig,
    data: dict[str, list[Pair]] | None = None,
    train_minutes: float = 0.0,
    stages: list[dict] | None = None,
):
    """Score the saved model in ``config.out`` and write its metrics.json and model card.

    Run by ``train`` after training, and by ``scripts/train_translator.py --evaluate-only``,
    which recomputes every figure of a shipped folder from its weights.
    """
    from transformers import MarianMTModel, MarianTokenizer

    out = Path(config.out)
    data = data or build_dataset(seed=config.seed, scale=config.data_scale)
    model = MarianMTModel.from_pretrained(out).eval()
    tokenizer = MarianTokenizer.from_pretrained(out)
    limit = config.eval_limit
    metrics = evaluate(model, tokenizer, data["test"][:limit])
    metrics["new_forms"] = evaluate(model, tokenizer, data["new_forms"][: limit or NEW_FORMS_SCORED], by="form")
    metrics["small_numbers"] = evaluate(model, tokenizer, small_number_checks(), by="form")
    metrics["first_inputs"] = evaluate(model, tokenizer, FIRST_INPUTS, by="form")
    metrics["alignment_by_layer"] = alignment_accuracy(cross_attention_probe(out), tokenizer, config.layers)
    robust = translate(model, tokenizer, [en for en, _ in ROBUSTNESS])
    metrics["robustness"] = [
        {"input": en, "expected": de, "output": hyp} for (en, de), hyp in zip(ROBUSTNESS, robust, strict=True)
    ]
    metrics["data_sizes"] = {
        split: dict(sorted(Counter(p.category for p in pairs).items())) for split, pairs in data.items()
    }
    metrics["stages"] = stages or [stage(config, train_minutes)]
    metrics["train_minutes"] = sum(s["minutes"] for s in metrics["stages"])
    metrics["config"] = asdict(config)
    metrics["parameters"] = sum(p.numel() for p in model.parameters())
    metrics["vocabulary"] = len(tokenizer)

    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False))
    (out / "README.md").write_text(model_card(metrics, config))
    return metrics


def error_rows(*results: dict) -> str:
    """Every error of these evaluations, as table rows (past MAX_ERRORS_KEPT, how many more)."""
    errors = [error for result in results for error in result["errors"]]
    rows = [f"| `{en}` | {de} | {hyp} |" for en, de, hyp in errors] or ["| (none) | | |"]
    more = sum(result["n_errors"] for result in results) - len(errors)
    return "\n".join(rows + ([f"| ... and {more} more | | |"] if more else []))


def share_rows(by_group: dict[str, float]) -> str:
    return "\n".join(f"| {group} | {share:.1%} |" for group, share in by_group.items())


def reproduce_steps(stages: list[dict]) -> str:
    """Each training stage as the command that runs it (the settings that differ from the defaults)."""
    defaults = asdict(TrainConfig())
    lines = []
    for i, run in enumerate(stages):
        flags = [f"--seed {run['config']['seed']}"]
        for name, value in run["config"].items():
            if name in ("out", "seed", "init_from", "eval_limit", "threads") or value == defaults.get(name):
                continue
            flags.append(f"--{name.replace('_', '-')} {value}")
        if run["config"].get("init_from"):
            flags.append("--init-from <the folder stage 1 wrote> --out <a new folder>")
        lines.append(f"  {i + 1}. `python scripts/train_translator.py {' '.join(flags)}` ({run['minutes']:.1f} min)")
    return "\n".join(lines)


def later_stages_text(stages: list[dict]) -> str:
    """What each stage after the first changed (it goes on from the previous stage's weights)."""
    text = ""
    for i, run in enumerate(stages[1:], start=2):
        c = TrainConfig(**run["config"])
        peak = noam_lr(c.warmup, c.d_model, c.warmup, c.lr_factor)
        text += (
            f"\n- Stage {i} goes on from stage {i - 1}'s weights with the same data: {c.steps} steps, a peak learning"
            f" rate of {peak:.1e} after {c.warmup} warm-up steps, cooled down to 0 over the last {c.cooldown:.0%};"
            f" the vocabulary seen {c.vocabulary_repeats} times an epoch"
            + (f", and a vocabulary pair with a rarer piece (\"zero\", \"noon\") more often, until that piece is seen"
                f" {c.min_piece_count} times"
               if c.min_piece_count else "")
            + ("; the batches made anew each epoch, so that a pair's copies spread over them" if c.regroup_every_epoch
               else "")
            + (f", each of at most {c.max_sentences} pairs" if c.max_sentences else "")
            + "."
        )  # fmt: skip
    return text


def config_of_first(metrics: dict) -> TrainConfig:
    return TrainConfig(**metrics["stages"][0]["config"])


def model_card(metrics: dict, config: TrainConfig) -> str:
    sizes = metrics["data_sizes"]
    new, small, first = metrics["new_forms"], metrics["small_numbers"], metrics["first_inputs"]
    rows = "\n".join(
        f"| {c} | {sizes['train'].get(c, 0)} | {sizes['validation'].get(c, 0)} | {sizes['test'].get(c, 0)} | "
        f"{metrics['exact_match_by_category'].get(c, float('nan')):.1%} |"
        for c in CATEGORIES
    )
    alignment = "\n".join(f"| {i} | {a:.1%} |" for i, a in enumerate(metrics["alignment_by_layer"]))
    examples = "\n".join(
        f"| {category} | `{en}` | {de} | {hyp} |"
        for category, triples in metrics["examples"].items()
        for en, de, hyp in triples
    )
    robustness = "\n".join(
        f"| `{r['input']}` | {r['expected'] or '(out of domain)'} | {r['output']} |" for r in metrics["robustness"]
    )
    stage_1 = config_of_first(metrics)
    worst = min(metrics["exact_match_by_category"].items(), key=lambda item: item[1])
    best_layer = max(range(len(metrics["alignment_by_layer"])), key=metrics["alignment_by_layer"].__getitem__)
    return f"""---
language: [en, de]
license: apache-2.0
tags: [translation, marian, teaching]
---
# en-de-numbers: a small English → German translator for numbers, dates, times and quantities

Trained for Decoder Explorer so that cross-attention can be seen on a model that really
translates, offline. It knows cardinal numbers (in words and digits), ordinals, years, dates,
times, money amounts and unit quantities, in the forms people type in English, and writes what
num2words and babel (CLDR) write in German. Anything else ("I like cats") it translates badly,
and the explorer says so beside the output (the source holds words that are not in
`known_words.json`, every English word of the training data).

## Headline (greedy decoding, as the explorer steps)

- Small numbers, every one: **{small["exact_match"]:.1%}** of {small["n"]} (cardinals 0-100 and ordinals
  1-100 in words, digits 0-100, "1st" to "31st").
- Held-out split by value (no test value is trained in any form): **{metrics["exact_match"]:.2%}** of
  {metrics["n"]}, chrF {metrics["chrf"]:.2f}; the weakest category, {worst[0]}, {worst[1]:.2%}.
- Forms never trained on (whole templates held out): **{new["exact_match"]:.1%}** of {new["n"]}.
- The first inputs people typed: **{first["exact_match"]:.1%}** of {first["n"]}.
- Cross-attention alignment on the two-digit numbers: **{metrics["alignment_by_layer"][best_layer]:.1%}** in
  decoder layer {best_layer}.
- {metrics["parameters"]:,} parameters; {metrics["vocabulary"]} vocabulary ids.
- Recomputed from the shipped weights by `python scripts/train_translator.py --evaluate-only` and by
  `tests/test_translator_asset.py::test_the_model_cards_figures_are_recomputed`.

## How it was made

- Architecture: Marian (the 2017 transformer, post-norm, sinusoidal positions),
  {config.layers}+{config.layers} layers, d_model {config.d_model}, {config.heads} heads, d_ff {config.d_ff}.
  Tokenizers: SentencePiece BPE, digits split into single pieces;
  the English one folds case (capitals do not matter), the German one always cuts number words
  into their parts ("einundzwanzig" → "ein" "und" "zwanzig"); one vocabulary whose embeddings
  both sides share.
- Reproduce ({metrics["train_minutes"]:.1f} minutes on 2 CPU cores in all):
{reproduce_steps(metrics["stages"])}
- The first stage: {stage_1.steps} steps of at most {stage_1.batch_tokens} padded tokens a side; Adam β=(0.9, 0.98),
  ε=1e-9, {stage_1.warmup} warm-up steps then inverse square root, then a linear cool-down to 0 over the last
  {stage_1.cooldown:.0%} of the steps; label smoothing {stage_1.label_smoothing}, dropout {stage_1.dropout}; the
  vocabulary (every number up to 100 on its own, weekdays, months, noon, round words) seen
  {stage_1.vocabulary_repeats} times an epoch.{later_stages_text(metrics["stages"])}
- Data: generated by `explorer/train/data.py` and `explorer/train/forms.py` (seed {config.seed}),
  deduplicated, split by value alone so that no test number or date appears in training in any
  form; whole numbers up to 100, whole hours and fixed words are always trained (vocabulary).

## Test split (held out by value)

| category | train | validation | test | exact match (test) |
|---|---|---|---|---|
{rows}

Every error:

| English | German (reference) | output |
|---|---|---|
{error_rows(metrics)}

## Forms never trained on

| form | exact match |
|---|---|
{share_rows(new["exact_match_by_category"])}

Every error:

| English | German (reference) | output |
|---|---|---|
{error_rows(new)}

## Small numbers and first inputs

| set | exact match |
|---|---|
{share_rows(small["exact_match_by_category"])}
| first inputs | {first["exact_match"]:.1%} |

Every error:

| English | German (reference) | output |
|---|---|---|
{error_rows(small, first)}

## Cross-attention that teaches

German says the units before the tens ("twenty-one" → "einundzwanzig"). Over the 72 two-digit
numbers that are not multiples of ten, how often the head-averaged cross-attention of the step
that writes each German piece has its maximum on the English word that piece translates:

| decoder layer | alignment hits |
|---|---|
{alignment}

## Examples (the first two test pairs of each category)

| category | English | German (reference) | output |
|---|---|---|---|
{examples}

## How people type

| input | expected | output |
|---|---|---|
{robustness}
"""
