"""Learns a WordPiece vocabulary (BERT's vocab.txt layout) from text files.

    python -m data_tools.build_vocab --input_file=corpus/*.txt --output_file=vocab.txt \\
        --vocab_size=30522 --do_lower_case=True

Words are split exactly as the tokenizer's BasicTokenizer splits them, then Hugging Face
`tokenizers`' WordPiece trainer learns the pieces (see bert_tf/text/vocab_learning.py). The output has
[PAD], --num_unused [unused*] entries, [UNK], [CLS], [SEP], [MASK], the alphabet, then the pieces,
and is used as --vocab_file by create_pretraining_data and the run/ scripts (with the same
--do_lower_case).
"""
from absl import flags

from bert_tf.cli import expand_globs, run_main
from bert_tf.errors import flag_error
from bert_tf.io_utils import check_output_file

flags.DEFINE_string("input_file", None,
                    "Input text files, one sentence or paragraph per line (comma-separated "
                    "globs, as in create_pretraining_data).")
flags.DEFINE_string("output_file", None, "Vocabulary file to write (one token per line).")
flags.DEFINE_integer("vocab_size", 30522,
                     "Number of entries in the vocabulary, special tokens included (fewer only "
                     "if the corpus has fewer useful pieces).")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case and strip accents before learning (for uncased models); use the "
                  "same value when tokenizing with the vocabulary.")
flags.DEFINE_integer("num_unused", 10,
                     "Number of [unused*] placeholder entries between [PAD] and [UNK] (free slots "
                     "for task-specific tokens). 99 gives [UNK]/[CLS]/[SEP]/[MASK] the ids "
                     "100-103 of the released BERT vocabularies.")
flags.DEFINE_integer("min_frequency", 2,
                     "Minimum count of a pair of pieces for the trainer to merge it.")
flags.DEFINE_integer("limit_alphabet", 1000,
                     "Maximum number of distinct characters kept (the most frequent); words with "
                     "other characters become [UNK].")

FLAGS = flags.FLAGS


def main(argv):
    del argv
    for name in ("input_file", "output_file"):
        if not getattr(FLAGS, name):
            raise flag_error(name, "is required")
    input_files = expand_globs(FLAGS.input_file, "input_file")
    check_output_file(FLAGS.output_file, "output_file", inputs={"input_file": input_files})
    # The library (and TensorFlow) once the flags are checked: --help and flag errors come
    # without TensorFlow's start-up.
    from bert_tf.text.vocab_learning import build_vocab

    build_vocab(input_files, FLAGS.output_file, FLAGS.vocab_size,
                do_lower_case=FLAGS.do_lower_case, num_unused=FLAGS.num_unused,
                min_frequency=FLAGS.min_frequency, limit_alphabet=FLAGS.limit_alphabet)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
