"""Masked-LM / next-sentence pretraining of BERT: the original's run_pretraining on TF2.

    python -m run.run_pretraining --bert_config_file=bert_config.json \\
        --input_file='records/*' --output_dir=model --do_train --do_eval \\
        [--init_checkpoint=...] [--distribution_strategy=mirrored --num_gpus=8] \\
        [--mixed_precision=bfloat16] [--jit_compile]

Same flags, defaults, loss, optimizer, eval metrics and eval_results.txt as the original
(google-research/bert run_pretraining.py), plus tf.distribute strategies, mixed precision, XLA,
LAMB, gradient accumulation, resumable checkpoints and progress/TensorBoard output. This file is
the flags; the task is `bert_tf.tasks.pretraining.task.PretrainingTask` and the driver
`bert_tf.training.runner.run`.

Training resumes from the latest checkpoint in --output_dir when there is one (rerun the same
command after a crash), also from one written by the original's run_pretraining: its weights,
Adam moments and global_step are loaded, so a run moved from the original continues where it
stopped (same learning-rate schedule) and writes our checkpoints from then on (adamw only).

--objective=mlm trains the masked LM alone (no next-sentence head). The records' layout
(bert_tf.data.pretraining.record_layout.PretrainingLayout: static or dynamic masks, next-sentence
labels or not, packed or not) is read from the first record of each file; records with dynamic
masks get them drawn as they are read (--masked_lm_prob, --vocab_file;
bert_tf.tasks.pretraining.dynamic_masking).

Records made by our create_pretraining_data carry a manifest
(bert_tf.data.pretraining.manifest): the flags it settles (--max_seq_length,
--max_predictions_per_seq, --objective, --masked_lm_prob, --vocab_file, --do_lower_case,
--recipe) default to what it says, and one given against it is an error. --recipe's training
defaults (bert_tf.data.pretraining.recipes) then apply to the flags not given.

--do_eval evaluates the model just trained, or else the latest checkpoint in --output_dir (ours,
or one written by the original's run_pretraining), or else --init_checkpoint, on the first
max_eval_steps * eval_batch_size records of --input_file in file order, and writes
output_dir/eval_results.txt.
"""
from absl import flags

from bert_tf.cli import (expand_globs, refuse_flags_that_cannot_act, run_main,
                         set_flag_defaults)
from bert_tf.errors import flag_error
from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_run_flags()
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too
flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Must match data generation.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. "
                     "Must match data generation.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_enum("objective", "mlm_nsp", ["mlm_nsp", "mlm"],
                  "mlm_nsp: masked-LM + next-sentence (the original's); mlm: masked-LM only, "
                  "no next-sentence head (reads any records, ignoring next-sentence labels).")
flags.DEFINE_float("masked_lm_prob", None,
                   "Records with dynamic masks: the share of each sequence's tokens masked "
                   "(the original create_pretraining_data's rule), in (0, 1); default 0.15. "
                   "Records with static masks hold theirs: an error there.")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary the records were made with, copied into --output_dir so "
                    "that it is a whole model directory (default when the run continues "
                    "--output_dir: its vocab.txt). Records with dynamic masks need it (its "
                    "[MASK] id; random replacements are drawn over its ids).")
flags.DEFINE_bool("do_lower_case", None,
                  "The casing of --vocab_file (create_pretraining_data's --do_lower_case), "
                  "recorded in --output_dir with the vocabulary (default when the run "
                  "continues --output_dir: its casing; otherwise not recorded).")
flags.DEFINE_enum("recipe", None, ["original", "efficient"],
                  "The named recipe's training defaults (docs/run_pretraining.md has the table; "
                  "each flag given still wins). Default: the recipe the records' manifest names "
                  "(create_pretraining_data --recipe), else 'original'. A recipe other than "
                  "the records' is an error.")
flags.DEFINE_float("dropout", None,
                   "The hidden and attention dropout while pretraining, in [0, 1) (default: "
                   "the model's config's); the config in --output_dir keeps its own for "
                   "fine-tuning.")
flags.DEFINE_integer("dropout_from_step", 0,
                     "Late dropout: no dropout before this step, the model's (or --dropout's) "
                     "from it on (0: from the start, as the original).")
flags.DEFINE_bool("deterministic_input", False,
                  "Train on the records in file order (repeated) instead of shuffled: the "
                  "same batches under every strategy; for reproducing runs.")


