"""The served masked LM's preprocessor: raw texts in which the literal "[MASK]" is the mask
token, packed in the graph (`MaskedTextPreprocessor`). The records are create_pretraining_data's
(`bert_tf.data.pretraining`, streamed without TensorFlow, not through `prepare`).
"""
import tensorflow as tf

from bert_tf.tasks.preprocessor import Preprocessor


class MaskedTextPreprocessor(Preprocessor):
    """Packs served texts for the masked LM (`masked_text_inputs`); `mask_id` is the
    vocabulary's [MASK]."""

    def __init__(self, tokenizer, max_seq_length, mask_id):
        super().__init__(tokenizer, max_seq_length)
        self.mask_id = mask_id

    def masked_text_inputs(self, text):
        """[B] texts in the graph: the parts around each literal "[MASK]" (upper case, as is)
        tokenized as usual (the original's BasicTokenizer would split "[MASK]" into "[",
        "mask", "]"), the [MASK] id between them, packed as one text cut to the batch's
        longest: int32 [B, T] input_ids, input_mask, segment_ids."""
        tokenizer = self.tokenizer
        parts = tf.strings.split(text, sep="[MASK]")  # n parts around n - 1 masks
        pieces = parts.with_flat_values(tokenizer.tokenize(parts.flat_values))
        per_part = pieces.values  # [parts, (pieces)]
        lengths = per_part.row_lengths()
        last = tf.equal(tf.range(tf.size(lengths), dtype=tf.int64) + 1,
                        tf.gather(parts.row_limits(), parts.value_rowids()))
        with_mask = tf.concat([per_part, tf.fill([per_part.nrows(), 1], self.mask_id)], axis=1)
        keep = lengths + tf.cast(~last, tf.int64)  # the last part gets no [MASK] after it
        per_part = tf.ragged.boolean_mask(
            with_mask, tf.ragged.range(lengths + 1) < tf.expand_dims(keep, 1))
        ids = pieces.with_values(per_part).merge_dims(1, 2)
        return tokenizer.pack(ids, max_seq_length=self.max_seq_length, pad_to_longest=True)
