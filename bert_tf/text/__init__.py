"""Text to word pieces beyond the original's `bert_tf.tokenization`: the fast tokenizer (same
tokens, with character offsets), the in-graph tokenizer of the SavedModels (core TF ops), and
vocabulary learning (build_vocab)."""
