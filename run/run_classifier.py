"""BERT fine-tuning for sentence (pair) classification: the original's run_classifier on TF2.

    python -m run.run_classifier --task_name=MRPC --data_dir=glue_data/MRPC \\
        --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
        --init_checkpoint=bert_model.ckpt --output_dir=out --do_train --do_eval --do_predict

Same flags, defaults, processors, records (train.tf_record, eval.tf_record, predict.tf_record
in --output_dir), model, loss, optimizer and outputs (eval_results.txt, test_results.tsv) as
google-research/bert's run_classifier.py, plus: the GLUE tasks it lacks (SST-2, QNLI, QQP, RTE,
STS-B as regression, WNLI, MNLI mismatched) and the task's GLUE metric (F1, Matthews
correlation, Pearson/Spearman); a user's own TSV or CSV files with --task_name=tsv and the
column flags; a Hugging Face model directory as --init_checkpoint (its config, vocabulary and
casing are used unless flags say otherwise); the strategy, precision and optimizer flags of
run_pretraining; length bucketing (--bucket_by_length).

The number of training steps is int(train examples / train_batch_size * num_train_epochs), with
warmup_proportion of them warming up, as the original. Eval and predict sets are padded with
the original's padding examples to a multiple of the batch size (the original does so on TPU
only), so every example is evaluated once; the reported numbers are the original's (see
bert_tf.tasks.classification). This file is the flags; the task is
`bert_tf.tasks.classification.ClassificationTask`, the data `bert_tf.tasks.classifier_data`, the driver
`bert_tf.training.runner.run`.
"""
import os

from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_run_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=8,
                              learning_rate=5e-5, fine_tuning=True)
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too
flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) "
                    "for the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train (cola, mnli, mnli-mm, "
                    "mrpc, xnli, sst-2, qnli, qqp, rte, sts-b, wnli; tsv: your own files, see the "
                    "column flags).")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter than "
                     "this will be padded.")
# ---- --task_name=tsv: the user's own files.
flags.DEFINE_string("text_a_column", None, "tsv: column of the first text (0-based index, or a "
                    "header name with --skip_header).")
flags.DEFINE_string("text_b_column", None, "tsv: column of the second text (pair tasks).")
flags.DEFINE_string("label_column", None, "tsv: column of the label (test files may lack it).")
flags.DEFINE_list("label_list", None, "tsv: the labels, comma-separated, in output order "
                  "(default: the sorted labels of the training file).")
flags.DEFINE_bool("skip_header", False, "tsv: the first line of each file is a header.")
flags.DEFINE_enum("delimiter", "tab", ["tab", "comma"], "tsv: tab-separated (read as the "
                  "original: quotes are plain characters) or comma-separated (CSV quoting).")
flags.DEFINE_bool("regression", False, "tsv: the label is a real number (one output).")
flags.DEFINE_string("train_file", "train.tsv", "tsv: training file name in --data_dir.")
flags.DEFINE_string("dev_file", "dev.tsv", "tsv: dev (eval) file name in --data_dir.")
flags.DEFINE_string("test_file", "test.tsv", "tsv: test (predict) file name in --data_dir.")



def tsv_options():
    return dict(text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
                label_column=FLAGS.label_column, label_list=FLAGS.label_list,
                skip_header=FLAGS.skip_header, regression=FLAGS.regression,
                delimiter={"tab": "\t", "comma": ","}[FLAGS.delimiter],
                train_file=FLAGS.train_file, dev_file=FLAGS.dev_file, test_file=FLAGS.test_file)


def write_records(name, examples, label_list, tokenizer, regression, batch_size=None):
    """Writes output_dir/<name>.tf_record (padded to a multiple of batch_size if given);
    returns (path, records written, real examples)."""
    from bert_tf.tasks import classifier_data
    from bert_tf.training import runner

    num_real = len(examples)
    if batch_size:
        examples, num_real = classifier_data.pad_examples(examples, batch_size)
    path = os.path.join(FLAGS.output_dir, f"{name}.tf_record")
    count = classifier_data.write_classifier_records(examples, label_list, FLAGS.max_seq_length,
                                                     tokenizer, path, regression)
    runner.log(f"  {name}: {num_real} examples (+{count - num_real} padding) -> {path}")
    return path, count, num_real


def read_splits(processor):
    """{split: examples} of every split the run needs, all read (and checked) before any
    record is written."""
    readers = {"train": (FLAGS.do_train, processor.get_train_examples, FLAGS.train_file),
               "eval": (FLAGS.do_eval, processor.get_dev_examples, FLAGS.dev_file),
               "predict": (FLAGS.do_predict, processor.get_test_examples, FLAGS.test_file)}
    splits = {}
    for name, (wanted, read, file_name) in readers.items():
        if not wanted:
            continue
        splits[name] = read(FLAGS.data_dir)
        if not splits[name]:
            raise flag_error("data_dir", f"the {name} split holds no examples"
                             + (f" ({file_name})" if FLAGS.task_name.lower() == "tsv" else ""))
    return splits


def main(argv):
    del argv
    import tensorflow as tf

    from bert_tf import io_utils
    from bert_tf.tasks import classifier_data
    from bert_tf.training import runner
    from bert_tf.tasks.classification import TASK_METRICS, ClassificationTask
    from bert_tf.text.fast_tokenization import FastTokenizer

    common_flags.check_required("data_dir", "task_name", "output_dir")
    common_flags.start_strategy()
    bert_config, vocab_file, do_lower_case = common_flags.fine_tuning_model_files()
    processor = classifier_data.get_processor(FLAGS.task_name, **tsv_options())
    task_name = FLAGS.task_name.strip().lower()
    regression = processor.is_regression
    label_list = (None if regression else
                  (processor.get_labels(FLAGS.data_dir) if task_name == "tsv"
                   else processor.get_labels()))
    num_labels = 1 if regression else len(label_list)
    splits = read_splits(processor)
    common_flags.check_init_checkpoint(lambda: ClassificationTask(
        bert_config, num_labels, {}, FLAGS.max_seq_length).build_model())
    tokenizer = FastTokenizer(vocab_file, do_lower_case=do_lower_case)

    runner.log(f"*** task {task_name}: "
               + ("regression" if regression else f"{len(label_list)} labels {label_list}"))
    record_files, num_records = {}, {}
    num_train_steps = num_warmup_steps = 0
    batch_sizes = {"train": None, "eval": FLAGS.eval_batch_size,
                   "predict": FLAGS.predict_batch_size}
    with io_utils.removed_on_failure(FLAGS.output_dir):
        tf.io.gfile.makedirs(FLAGS.output_dir)
        if FLAGS.do_train:
            num_train_steps, num_warmup_steps = common_flags.epoch_steps(len(splits["train"]))
        for name, examples in splits.items():
            record_files[name], count, _ = write_records(name, examples, label_list, tokenizer,
                                                         regression, batch_sizes[name])
            if name != "train":
                num_records[name] = count

    task = ClassificationTask(
        bert_config, num_labels, record_files, FLAGS.max_seq_length,
        num_records, task_metric=TASK_METRICS.get(task_name, "correlation" if regression else None),
        original_pads_eval=FLAGS.use_tpu, bucket_by_length=FLAGS.bucket_by_length,
        label_names=label_list)
    runner.run(task, common_flags.run_settings(
        num_train_steps, num_warmup_steps, vocab_file=vocab_file, do_lower_case=do_lower_case))


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
