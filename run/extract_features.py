"""Extract fixed contextual features (per-token hidden states) from a BERT model.

The original's `extract_features.py`: same flags, same input format (one example per line,
`text_a` or `text_a ||| text_b`), same JSONL output: one line per input line with
`linex_index` and `features`, a list over tokens of {"token", "layers": [{"index", "values"}]}
where values are the hidden states of the requested layers rounded to 6 places.

    python -m run.extract_features --input_file=input.txt --output_file=output.jsonl \\
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

--init_checkpoint also takes our TF2 checkpoints and a model directory (a Hugging Face BERT
directory, a checkpoint folder with bert_config.json and vocab.txt beside it, a training run's
output_dir): --bert_config_file, --vocab_file and --do_lower_case default to the directory's
own.

Sentence embeddings (not in the original): --pooling=cls|mean|max writes one vector per input
line instead of per-token values, pooled over the line's real tokens from the last layer (or
the --layers given, concatenated), as JSONL {"linex_index", "embedding"} or, when --output_file
ends in .npy, a float32 [lines, dim] array; --normalize_embeddings divides each by its L2
norm. For a sentence-transformers directory (all-MiniLM-L6-v2, ...), --normalize_embeddings
and --max_seq_length default to what it declares, which gives its own embeddings:

    python -m run.extract_features --input_file=sentences.txt --output_file=embeddings.npy \\
      --init_checkpoint=all-MiniLM-L6-v2 --pooling=mean

The work is a task on the runner, as every run_* command line: `FeatureExtractionTask`
(bert_tf/tasks/encoder/extraction.py: the original's read_examples, convert_examples_to_features and
JSON format) predicted by `bert_tf.training.runner.run` with no output_dir. Faster than the
original: one compiled forward pass per batch (fixed shapes, no retracing), and the JSON formatting
of one batch overlaps the model's work on the next (a writer thread). Progress (examples/s, ETA)
goes to stderr; the output file appears only when complete.
"""

from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from bert_tf.io_utils import check_input_file, check_output_file, split_comma_list
from . import common_flags
from .common_flags import (check_max_seq_length, check_pooling_flags, check_required,
                           define_model_file_flags, define_pooling_flags, embedding_options)

flags.DEFINE_string("input_file", None, "Input text: one example per line, 'text_a' or "
                    "'text_a ||| text_b'.")
flags.DEFINE_string("output_file", None, "Output JSONL file (one line per input line).")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes to output "
                    "(negative counts from the top: -1 is the last layer). With --pooling the "
                    "default is -1, and several layers give their pooled vectors concatenated "
                    "in this order.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum total sequence length after WordPiece "
                     "tokenization; longer inputs are truncated, shorter ones padded.")
define_model_file_flags()
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
define_pooling_flags(
    "Write one embedding per line instead of per-token values: the [CLS] hidden state, or the "
    "mean or max over the line's real tokens ([CLS] and [SEP] included, padding not). Not in "
    "the original; unset, the output is its JSONL.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility with the original; no effect.")
flags.DEFINE_string("master", None, "Accepted for compatibility with the original; no effect.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility with the original; "
                     "no effect.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility with the "
                  "original; no effect (the outputs are the same).")

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too


def __getattr__(name):
    """The reading, packing and JSON functions of bert_tf.tasks.encoder.extraction, also
    importable from here (imported on first use: --help and flag errors need no TensorFlow)."""
    if name in ("InputExample", "InputFeatures", "read_examples", "convert_examples_to_features",
                "round6", "feature_json"):
        from bert_tf.tasks.encoder import extraction as features
        return getattr(features, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_layers(value, num_layers):
    try:
        indexes = [int(x) for x in split_comma_list(value)]
    except ValueError:
        raise flag_error("layers", f"expected comma-separated integers, got {value!r}") from None
    if not indexes:
        raise flag_error("layers", "no layer index given")
    for index in indexes:
        if not -num_layers <= index < num_layers:
            raise flag_error("layers", f"index {index} is out of range for a model with "
                                       f"{num_layers} layers")
    return indexes


def main(argv):
    del argv
    check_required("input_file", "output_file", "init_checkpoint")
    check_pooling_flags()
    check_input_file(FLAGS.input_file, "input_file")  # before any slow import or work
    check_output_file(FLAGS.output_file, "output_file",
                      inputs={name: getattr(FLAGS, name) for name in
                              ("input_file", "vocab_file", "bert_config_file")})
    # The library (and TensorFlow) once the flags and files are checked: --help, flag errors
    # and a missing input come without TensorFlow's start-up.
    import tensorflow as tf

    from bert_tf.api import resolve_model_files
    from bert_tf.tasks.encoder import extraction as features
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings
    files = resolve_model_files(FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file,
                                FLAGS.do_lower_case, FLAGS["do_lower_case"].present)
    config, vocab_file, do_lower_case = files.config, files.vocab_file, files.do_lower_case
    normalize, max_seq_length = embedding_options()
    check_max_seq_length(config, value=max_seq_length)
    layers = FLAGS.layers
    if FLAGS.pooling is not None and not FLAGS["layers"].present:
        layers = "-1"
    layer_indexes = parse_layers(layers, config.num_hidden_layers)
    # No output_dir: the task writes --output_file, the weights are --init_checkpoint's. One
    # device, a GPU when there is one (the original's TPU flags have no effect).
    settings = RunSettings(
        output_dir=None, do_predict=True, init_checkpoint=FLAGS.init_checkpoint,
        predict_batch_size=FLAGS.batch_size,
        num_gpus=1 if tf.config.list_physical_devices("GPU") else 0)
    task = features.prepare_task(
        config, FastTokenizer(vocab_file, do_lower_case=do_lower_case), max_seq_length,
        layer_indexes=layer_indexes, predict_batch_size=FLAGS.batch_size,
        output_file=FLAGS.output_file, input_file=FLAGS.input_file, pooling=FLAGS.pooling,
        normalize=normalize).task
    runner.run(task, settings)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
