"""Adds a corpus's domain words to a released vocabulary (and, appending, to its checkpoint).

    # In the [unusedN] slots: same ids for every other token, the checkpoint as it is.
    python -m data_tools.extend_vocab --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \\
        --input_file='domain/*.txt' --output_vocab_file=domain_vocab.txt --num_words=500

    # Appended: the checkpoint's embedding matrix (and masked-LM output bias) grows a row per
    # word, initialised as the original initialises it; a model folder is written.
    python -m data_tools.extend_vocab --mode=append --init_checkpoint=uncased_L-12_H-768_A-12 \\
        --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json \\
        --vocab_file=uncased_L-12_H-768_A-12/vocab.txt --input_file='domain/*.txt' \\
        --num_words=2000 --output_dir=domain_model   # bert_model.ckpt, bert_config.json, vocab.txt

The words are the corpus's basic tokens (as the tokenizer sees them: lower-cased for uncased
models, punctuation split) that WordPiece splits into the most pieces over the corpus:
count * (pieces - 1), at least --min_count occurrences (bert_tf/text/vocab_extension.py says
why). Each added word is one piece for the tokenizer. Progress and a summary (each word, its
id, count and former pieces) go to stderr; the files appear only when complete.
"""
import os

from absl import flags

from bert_tf.cli import expand_globs, run_main
from bert_tf.errors import flag_error
from bert_tf.io_utils import check_output_file

flags.DEFINE_string("vocab_file", None, "The vocabulary to extend (default for a Hugging Face "
                    "--init_checkpoint: its vocab.txt).")
flags.DEFINE_string("input_file", None, "The domain corpus: text files, comma-separated globs.")
flags.DEFINE_string("output_vocab_file", None, "The extended vocabulary to write (default with "
                    "--mode=append: OUTPUT_DIR/vocab.txt).")
flags.DEFINE_enum("mode", "unused", ["unused", "append"],
                  "unused: the words replace [unusedN] lines (lowest id first), every other id "
                  "and the checkpoint stay valid as they are. append: the words are new lines "
                  "at the end, and --init_checkpoint is resized into --output_dir.")
flags.DEFINE_integer("num_words", 100, "How many words to add (the best ones; fewer if the "
                     "corpus has fewer). With --mode=unused, at most the free [unusedN] slots.")
flags.DEFINE_integer("min_count", 2, "Words seen fewer times in the corpus are not added.")
flags.DEFINE_bool("do_lower_case", True, "Whether the vocabulary is uncased (lower-case and "
                  "strip accents before counting words), as the tokenizer that uses it.")
flags.DEFINE_string("init_checkpoint", None, "--mode=append: the checkpoint to resize (the "
                    "original's, ours, or a Hugging Face directory).")
flags.DEFINE_string("bert_config_file", None, "--mode=append: its config (default for a Hugging "
                    "Face --init_checkpoint: its config.json).")
flags.DEFINE_string("output_dir", None, "--mode=append: a new or empty folder for "
                    "bert_model.ckpt (the original naming) and bert_config.json (the new "
                    "vocab_size).")
flags.DEFINE_integer("random_seed", 12345, "--mode=append: seed of the new embedding rows.")

FLAGS = flags.FLAGS


def main(argv):
    del argv

    if not FLAGS.input_file:
        raise flag_error("input_file", "is required")
    append = FLAGS.mode == "append"
    if append and not FLAGS.init_checkpoint:
        raise flag_error("init_checkpoint", "required with --mode=append (the checkpoint gets "
                                            "a row per new word)")
    if append and not FLAGS.output_dir:
        raise flag_error("output_dir", "required with --mode=append: a new or empty folder for "
                                       "the resized checkpoint, its config and vocab.txt")
    config, vocab_file, do_lower_case = None, FLAGS.vocab_file, FLAGS.do_lower_case
    if append:
        from bert_tf.api import resolve_model_files
        files = resolve_model_files(FLAGS.init_checkpoint, FLAGS.bert_config_file,
                                    FLAGS.vocab_file, FLAGS.do_lower_case,
                                    FLAGS["do_lower_case"].present)
        config, vocab_file, do_lower_case = files.config, files.vocab_file, files.do_lower_case
    elif not vocab_file:
        raise flag_error("vocab_file", "is required")
    output_vocab_file = FLAGS.output_vocab_file
    if not output_vocab_file and append and FLAGS.output_dir:
        output_vocab_file = os.path.join(FLAGS.output_dir, "vocab.txt")
    if not output_vocab_file:
        raise flag_error("output_vocab_file", "is required")
    input_files = expand_globs(FLAGS.input_file, "input_file")
    check_output_file(output_vocab_file, "output_vocab_file",
                      inputs={"vocab_file": vocab_file, "input_file": input_files})
    from bert_tf.model.extended_vocab import extend_vocab
    extend_vocab(vocab_file, input_files, output_vocab_file, mode=FLAGS.mode,
                 num_words=FLAGS.num_words, min_count=FLAGS.min_count,
                 do_lower_case=do_lower_case, init_checkpoint=FLAGS.init_checkpoint,
                 bert_config=config, output_dir=FLAGS.output_dir, seed=FLAGS.random_seed)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
