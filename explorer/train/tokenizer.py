"""SentencePiece tokenizers in the layout Hugging Face's MarianTokenizer reads.

A Marian folder holds ``source.spm`` (English), ``target.spm`` (German) and ``vocab.json``,
which maps the pieces of both to one set of ids (the embeddings are shared). The special
tokens come first: ``</s>`` = 0, ``<unk>`` = 1, ``<pad>`` = 2 (the decoder start token).

Two choices here are about what the model is asked to learn:
- The English model folds case as it normalises ("MARCH", "March" and "march" are the same
  pieces), so the translator is robust to how people capitalise by construction.
- The German model always cuts number words into their parts ("einundzwanzig" -> "ein" "und"
  "zwanzig"): the model then writes the units before the tens piece by piece, and its
  cross-attention can show that it reads "one" before "twenty" to do so.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path

SPECIALS = ["</s>", "<unk>", "<pad>"]
GERMAN_NUMBER_PARTS = [
    "ein", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
    "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig",
    "hundert", "tausend",
]  # fmt: skip
# (Not "und": SentencePiece would cut it out of English words too, "h-und-red", were the
# vocabularies shared; it falls between the parts above and becomes its own piece anyway.)


def train_sentencepiece(
    texts: Iterable[str], vocab_size: int, split_digits: bool, normalization: str, symbols: list[str]
) -> bytes:
    """A BPE SentencePiece model, as bytes."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(texts)),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",  # merges whole frequent words ("▁wednesday"); unigram kept only ~150 pieces here
        normalization_rule_name=normalization,
        user_defined_symbols=symbols,
        character_coverage=1.0,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        hard_vocab_limit=False,
        split_digits=split_digits,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


def build_marian_tokenizer(
    english: Iterable[str], german: Iterable[str], folder: Path, vocab_size: int, split_digits: bool = False
) -> Path:
    """Train the English and German SentencePiece models and write a MarianTokenizer folder.

    ``vocab_size`` is shared between the two sides (each gets half; pieces both have, such as
    the digits, take one id). ``split_digits`` makes every digit its own piece, so that unseen
    numbers are spelled from pieces the model has seen.
    """
    import sentencepiece as spm

    folder.mkdir(parents=True, exist_ok=True)
    source = train_sentencepiece(english, vocab_size // 2, split_digits, "nmt_nfkc_cf", [])
    target = train_sentencepiece(german, vocab_size // 2, split_digits, "nmt_nfkc", GERMAN_NUMBER_PARTS)
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for model in (source, target):
        processor = spm.SentencePieceProcessor(model_proto=model)
        for piece in (processor.id_to_piece(i) for i in range(processor.get_piece_size())):
            if piece not in vocab and piece != "<unk>":
                vocab[piece] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=0))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "MarianTokenizer",
                "source_lang": "en",
                "target_lang": "de",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "model_max_length": 512,
                "separate_vocabs": False,
            }
        )
    )
    return folder
