"""BERT fine-tuning for token classification (NER) on CoNLL files, in run_classifier's style.

    python -m run.run_ner --data_dir=conll2003 --vocab_file=vocab.txt \\
        --bert_config_file=bert_config.json --init_checkpoint=bert_model.ckpt \\
        --output_dir=out --do_train --do_eval --do_predict

Files in --data_dir (names set by --train_file, --dev_file, --test_file): one `word ... tag`
line per word (the tag is the last column; a test file may have the word only), `-DOCSTART-`
lines and a blank line between sentences, as CoNLL-2003. Labels are the training file's tags
("O" first) unless --label_list gives them. Each word's first WordPiece carries its tag; longer
sentences are split into overlapping windows, each word scored once
(bert_tf.tasks.ner.preprocessor).

Outputs in --output_dir: train/eval/predict.tf_record; eval_results.txt with entity-level
precision, recall and F1 as conlleval computes them (--tag_scheme IOB2 or IOB1), per-type F1,
word accuracy and loss; eval_predictions.txt and test_predictions.txt (`word gold predicted`,
conlleval's input). --feature_layers trains a BiLSTM tagger on a frozen encoder's layers
instead (the paper's feature-based approach). The shared training flags (strategy, precision,
optimizer, checkpoints) are run_classifier's. This file is the flags; the task, and how the
files become its records, are `bert_tf.tasks.ner.task` (`NerTask`, `prepare_task`).
"""
from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_run_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=8,
                              learning_rate=5e-5, fine_tuning=True)
flags.DEFINE_string("data_dir", None, "The directory of the CoNLL files.")
common_flags.define_split_file_flags("train.txt", "valid.txt", "test.txt")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input length in WordPiece tokens; longer sentences are "
                     "split into overlapping windows.")
flags.DEFINE_integer("doc_stride", None, "Pieces between the starts of a long sentence's "
                     "windows (default: half a window); less than the window, max_seq_length - 2.")
flags.DEFINE_list("label_list", None, "The tags, comma-separated, in output order (default: "
                  "the training file's, \"O\" first; required to predict without training data).")
flags.DEFINE_enum("tag_scheme", "IOB2", ["IOB2", "IOB1", "IOBES"],
                  "How entities are read from the tags for evaluation (conlleval reads IOB1 and "
                  "IOB2 alike).")
flags.DEFINE_string("feature_layers", None, "The paper's feature-based approach (section 5.3): "
                    "the encoder frozen, these of its layers under a two-layer BiLSTM: last, "
                    "second_to_last, embeddings, sum_last_four, concat_last_four or sum_all "
                    "(default: fine-tuning, the encoder trained with the head).")
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too


def main(argv):
    del argv
    common_flags.check_required("data_dir", "output_dir")
    common_flags.check_settings()
    # The library (and TensorFlow) after the flags are checked: --help and flag errors come
    # without TensorFlow's start-up.
    from bert_tf.tasks.ner import task as tagging
    from bert_tf.api import load_tokenizer

    common_flags.start_strategy()
    files = common_flags.fine_tuning_model_files("ner")
    # A model directory of a tagger's run gives its tags (and their scheme).
    common_flags.flags_from_model(files, "ner", {"label_list": "labels", "tag_scheme": "scheme",
                                                 "feature_layers": "feature_layers"},
                                  agree=("label_list", "feature_layers"))
    if not FLAGS.label_list and not FLAGS.do_train:
        raise flag_error("label_list", "is required without --do_train (the tags in output "
                                       "order, as the model was trained)")
    prepared = tagging.prepare_task(
        files.config, load_tokenizer(files),
        FLAGS.max_seq_length, FLAGS.output_dir, data_dir=FLAGS.data_dir,
        train_file=FLAGS.train_file if FLAGS.do_train else None,
        dev_file=FLAGS.dev_file if FLAGS.do_eval else None,
        test_file=FLAGS.test_file if FLAGS.do_predict else None,
        label_list=FLAGS.label_list, doc_stride=FLAGS.doc_stride,
        scheme=FLAGS.tag_scheme, feature_layers=FLAGS.feature_layers,
        bucket_by_length=FLAGS.bucket_by_length,
        **common_flags.preparation_options())
    common_flags.run_prepared(prepared, files)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
