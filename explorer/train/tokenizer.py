"""A SentencePiece tokenizer in the layout Hugging Face's MarianTokenizer reads.

A Marian folder holds ``source.spm`` and ``target.spm`` (here one shared model, as both
sides share one vocabulary) and ``vocab.json``, which maps pieces to ids. The special
tokens come first: ``</s>`` = 0, ``<unk>`` = 1, ``<pad>`` = 2 (the decoder start token).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterable
from pathlib import Path

SPECIALS = ["</s>", "<unk>", "<pad>"]


def build_marian_tokenizer(texts: Iterable[str], folder: Path, vocab_size: int, split_digits: bool = False) -> Path:
    """Train a unigram SentencePiece model on ``texts`` and write a MarianTokenizer folder.

    ``split_digits`` makes every digit its own piece, so that unseen numbers are spelled from
    pieces the model has seen.
    """
    import sentencepiece as spm

    folder.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(texts)),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
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
    (folder / "source.spm").write_bytes(model.getvalue())
    shutil.copyfile(folder / "source.spm", folder / "target.spm")
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for piece in pieces:
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
