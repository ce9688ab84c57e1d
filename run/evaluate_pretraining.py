"""Is a pretraining run any good? Its checkpoints fine-tuned on a downstream suite, against
the same config randomly initialised.

    python -m run.evaluate_pretraining --models=pretrained[,other...] \\
        --data_dir=glue_data --conll_dir=conll2003 --squad_file=dev-v1.1.json \\
        --output_dir=evaluation [--tasks=MRPC,RTE] [--steps=2000,4000] [--seeds=0,1,2]

Every checkpoint of each pretraining output folder in --models (those of --steps only), or any
model directory --init_checkpoint takes (a Hugging Face directory, a keras-hub preset, Google's
released folder, a checkpoint prefix), and a randomly initialised copy of each config
(--no_baseline: not), fine-tuned on each task of --tasks with one fixed protocol
(--learning_rate, --train_batch_size, --num_train_epochs; one run per --seeds) by the tasks'
own preparation and the runner, as run_classifier, run_ner and run_squad run them. The default
suite: SST-2 (its first 8,000 training rows), MRPC, STS-B, RTE, CoLA (GLUE, from --data_dir in
run_glue's layout), CoNLL-2003 NER (the first 4,000 training sentences, scored on valid.txt,
from --conll_dir) and SQuAD v1.1 (--squad_file split by article: the first 36 train, the rest
are scored); --train_slices=TASK=N,... changes a slice. Writes --output_dir/results.tsv,
results.md and downstream.png; an evaluation run again skips its finished runs. The library:
`bert_tf.training.pretraining_evaluation`; docs/run_pretraining.md.
"""
from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error

FLAGS = flags.FLAGS

flags.DEFINE_list("models", None, "Pretraining output folders (every checkpoint) or model "
                  "directories, comma-separated.")
flags.DEFINE_list("steps", None, "Only the checkpoints of these steps of each pretraining "
                  "folder.")
flags.DEFINE_list("tasks", None, "The suite's tasks (default: SST-2, MRPC, STS-B, RTE, CoLA, "
                  "CoNLL-2003, SQuAD).")
flags.DEFINE_string("data_dir", None, "The GLUE data, a folder per task (run_glue's layout).")
flags.DEFINE_string("conll_dir", None, "CoNLL-2003: a folder with train.txt and valid.txt.")
flags.DEFINE_string("squad_file", None, "SQuAD v1.1 json with answers (dev-v1.1.json), split "
                    "by article into training and scored articles.")
flags.DEFINE_string("output_dir", None, "Where the tables, the figure and the runs go.")
flags.DEFINE_list("train_slices", None, "TASK=N,...: train on the first N rows (GLUE), "
                  "sentences (CoNLL-2003) or articles (SQuAD) instead of the protocol's.")
flags.DEFINE_float("learning_rate", 1e-4, "Every run's peak learning rate.")
flags.DEFINE_integer("train_batch_size", 32, "Every run's training batch size.")
flags.DEFINE_float("num_train_epochs", 3.0, "Every run's training epochs.")
flags.DEFINE_list("seeds", ["0"], "One run per seed of every model and task.")
flags.DEFINE_bool("no_baseline", False, "Leave out the randomly initialised baselines.")
flags.DEFINE_bool("mixed_vocabularies", False, "Tabulate models of different vocabularies "
                  "(each row says its vocabulary's checksum).")


def _integers(name):
    try:
        return [int(value) for value in FLAGS[name].value]
    except ValueError:
        raise flag_error(name, f"{','.join(FLAGS[name].value)}: comma-separated integers")


def _slices():
    slices = {}
    for item in FLAGS.train_slices or []:
        task, _, count = item.partition("=")
        if not count.isdigit():
            raise flag_error("train_slices", f"{item!r}: TASK=N with N a positive integer")
        slices[task] = int(count)
    return slices


def main(argv):
    del argv
    if not FLAGS.models:
        raise flag_error("models", "required")
    if not FLAGS.output_dir:
        raise flag_error("output_dir", "required")
    steps = _integers("steps") if FLAGS.steps else None
    seeds = _integers("seeds")
    slices = _slices()
    from bert_tf import api
    api.evaluate_pretraining(
        FLAGS.models, FLAGS.output_dir, tasks=FLAGS.tasks, data_dir=FLAGS.data_dir,
        conll_dir=FLAGS.conll_dir, squad_file=FLAGS.squad_file, steps=steps,
        train_slices=slices, learning_rate=FLAGS.learning_rate,
        train_batch_size=FLAGS.train_batch_size, num_train_epochs=FLAGS.num_train_epochs,
        seeds=seeds, baseline=not FLAGS.no_baseline,
        mixed_vocabularies=FLAGS.mixed_vocabularies)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
