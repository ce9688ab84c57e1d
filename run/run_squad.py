"""BERT fine-tuning for SQuAD 1.1 and 2.0 question answering: the original's run_squad on TF2.

    python -m run.run_squad --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
        --init_checkpoint=bert_model.ckpt --output_dir=out \\
        --do_train --train_file=train-v1.1.json --do_predict --predict_file=dev-v1.1.json

Same flags, defaults, preprocessing (bert_tf.tasks.squad.preprocessor: windows of max_seq_length
moved by doc_stride, questions cut to max_query_length, `_improve_answer_span`,
`_check_is_max_context`, unique ids from 1000000000, training examples shuffled with
random.Random(12345)), records (train.tf_record and eval.tf_record in --output_dir), model, loss,
optimizer and output files (predictions.json, nbest_predictions.json, and null_odds.json with
--version_2_with_negative; bert_tf.tasks.squad.postprocess) as google-research/bert's run_squad.py,
plus: the official evaluation's numbers in eval_results.txt when --predict_file has answers (exact
match and F1; SQuAD 2.0 HasAns/NoAns and best thresholds; bert_tf.tasks.squad.metrics), --do_eval
(those numbers without the prediction files; with --eval_during_training after every checkpoint,
for the best checkpoint by F1 and early stopping), a count of
the training answers skipped because their text is not at their offset (the original only warns),
the time post-processing takes, a model directory as --init_checkpoint (a Hugging Face directory, or
a training run's output_dir, whose options are then the defaults), and the strategy, precision and
optimizer flags of run_pretraining.

The number of training steps is int(training questions / train_batch_size * num_train_epochs)
(questions, not windows, as the original). This file is the flags; the task, and how the files
become its records, are `bert_tf.tasks.squad.task` (`SquadTask`, `prepare_task`), the driver
`bert_tf.training.runner.run`.
"""
from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_run_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=8,
                              learning_rate=5e-5, fine_tuning=True)
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too

flags.DEFINE_string("train_file", None,
                    "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None,
                    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_integer("max_seq_length", 384,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter than "
                     "this will be padded.")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into chunks, how much stride to take "
                     "between chunks.")
flags.DEFINE_integer("max_query_length", 64,
                     "The maximum number of tokens for the question. Questions longer than this "
                     "will be truncated to this length.")
flags.DEFINE_integer("n_best_size", 20,
                     "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30,
                     "The maximum length of an answer that can be generated. This is needed "
                     "because the start and end predictions are not conditioned on one another.")
flags.DEFINE_bool("verbose_logging", False,
                  "If true, all of the warnings related to data processing will be printed. "
                  "A number of warnings are expected for a normal SQuAD evaluation.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "If null_score - best_non_null is greater than the threshold predict null.")


def check_flags():
    """The original's validate_flags_or_throw, plus what it leaves to a traceback."""
    if FLAGS.bucket_by_length:
        raise flag_error("bucket_by_length", "not for run_squad: the original's loss and n-best "
                                             "include the padding positions")
    if FLAGS.do_train:
        common_flags.check_required("train_file")
    if FLAGS.do_predict or FLAGS.do_eval:
        common_flags.check_required("predict_file")


def main(argv):
    del argv
    common_flags.check_required("output_dir")
    check_flags()
    common_flags.check_settings()
    # The library (and TensorFlow) after the flags are checked: --help and flag errors come
    # without TensorFlow's start-up.
    from bert_tf.tasks.squad import task as squad
    from bert_tf.api import load_tokenizer

    common_flags.start_strategy()
    files = common_flags.fine_tuning_model_files("squad")
    # A model directory of a SQuAD run: its options are the defaults.
    common_flags.flags_from_model(files, "squad", {name: name for name in (
        "max_query_length", "n_best_size", "max_answer_length", "version_2_with_negative")})
    do_lower_case = files.do_lower_case
    prepared = squad.prepare_task(
        files.config, load_tokenizer(files),
        FLAGS.max_seq_length, FLAGS.output_dir,
        train_file=FLAGS.train_file if FLAGS.do_train else None,
        predict_file=FLAGS.predict_file if FLAGS.do_predict or FLAGS.do_eval else None,
        evaluate=FLAGS.do_eval,
        doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
        version_2_with_negative=FLAGS.version_2_with_negative,
        verbose_logging=FLAGS.verbose_logging, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, do_lower_case=do_lower_case,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold,
        **common_flags.preparation_options())
    common_flags.run_prepared(prepared, files)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
