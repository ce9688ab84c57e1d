"""Extract fixed contextual features (per-token hidden states) from a BERT model.

The original's `extract_features.py`: same flags, same input format (one example per line,
`text_a` or `text_a ||| text_b`), same JSONL output: one line per input line with
`linex_index` and `features`, a list over tokens of {"token", "layers": [{"index", "values"}]}
where values are the hidden states of the requested layers rounded to 6 places.

    python -m run.extract_features --input_file=input.txt --output_file=output.jsonl \\
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

--init_checkpoint also takes our TF2 checkpoints and a Hugging Face BERT directory; for the
latter --bert_config_file, --vocab_file and --do_lower_case default to the directory's own.

Faster than the original: one compiled forward pass per batch (fixed shapes, no retracing), and
the JSON formatting of one batch overlaps the model's work on the next (a writer thread).
Progress (examples/s, ETA) goes to stderr; the output file appears only when complete.
"""
import collections
import json
import queue
import re
import threading

from absl import flags

from bert_tf.cli import run_main

flags.DEFINE_string("input_file", None, "Input text: one example per line, 'text_a' or "
                    "'text_a ||| text_b'.")
flags.DEFINE_string("output_file", None, "Output JSONL file (one line per input line).")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes to output "
                    "(negative counts from the top: -1 is the last layer).")
flags.DEFINE_string("bert_config_file", None, "The config json file of the pre-trained BERT "
                    "model (default for a Hugging Face --init_checkpoint: its config.json).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum total sequence length after WordPiece "
                     "tokenization; longer inputs are truncated, shorter ones padded.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint of the pre-trained model: original TF1, "
                    "our TF2, or a Hugging Face BERT directory.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file the BERT model was trained on "
                    "(default for a Hugging Face --init_checkpoint: its vocab.txt).")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text (True for uncased "
                  "models). For a Hugging Face directory, defaults to its tokenizer_config.json.")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility with the original; no effect.")
flags.DEFINE_string("master", None, "Accepted for compatibility with the original; no effect.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility with the original; "
                     "no effect.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility with the "
                  "original; no effect (the outputs are the same).")

FLAGS = flags.FLAGS

InputExample = collections.namedtuple("InputExample", ["unique_id", "text_a", "text_b"])
InputFeatures = collections.namedtuple(
    "InputFeatures", ["unique_id", "tokens", "input_ids", "input_mask", "input_type_ids"])


def read_examples(input_file):
    """Reads examples as the original: every line (an empty line is an empty text_a).

    Bytes that are not UTF-8 are an InputError naming the file and line (the original fails
    with a UnicodeDecodeError).
    """
    import tensorflow as tf

    from bert_tf import tokenization
    from bert_tf.errors import file_error

    examples = []
    try:
        with tf.io.gfile.GFile(input_file, "r") as reader:
            for unique_id, line in enumerate(reader):
                line = tokenization.convert_to_unicode(line).strip()
                match = re.match(r"^(.*) \|\|\| (.*)$", line)
                if match is None:
                    examples.append(InputExample(unique_id, line, None))
                else:
                    examples.append(InputExample(unique_id, match.group(1), match.group(2)))
    except UnicodeDecodeError:
        with tf.io.gfile.GFile(input_file, "rb") as reader:
            data = reader.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise file_error(input_file, f"not valid UTF-8 ({e.reason}: byte "
                                         f"0x{data[e.start]:02x})",
                             data.count(b"\n", 0, e.start) + 1) from None
        raise
    return examples


def convert_example(example, seq_length, tokenizer):
    """[CLS] a [SEP] (b [SEP]) with segment ids, mask and zero padding, as the original."""
    from bert_tf.data.features import convert_text_pair
    packed = convert_text_pair(tokenizer, example.text_a, example.text_b, seq_length)
    return InputFeatures(example.unique_id, packed.tokens, packed.input_ids, packed.input_mask,
                         packed.segment_ids)


def round6(values):
    """Python's round(float(x), 6) for float32 arrays, vectorised and bit-identical.

    A float32 has 24 significant bits and 1e6 needs 14 more (2**6 * 15625), so x * 1e6 is exact
    in float64; rint is then the correctly rounded (half-even) integer n, as round() computes,
    and n / 1e6 is the float64 nearest to n * 10**-6, which is what round() returns.
    """
    import numpy as np
    return np.rint(np.asarray(values, np.float32).astype(np.float64) * 1e6) / 1e6


