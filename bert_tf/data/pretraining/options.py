"""What create_pretraining_data's instances are made with: the original's instance-creation
flags and the record layout (`InstanceOptions`), and the vocabulary as the ids the compiled code
needs (`VocabIds`).
"""
import dataclasses

import numpy as np

from bert_tf.data.pretraining.record_layout import PretrainingLayout
from bert_tf.errors import arg, argument_error, file_error


# Packed sentence pairs: each of a row's next-sentence slots is a position the last layer
# computes and a prediction the head makes, used or not. More than 8 sequences in a row is
# rare (none of WikiText-2 valid's rows at 128 or 512; 3% of CoNLL-2003's short news documents
# at 512), while the bound from the shortest instance is 25 slots at 128 and 102 at 512.
DEFAULT_MAX_SEQUENCES_PER_ROW = 8


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's instance-creation flags (same names and defaults), and the record layout
    (`PretrainingLayout`'s fields; the defaults are the original's):

      masking: "static" (masks drawn when written) or "dynamic" (`masked_lm_candidates`
        written, masks drawn when read);
      objective: "mlm_nsp" (the original's sentence pairs, half with a random next) or "mlm"
        (one contiguous span of one document per instance, no next-sentence label);
      pack_sequences: several instances per row of exactly max_seq_length tokens, at most
        `max_sequences_per_row` of them (0: as many as the shortest instance allows; with
        next-sentence labels at most DEFAULT_MAX_SEQUENCES_PER_ROW);
      full_windows (objective "mlm" only): each document's tokens, its lines concatenated, cut
        into consecutive windows of max_seq_length - 2 tokens, each instance [CLS] window
        [SEP], a document's last window shorter: no input token is dropped (no short_seq_prob
        draw; `dupe_factor` copies of the same windows, with other static masks);
      cross_documents (with full_windows): RoBERTa's FULL-SENTENCES: all documents in input
        order as one stream, one [SEP] between consecutive documents, cut into full windows
        (`corpus.join_documents`); only the stream's last window is shorter.
    The record layout is the same with or without full windows (`layout`).
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    masking: str = "static"
    objective: str = "mlm_nsp"
    pack_sequences: bool = False
    max_sequences_per_row: int = 0
    full_windows: bool = False
    cross_documents: bool = False

    @property
    def next_sentence(self):
        return self.objective == "mlm_nsp"

    @property
    def is_original(self):
        """The original's records (static masks, sentence pairs, one instance per record)."""
        return self.masking == "static" and self.next_sentence and not self.pack_sequences

    @property
    def shortest_sequence(self):
        """Tokens of the shortest instance: [CLS] A [SEP] B [SEP] or [CLS] A [SEP]."""
        return 5 if self.next_sentence else 3

    @property
    def sequences_per_row(self):
        """Instances in a row: 1 unpacked; packed, `max_sequences_per_row` or (0) as many
        shortest instances as fit, with next-sentence slots at most
        DEFAULT_MAX_SEQUENCES_PER_ROW."""
        if not self.pack_sequences:
            return 1
        fit = self.max_seq_length // self.shortest_sequence
        return self.max_sequences_per_row or (min(fit, DEFAULT_MAX_SEQUENCES_PER_ROW)
                                              if self.next_sentence else fit)

    @property
    def layout(self):
        """The PretrainingLayout of the records these options make."""
        return PretrainingLayout(self.masking, self.next_sentence, self.pack_sequences,
                                 self.sequences_per_row if self.pack_sequences else 0)

    def describe(self):
        """The layout in words, and how instances are cut when it is not the original's."""
        text = self.layout.describe()
        if self.full_windows:
            text += ", full windows" + (" across documents" if self.cross_documents else "")
        return text

    def validate(self):
        """Raises InputError naming the field for values the original would crash on."""
        if self.masking not in ("static", "dynamic"):
            raise argument_error("masking", f"must be static or dynamic, got {self.masking!r}")
        if self.objective not in ("mlm_nsp", "mlm"):
            raise argument_error("objective",
                                 f"must be mlm_nsp or mlm, got {self.objective!r}")
        if self.full_windows and self.next_sentence:
            raise argument_error("full_windows", f"needs {arg('objective')}=mlm (full windows "
                                                 f"are masked-LM only)")
        if self.cross_documents and not self.full_windows:
            raise argument_error("cross_documents", f"needs {arg('full_windows')}")
        self._at_least("max_sequences_per_row", 0, named=1)  # 0: as many as fit
        # [CLS] A [SEP] B [SEP] with A and B non-empty needs max_seq_length - 3 >= 2 (the
        # original's rng.randint(2, max_seq_length - 3) fails below that).
        self._at_least("max_seq_length", 5)
        if self.max_seq_length > 65535:
            raise argument_error("max_seq_length",
                                 f"must be at most 65535, got {self.max_seq_length}")
        self._at_least("max_predictions_per_seq", 1)
        self._at_least("dupe_factor", 1)
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise argument_error("masked_lm_prob", f"must be in the open interval (0, 1), got "
                                                   f"{self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise argument_error("short_seq_prob",
                                 f"must be in [0, 1], got {self.short_seq_prob}")

    def _at_least(self, name, least, named=None):
        """InputError naming field `name` if it is below `least` (the message says `named`)."""
        value = getattr(self, name)
        if value < least:
            raise argument_error(name, f"must be at least {least if named is None else named}, "
                                       f"got {value}")


@dataclasses.dataclass
class VocabIds:
    """What the compiled code needs of the vocabulary, as ids.

    `word_ids[k]` is the id of `list(vocab.keys())[k]` (the original's `vocab_words`, from which
    random replacements are drawn); `is_subword[id]` says whether the token starts with "##"
    (whole-word masking joins such a piece to the previous candidate).
    """

    vocab: dict
    cls_id: int
    sep_id: int
    mask_id: int
    word_ids: np.ndarray
    is_subword: np.ndarray

    @classmethod
    def from_vocab(cls, vocab, vocab_file=None):
        """`vocab_file`: its path, for errors (else they name the vocab_file argument)."""
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in vocab]
        if missing:
            message = f"the vocabulary has no {', '.join(missing)} token"
            raise (file_error(vocab_file, message) if vocab_file
                   else argument_error("vocab_file", message))
        word_ids = np.fromiter(vocab.values(), dtype=np.int32, count=len(vocab))
        is_subword = np.zeros(int(word_ids.max()) + 1, dtype=np.bool_)
        for token, index in vocab.items():
            is_subword[index] = token.startswith("##")
        return cls(vocab, vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], word_ids, is_subword)
