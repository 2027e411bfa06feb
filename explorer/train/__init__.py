"""How the shipped translator is made: data, tokenizer and training (uses transformers)."""