def feature_json(feature, layer_indexes, layer_outputs):
    """One output line, exactly as the original formats it.

    layer_outputs: list (one per layer index) of [seq_length, hidden] float32 arrays.
    """
    rows = [round6(output[:len(feature.tokens)]).tolist() for output in layer_outputs]
    all_features = []
    for i, token in enumerate(feature.tokens):
        all_layers = []
        for j, layer_index in enumerate(layer_indexes):
            layers = collections.OrderedDict()
            layers["index"] = layer_index
            layers["values"] = rows[j][i]
            all_layers.append(layers)
        features = collections.OrderedDict()
        features["token"] = token
        features["layers"] = all_layers
        all_features.append(features)
    output_json = collections.OrderedDict()
    output_json["linex_index"] = feature.unique_id
    output_json["features"] = all_features
    return json.dumps(output_json) + "\n"


def parse_layers(value, num_layers):
    from bert_tf.cli import split_comma_list
    from bert_tf.errors import flag_error

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


def extract_features(examples, encoder, tokenizer, layer_indexes, max_seq_length, batch_size,
                     writer, progress=None):
    """Runs the encoder over `examples` in batches and writes one JSON line per example."""
    import numpy as np
    import tensorflow as tf

    @tf.function  # no XLA: slower than oneDNN on CPU (README, model section)
    def layer_outputs(input_ids, input_mask, input_type_ids):
        outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                           "segment_ids": input_type_ids}, training=False)
        return [outputs["encoder_outputs"][i] for i in layer_indexes]

    lines = queue.Queue(maxsize=4)
    failure = []

    def write_batches():
        try:
            while True:
                item = lines.get()
                if item is None:
                    return
                features, outputs = item
                for k, feature in enumerate(features):
                    writer.write(feature_json(feature, layer_indexes, [o[k] for o in outputs]))
                if progress is not None:
                    progress.update(len(features))
        except BaseException as e:  # re-raised in the main thread
            failure.append(e)
            while lines.get() is not None:
                pass

    thread = threading.Thread(target=write_batches, daemon=True)
    thread.start()
    try:
        for start in range(0, len(examples), batch_size):
            if failure:
                break
            features = [convert_example(e, max_seq_length, tokenizer)
                        for e in examples[start:start + batch_size]]
            arrays = [np.zeros((batch_size, max_seq_length), np.int32) for _ in range(3)]
            for k, feature in enumerate(features):  # the last batch is padded to full size
                arrays[0][k] = feature.input_ids
                arrays[1][k] = feature.input_mask
                arrays[2][k] = feature.input_type_ids
            outputs = [o.numpy() for o in layer_outputs(*arrays)]
            lines.put((features, outputs))
    finally:
        lines.put(None)
        thread.join()
    if failure:
        raise failure[0]


def main(argv):
    del argv
    from bert_tf.errors import flag_error
    from bert_tf.io_utils import atomic_open, check_input_file, check_output_file

    for name in ("input_file", "output_file", "init_checkpoint"):
        if not getattr(FLAGS, name):
            raise flag_error(name, "required")
    check_input_file(FLAGS.input_file, "input_file")  # before any slow import or work
    check_output_file(FLAGS.output_file, "output_file",
                      inputs={name: getattr(FLAGS, name) for name in
                              ("input_file", "vocab_file", "bert_config_file")})
    from bert_tf import tokenization
    from bert_tf.model.checkpoints import load_checkpoint, require_complete
    from bert_tf.model.encoder import BertEncoder
    from bert_tf.progress import Progress
    from bert_tf.api import resolve_model_files
    config, vocab_file, do_lower_case = resolve_model_files(
        FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case,
        FLAGS["do_lower_case"].present)
    from .common_flags import check_max_seq_length
    check_max_seq_length(config)
    tokenization.check_vocab_fits(vocab_file, config.vocab_size)
    layer_indexes = parse_layers(FLAGS.layers, config.num_hidden_layers)
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)

    encoder = BertEncoder(config)
    report = load_checkpoint(encoder, FLAGS.init_checkpoint)
    print(report, file=__import__("sys").stderr)
    require_complete(report, "init_checkpoint", "encoder")
    examples = read_examples(FLAGS.input_file)
    progress = Progress("extract_features", total=len(examples), unit="examples")
    with atomic_open(FLAGS.output_file, "w") as writer:
        extract_features(examples, encoder, tokenizer, layer_indexes, FLAGS.max_seq_length,
                         FLAGS.batch_size, writer, progress)
    progress.summary(output=FLAGS.output_file)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
