"""BERT fine-tuning for sentence (pair) classification: the original's run_classifier on TF2.

    python -m run.run_classifier --task_name=MRPC --data_dir=glue_data/MRPC \\
        --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
        --init_checkpoint=bert_model.ckpt --output_dir=out --do_train --do_eval --do_predict

Same flags, defaults, processors, records (train.tf_record, eval.tf_record, predict.tf_record
in --output_dir), model, loss, optimizer and outputs (eval_results.txt, test_results.tsv) as
google-research/bert's run_classifier.py, plus: the GLUE tasks it lacks (SST-2, QNLI, QQP, RTE,
STS-B as regression, WNLI, MNLI mismatched) and the task's GLUE metric (F1, Matthews
correlation, Pearson/Spearman); a user's own TSV or CSV files with --task_name=tsv, or JSON
Lines files with --task_name=jsonl, and the column flags; multi-label tasks on such files
(--multi_label: several labels per row, sigmoid outputs, --threshold); long texts in windows (--doc_stride, --window_pooling); per-class
precision, recall and F1 and a confusion matrix; a model directory as --init_checkpoint (a
Hugging Face directory, Google's released folder, or the output_dir of a training run: its
config, vocabulary and casing, and a classifier run's labels, are used unless flags say
otherwise, and flags that contradict them are errors); the strategy, precision and optimizer
flags of run_pretraining; length bucketing (--bucket_by_length).

The number of training steps is int(train examples / train_batch_size * num_train_epochs), with
warmup_proportion of them warming up, as the original (with --doc_stride: training windows).
Eval and predict sets are padded with the original's padding examples to a multiple of the
batch size (the original does so on TPU only), so every example is evaluated once; the
reported numbers are the original's (see bert_tf.tasks.classification). This file is the
flags; the task, and how the files become its records, are `bert_tf.tasks.classification`
(`prepare_task`: the API's too), its records `bert_tf.tasks.classification.preprocessor`, the
driver `bert_tf.training.runner.run`.
"""
from absl import flags

from bert_tf.cli import run_main
from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_run_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=8,
                              learning_rate=5e-5, fine_tuning=True)
flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) "
                    "for the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train (cola, mnli, mnli-mm, "
                    "mrpc, xnli, sst-2, qnli, qqp, rte, sts-b, wnli; your own files, see the "
                    "column flags: tsv for TSV or CSV, jsonl for JSON Lines).")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated (or, with --doc_stride, split "
                     "into windows), and sequences shorter than this will be padded.")
flags.DEFINE_integer("doc_stride", None,
                     "Texts longer than --max_seq_length are split into overlapping windows "
                     "starting this many WordPiece tokens apart (a pair: its second text, beside "
                     "the first), instead of truncated; eval and predict combine each example's "
                     "windows (--window_pooling). Less than max_seq_length - 2. Default: off, "
                     "the original's truncation.")
flags.DEFINE_enum("window_pooling", None, ["mean", "max"],
                  "--doc_stride: how an example's windows' logits combine: mean (default) or "
                  "max.")
# ---- --task_name=tsv or jsonl: the user's own files.
flags.DEFINE_string("text_a_column", None, "tsv: column of the first text (0-based index, or a "
                    "header name with --skip_header); jsonl: its field (default: text).")
flags.DEFINE_string("text_b_column", None, "tsv, jsonl: column or field of the second text "
                    "(pair tasks).")
flags.DEFINE_string("label_column", None, "tsv: column of the label (test files may lack it); "
                    "jsonl: its field (default: label).")
flags.DEFINE_list("label_list", None, "tsv, jsonl: the labels, comma-separated, in output order "
                  "(default: the sorted labels of the training file).")
flags.DEFINE_bool("skip_header", False, "tsv: the first line of each file is a header.")
common_flags.define_delimiter_flag()
flags.DEFINE_bool("regression", False, "tsv, jsonl: the label is a real number (one output).")
common_flags.define_split_file_flags(scope="tsv, jsonl: ",
                                     task_defaults="{split}.tsv; jsonl: {split}.jsonl")
flags.DEFINE_bool("multi_label", False, "tsv, jsonl: each row has any number of the labels, "
                  "joined by --label_separator in the label column (an empty field: none; "
                  "jsonl: a list); a sigmoid per label, binary cross-entropy, the labels over "
                  "--threshold predicted.")
flags.DEFINE_string("label_separator", ",", "tsv, jsonl --multi_label: what joins a row's labels.")
flags.DEFINE_list("threshold", None, "--multi_label: the probability a label must exceed to be "
                  "predicted: one number for all labels, or one per label in --label_list order, "
                  "comma-separated; each in (0, 1) (default: 0.5).")
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too


def file_options():
    return dict(text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
                label_column=FLAGS.label_column, label_list=FLAGS.label_list,
                skip_header=FLAGS.skip_header, regression=FLAGS.regression,
                delimiter=FLAGS.delimiter,
                train_file=FLAGS.train_file, dev_file=FLAGS.dev_file, test_file=FLAGS.test_file,
                multi_label=FLAGS.multi_label, label_separator=FLAGS.label_separator)


def main(argv):
    del argv
    common_flags.check_required("data_dir", "task_name", "output_dir")
    common_flags.check_settings()
    # The library (and TensorFlow) after the flags are checked: --help and flag errors come
    # without TensorFlow's start-up.
    from bert_tf.tasks.classification import reader, task as classification
    from bert_tf.api import load_tokenizer

    common_flags.start_strategy()
    files = common_flags.fine_tuning_model_files("classifier")
    own_files = reader.reads_user_files(FLAGS.task_name)
    # A model directory of a classifier's run gives the labels and how to read them: the
    # column flags' defaults for the user's files (a named task has its own, checked below).
    common_flags.flags_from_model(
        files, "classifier", {"threshold": "thresholds", **({
            "label_list": "labels", "multi_label": "multi_label", "regression": "regression"}
            if own_files else {})}, agree=("label_list", "multi_label", "regression"))
    processor = reader.get_processor(FLAGS.task_name, **file_options())
    label_list = processor.get_labels(FLAGS.data_dir)  # None: regression
    if not own_files:
        for key, value in (("regression", label_list is None), ("labels", label_list),
                           ("multi_label", processor.is_multi_label)):
            common_flags.check_recorded(files, "classifier", key, value, "task_name")
    examples = common_flags.read_splits(processor)
    prepared = classification.prepare_task(
        files.config, examples, label_list,
        load_tokenizer(files),
        FLAGS.max_seq_length, FLAGS.output_dir, task_name=FLAGS.task_name,
        original_pads_eval=FLAGS.use_tpu, bucket_by_length=FLAGS.bucket_by_length,
        multi_label=processor.is_multi_label, threshold=FLAGS.threshold,
        doc_stride=FLAGS.doc_stride, window_pooling=FLAGS.window_pooling,
        **common_flags.preparation_options())
    common_flags.run_prepared(prepared, files)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
