"""The fine-tuning sequence that the command lines and the Python API share.

`start` (the settings, the export folder, the strategy), `check_model_files` (what the model's
files must allow), then the task's `prepare_task` with `preparation_options` (the records,
after the checks of --init_checkpoint and the best metric), then `run` (the driver and the
export). Every check comes before any record is written.
"""
import dataclasses

from bert_tf import progress, tokenization
from bert_tf.model import directory
from bert_tf.serving import export
from bert_tf.text.windows import check_max_seq_length
from bert_tf.training import runner


def quiet(message):
    del message


def start(settings, export_dir=None):
    """Checks the run's settings before any work (values, an output folder that can be
    written, an export folder that replaces nothing of the user's) and builds the
    tf.distribute strategy now, before the data's TensorFlow ops: MultiWorkerMirrored and
    Mirrored on logical CPUs must exist before any op runs. The runner reuses it
    (bert_tf.training.distribution.create_strategy)."""
    settings.validate(steps_known=False)
    if export_dir:
        export.check_run_export_dir(export_dir, settings.output_dir, settings.init_checkpoint)
    runner.build_strategy(settings, log=quiet)


def check_model_files(files, settings, max_seq_length):
    """What a run checks of its model (a bert_tf.api.ModelFiles) before it reads any data
    (after `start`): max_seq_length fits the model's positions, the casing against the
    checkpoint's name, and, to train, an output_dir that can become a model directory
    (bert_tf.model.directory)."""
    check_max_seq_length(max_seq_length, files.config.max_position_embeddings)
    if settings.init_checkpoint:
        tokenization.validate_case_matches_checkpoint(files.do_lower_case,
                                                      settings.init_checkpoint)
    if settings.do_train:
        directory.check_output_dir(settings.output_dir, files.config, files.vocab_file)


def preparation_options(settings, num_train_epochs, warmup_proportion, log=progress.log,
                        **options):
    """The arguments of a task's `prepare_task` (bert_tf.tasks.*) that come from the run:
    batch sizes (eval and predict sets are padded to them), the training steps' inputs, the
    --init_checkpoint and best-metric checks made before any record is written, the log, and
    `options` (the task's own)."""
    return dict(eval_batch_size=settings.eval_batch_size,
                predict_batch_size=settings.predict_batch_size,
                train_batch_size=settings.train_batch_size,
                num_train_epochs=num_train_epochs, warmup_proportion=warmup_proportion,
                check_model=lambda build_model: runner.check_init_checkpoint(build_model,
                                                                             settings),
                check_task=lambda task: runner.check_best_metric(task, settings),
                log=log, **options)


def run(prepared, settings, export_dir=None):
    """Runs a PreparedTask with `settings` and its training steps; with `export_dir`, then
    saves its SavedModel there with the run's vocabulary (settings.vocab_file)."""
    settings = dataclasses.replace(settings, num_train_steps=prepared.num_train_steps,
                                   num_warmup_steps=prepared.num_warmup_steps)
    exporter = export.trained_model_exporter(export_dir, settings.vocab_file,
                                             settings.do_lower_case, settings.output_dir,
                                             settings.init_checkpoint)
    return runner.run(prepared.task, settings, export=exporter)
