"""What a vocabulary must hold to be written as another library's BERT tokenizer (the
huggingface and keras_hub formats): each special token, as a vocabulary entry of its own."""
from bert_tf.errors import argument_error

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def check_special_tokens(vocab_file, tokens, tokenizer_name):
    """InputError naming vocab_file unless `tokens` (its entries) hold every SPECIAL_TOKENS,
    which `tokenizer_name` needs (transformers would add a missing one as a new id beyond the
    embedding table; keras-hub refuses it)."""
    missing = [token for token in SPECIAL_TOKENS if token not in tokens]
    if missing:
        raise argument_error("vocab_file", f"{vocab_file} has no {missing[0]} token, which "
                                           f"{tokenizer_name} requires "
                                           f"({', '.join(SPECIAL_TOKENS)})")
