"""The BERT paper's GLUE protocol: a grid of fine-tuning runs per GLUE task, the best on dev.

    python -m run.run_glue --data_dir=glue_data --init_checkpoint=model_dir --output_dir=out

For every GLUE task in --data_dir (the GLUE download's layout: CoLA/, SST-2/, MRPC/, STS-B/,
QQP/, MNLI/, QNLI/, RTE/, WNLI/, diagnostic/; or those of --tasks), every point of the grid
(default the paper's section 4.1: batch 32, 3 epochs, learning rates 5e-5, 4e-5, 3e-5, 2e-5;
--learning_rates, --batch_sizes, --epochs, --restarts for others) is a run_classifier run in
its own folder, on the task's records prepared once; the run with the best dev score by the
task's metric predicts the test set (MNLI's model also the diagnostic set, AX). Writes
--output_dir/submission/ and submission.zip (the GLUE leaderboard's files) and results.md /
results.tsv (the dev scores of every grid point in the layout of the paper's Table 1, the
chosen settings, the paper's average and the GLUE score). A sweep run again skips every
finished run. The library: `bert_tf.training.glue_sweep`; docs/fine_tuning.md.
"""
from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error

from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_run_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=8,
                              learning_rate=5e-5, fine_tuning=True)
flags.adopt_module_key_flags(common_flags)
flags.DEFINE_string("data_dir", None, "The GLUE data: a folder per task (CoLA, SST-2, MRPC, "
                    "STS-B, QQP, MNLI, QNLI, RTE, WNLI) and diagnostic/ (AX).")
flags.DEFINE_list("tasks", None, "The tasks to run (default: every GLUE task with a "
                  "train.tsv in --data_dir).")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after "
                     "WordPiece tokenization.")
flags.DEFINE_list("learning_rates", ["5e-5", "4e-5", "3e-5", "2e-5"],
                  "The grid's learning rates (the paper's section 4.1).")
flags.DEFINE_list("batch_sizes", ["32"], "The grid's training batch sizes (Appendix A.3: 16,32).")
flags.DEFINE_list("epochs", ["3"], "The grid's numbers of training epochs (Appendix A.3: "
                  "2,3,4).")
flags.DEFINE_integer("restarts", 1, "Runs of each grid point, with different seeds (and "
                     "different data shuffling); the best on dev counts.")

# The shared flags that the grid sets per run.
GRID_FLAGS = {"learning_rate": "learning_rates", "train_batch_size": "batch_sizes",
              "num_train_epochs": "epochs", "do_train": None, "do_eval": None,
              "do_predict": None, "export_dir": None}


def main(argv):
    del argv
    from bert_tf.training.glue_sweep.grid import make_grid
    from bert_tf.training.glue_sweep.sweep import run_sweep
    from bert_tf.training.glue_sweep.tasks import find_tasks

    common_flags.check_required("data_dir", "output_dir")
    for flag, instead in GRID_FLAGS.items():
        if FLAGS[flag].present:
            raise flag_error(flag, "is set by run_glue for each run" + (
                f": give --{instead}" if instead else ""))
    grid = make_grid(FLAGS.learning_rates, FLAGS.batch_sizes, FLAGS.epochs, FLAGS.restarts)
    find_tasks(FLAGS.data_dir, FLAGS.tasks)  # before the model is read
    # Every run trains, evaluates on dev; the chosen one predicts.
    FLAGS.do_train = FLAGS.do_eval = FLAGS.do_predict = True
    common_flags.start_strategy()
    files = common_flags.fine_tuning_model_files("classifier")
    settings = common_flags.run_settings(vocab_file=files.vocab_file,
                                         do_lower_case=files.do_lower_case)
    run_sweep(FLAGS.data_dir, FLAGS.output_dir, files, FLAGS.max_seq_length, grid, settings,
              tasks=FLAGS.tasks,
              task_options=dict(bucket_by_length=FLAGS.bucket_by_length,
                                shuffle_buffer_size=FLAGS.shuffle_buffer_size),
              warmup_proportion=FLAGS.warmup_proportion,
              check_model=common_flags.check_init_checkpoint)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