def take_from_records(input_files):
    """The record files among `input_files` (bert_tf.data.pretraining.manifest.read_records);
    the flags not given take what their manifest says, then the recipe's training defaults."""
    from bert_tf.data.pretraining import manifest, recipes

    records = manifest.read_records(input_files)
    recorded = records.manifest["recipe"] if records.manifest else None
    if FLAGS.recipe is not None and FLAGS.recipe != (recorded or recipes.DEFAULT_RECIPE):
        made = (f"were made with --recipe={recorded} ({records.manifest_file})" if recorded
                else f"have no manifest ({records.paths[0]}): the original's")
        raise flag_error("recipe", f"{FLAGS.recipe}, but the records {made}; leave --recipe "
                                   f"out, or make the records with create_pretraining_data "
                                   f"--recipe={FLAGS.recipe}")
    if records.manifest is not None:
        names = list(manifest.TRAINING_ARGUMENTS) + ["vocab_file"]
        set_flag_defaults(manifest.training_values(
            records, {name: FLAGS[name].value for name in names if FLAGS[name].present}),
            records.manifest_file)
    recipe = recipes.recipe(FLAGS.recipe or recorded or recipes.DEFAULT_RECIPE)
    defaults = recipe.training_flags
    set_flag_defaults(recipes.settle(defaults, FLAGS.flag_values_dict(),
                                     {name for name in defaults if FLAGS[name].present}),
                      f"--recipe={recipe.name}")
    return records


def main(argv):
    del argv
    from bert_tf.training.settings import check_request

    common_flags.check_required("input_file", "output_dir")
    if FLAGS.export_dir:  # refused now rather than after the training it would follow
        raise flag_error("export_dir", "run_pretraining does not export; export its output_dir "
                                       "with run.export_savedmodel --task=encoder (or "
                                       "--task=pretraining for the masked-LM)")
    # The checks that need no TensorFlow first (it takes seconds to import).
    check_request(FLAGS.do_train, FLAGS.do_eval, False, FLAGS.output_dir)
    if not FLAGS.do_train:
        refuse_flags_that_cannot_act({name: "only training uses dropout, and --do_train is "
                                            "not given" for name in ("dropout",
                                                                     "dropout_from_step")})
    if FLAGS.deterministic_input:
        refuse_flags_that_cannot_act({"shuffle_buffer_size": "--deterministic_input reads the "
                                                             "records in file order, unshuffled"})
    records = take_from_records(expand_globs(FLAGS.input_file, "input_file"))
    input_files = records.paths
    # Then the model's files, the task and the runner, which import TensorFlow.
    from bert_tf.api import resolve_model_files
    from bert_tf.model import directory
    from bert_tf.tasks.pretraining.task import (PretrainingConfig, PretrainingTask,
                                                masking_vocabulary, pretraining_records)
    from bert_tf.progress import log
    from bert_tf.training import runner

    common_flags.start_strategy()
    # The config: given, or the model directory's (--init_checkpoint's, or --output_dir's
    # when the run continues it), which a given one must agree with. The vocabulary and
    # casing are the records' (given), or those of the --output_dir the run continues.
    files = resolve_model_files(FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file,
                                FLAGS.do_lower_case,
                                FLAGS["do_lower_case"].present or records.manifest is not None,
                                output_dir=FLAGS.output_dir, own_vocabulary=True)
    if files.vocab_file is None:
        refuse_flags_that_cannot_act({"do_lower_case": "it is the casing of the run's "
                                                       "vocabulary, and no --vocab_file is given"})
        log("note: no --vocab_file: --output_dir will hold no vocab.txt; give the "
            "vocabulary the records were made with to make it a whole model directory")
    common_flags.check_max_seq_length(files.config)
    if FLAGS.do_train:
        directory.check_output_dir(FLAGS.output_dir, files.config, files.vocab_file)
    mask_id, vocab_size = masking_vocabulary(files.vocab_file)
    log(f"*** {len(input_files)} input files: {', '.join(input_files[:5])}"
        + (" ..." if len(input_files) > 5 else ""))
    task = PretrainingTask(PretrainingConfig(
        bert_config=files.config, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        records=pretraining_records(input_files), shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        deterministic_input=FLAGS.deterministic_input, objective=FLAGS.objective,
        masked_lm_prob=FLAGS.masked_lm_prob, mask_id=mask_id, vocab_size_for_masking=vocab_size,
        dropout=FLAGS.dropout))
    trained = task.training_bert_config()
    if trained.hidden_dropout_prob == trained.attention_probs_dropout_prob == 0:
        refuse_flags_that_cannot_act({"dropout_from_step": "the model trains without dropout "
                                                           "(its config's, or --dropout=0)"})
    if records.manifest is not None:
        from bert_tf.data.pretraining.manifest import check_layout
        check_layout(records, task.detect_layout(input_files), input_files[0])
    # Before --output_dir is made: the checkpoint must fit the model (shapes, layers).
    common_flags.check_init_checkpoint(task.build_model)
    runner.run(task, common_flags.run_settings(
        FLAGS.num_train_steps, FLAGS.num_warmup_steps, vocab_file=files.vocab_file,
        do_lower_case=files.do_lower_case))


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
