"""BERT fine-tuning for multiple choice: the paper's SWAG task, or your TSV/CSV of questions.

    python -m run.run_multiple_choice --task_name=swag --data_dir=swagaf/data \\
        --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
        --init_checkpoint=bert_model.ckpt --output_dir=out --do_train --do_eval

Each question is a context and N endings; each `[CLS] context [SEP] ending [SEP]` is scored by
one vector on the pooled output, and the N scores are softmaxed (bert_tf.tasks.multiple_choice;
transformers' BertForMultipleChoice, whose checkpoints load as --init_checkpoint). The original
release has no script for it; this one is run_classifier's flags, records and outputs
(train/eval/predict.tf_record, eval_results.txt with eval_accuracy, test_results.tsv with N
probabilities per question) with the paper's SWAG defaults: batch size 16, learning rate 2e-5,
3 epochs.

--task_name=swag reads SWAG's train.csv, val.csv and test.csv (github.com/rowanz/swagaf data/):
context sent1, endings sent2 + " " + ending0..3, label (bert_tf.tasks.multiple_choice.reader).
--task_name=tsv reads your files, described by the column flags: a context column, the ending
columns (N of them), an optional column that starts every ending, and the label (the right
ending's 0-based index; test files need none). This file is the flags; the task and its records
are bert_tf.tasks.multiple_choice.task (`prepare_task`), the data
bert_tf.tasks.multiple_choice.reader.
"""
from absl import flags

from bert_tf.cli import run_main
from . import common_flags

FLAGS = flags.FLAGS

# The paper's SWAG fine-tuning (section 4.4): 3 epochs, learning rate 2e-5, batch size 16.
common_flags.define_run_flags(train_batch_size=16, eval_batch_size=8, predict_batch_size=8,
                              learning_rate=2e-5, fine_tuning=True)
flags.DEFINE_string("data_dir", None, "The directory of the task's files.")
flags.DEFINE_string("task_name", None, "swag (SWAG's train.csv, val.csv, test.csv) or tsv (your "
                    "files, see the column flags).")
flags.DEFINE_integer("max_seq_length", 128,
                     "The length of each packed [CLS] context [SEP] ending [SEP] after WordPiece "
                     "tokenization: longer pairs are truncated (the longer part first), shorter "
                     "ones padded. A question takes N times this.")
# ---- --task_name=tsv: the user's own files.
flags.DEFINE_string("context_column", None, "tsv: column of the context (0-based index, or a "
                    "header name with --skip_header).")
flags.DEFINE_list("ending_columns", None, "tsv: the columns of the N endings, comma-separated, "
                  "in the order the label counts them.")
flags.DEFINE_string("ending_prefix_column", None, "tsv: a column whose text starts every ending "
                    "(SWAG's sent2): each ending is this text, a space and the ending.")
flags.DEFINE_string("label_column", None, "tsv: column of the right ending's 0-based index "
                    "(test files may lack it).")
flags.DEFINE_bool("skip_header", False, "tsv: the first line of each file is a header.")
common_flags.define_delimiter_flag()
common_flags.define_split_file_flags(scope="tsv: ", task_defaults="{split}.tsv")
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too


def file_options():
    return dict(context_column=FLAGS.context_column, ending_columns=FLAGS.ending_columns,
                ending_prefix_column=FLAGS.ending_prefix_column,
                label_column=FLAGS.label_column, skip_header=FLAGS.skip_header,
                delimiter=FLAGS.delimiter,
                train_file=FLAGS.train_file, dev_file=FLAGS.dev_file, test_file=FLAGS.test_file)


def main(argv):
    del argv
    common_flags.check_required("data_dir", "task_name", "output_dir")
    common_flags.check_settings()
    # The library (and TensorFlow) after the flags are checked: --help and flag errors come
    # without TensorFlow's start-up.
    from bert_tf.tasks.multiple_choice import reader, task as multiple_choice
    from bert_tf.api import load_tokenizer

    processor = reader.get_processor(FLAGS.task_name, **file_options())
    common_flags.start_strategy()
    files = common_flags.fine_tuning_model_files("multiple_choice")
    examples = common_flags.read_splits(processor)
    prepared = multiple_choice.prepare_task(
        files.config, examples, processor.num_choices,
        load_tokenizer(files), FLAGS.max_seq_length,
        FLAGS.output_dir, bucket_by_length=FLAGS.bucket_by_length,
        **common_flags.preparation_options())
    common_flags.run_prepared(prepared, files)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
