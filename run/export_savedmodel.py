"""Exports a checkpoint as a SavedModel that serves token ids and raw strings.

    python -m run.export_savedmodel --init_checkpoint=out --bert_config_file=bert_config.json \\
        --vocab_file=vocab.txt --task=classifier --label_list=0,1 --export_dir=exported

    # The output_dir of a training run is a model directory: its config, vocabulary, casing,
    # task, labels and options are the defaults.
    python -m run.export_savedmodel --init_checkpoint=out --export_dir=exported

The SavedModel's signatures (bert_tf.serving.export): `serving_default` on input_ids / input_mask /
segment_ids, `serve_text` on `text` and `serve_text_pair` on `text_a` / `text_b` (raw strings,
tokenized and packed in the graph as the original's convert_single_example; multiple_choice:
`serve_choices` on `context` / `endings`), with the vocabulary and the config as assets.
--init_checkpoint is any checkpoint the command lines take (ours, the original's, a Hugging
Face directory, a keras-hub preset); a task head it lacks is an error.

--task=encoder --pooling=cls|mean|max adds `embed_text`: `text` (string [batch]) -> `embedding`
(float32 [batch, hidden]), the last layer pooled over each text's real tokens
(bert_tf.model.pooling), --normalize_embeddings dividing it by its L2 norm. For a
sentence-transformers directory, --normalize_embeddings and --max_seq_length default to what
it declares (its embeddings, served from strings):

    python -m run.export_savedmodel --init_checkpoint=all-MiniLM-L6-v2 --task=encoder \\
        --pooling=mean --export_dir=minilm_embedder

--format=tfhub --task=encoder writes TF Hub's text contract instead (export_dir/preprocessor and
export_dir/encoder: bert_tf.serving.tfhub); --format=litert --task=encoder|classifier writes
export_dir/model.tflite on token ids, --quantization=int8 for dynamic-range int8
(bert_tf.serving.litert); --format=huggingface writes a transformers BERT directory of any task
(config.json, model.safetensors, the tokenizer's files; --task=encoder --pooling: a
sentence-transformers directory: bert_tf.serving.huggingface); --format=keras_hub
--task=encoder|classifier|pretraining writes a keras-hub preset directory (BertBackbone,
BertTextClassifier, BertMaskedLM: bert_tf.serving.keras_hub). docs/export.md has each.
"""
from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from bert_tf.tasks import registry
from . import common_flags

FLAGS = flags.FLAGS

common_flags.define_model_file_flags(
    "The checkpoint to export (with the task's head), or a model directory (a training run's "
    "output_dir: its task, labels and options are the defaults of the flags below).")
flags.DEFINE_string("task", "encoder",
                    "Which model (bert_tf.tasks.registry): encoder (sequence and pooled outputs), "
                    "classifier (run_classifier's), squad, ner, pretraining (the masked-LM top-k "
                    "tokens) or multiple_choice (a score per ending).")
flags.DEFINE_integer("top_k", 5, "pretraining: the most probable tokens returned at each [MASK].")
flags.DEFINE_list("label_list", None, "classifier, ner: the labels in output order (the "
                  "classifier's probabilities and label names; one label: regression).")
flags.DEFINE_bool("multi_label", False, "classifier: a multi-label model (run_classifier "
                  "--multi_label): a sigmoid per label; serve_text returns the labels over "
                  "--threshold.")
flags.DEFINE_list("threshold", None, "classifier --multi_label: one threshold for all labels or "
                  "one per label, each in (0, 1) (default: 0.5).")
flags.DEFINE_integer("max_seq_length", 128, "Length the string signatures pack texts to.")
flags.DEFINE_integer("max_query_length", 64, "squad: the question's pieces kept (run_squad's).")
flags.DEFINE_integer("max_answer_length", 30, "squad: the longest answer span, in pieces.")
flags.DEFINE_integer("n_best_size", 20, "squad: the best starts and ends the answer is chosen "
                     "among (run_squad's).")
flags.DEFINE_enum("quantization", "none", ["none", "int8"],
                  "int8: --format=saved_model: the transformer dense layers with int8 weights "
                  "and int8 matmuls (oneDNN, x86 CPUs; faster than float32 at a batch of 32 "
                  "texts: docs/export.md), the embeddings, pooler and head float32; "
                  "--format=litert: dynamic-range int8 weights (the converter's "
                  "Optimize.DEFAULT).")
common_flags.define_pooling_flags(
    "encoder: also serve `embed_text`, raw strings -> one embedding each: the last layer's [CLS] "
    "hidden state, or its mean or max over the real tokens.")
flags.DEFINE_string("export_dir", None, "Where to write the SavedModel: a new or empty folder, "
                    "or an earlier bert_tf export (replaced); never the checkpoint's folder.")
flags.DEFINE_enum("format", "saved_model",
                  ["saved_model", "tfhub", "litert", "huggingface", "keras_hub"],
                  "What to write: saved_model (the SavedModel above), tfhub (--task=encoder: TF "
                  "Hub's preprocessor and encoder SavedModels in export_dir/preprocessor and "
                  "export_dir/encoder), litert (--task=encoder or classifier: "
                  "export_dir/model.tflite on token ids), huggingface (any task: a "
                  "transformers BERT directory; --task=encoder --pooling: a "
                  "sentence-transformers one) or keras_hub (--task=encoder, classifier or "
                  "pretraining: a keras-hub preset directory).")
flags.DEFINE_enum("litert_signature", "serving_default",
                  ["serving_default", "serve_text", "serve_text_pair"],
                  "--format=litert: the signature converted; only serving_default (token ids): "
                  "serve_text and serve_text_pair take strings, which LiteRT's builtin ops "
                  "cannot tokenize.")
flags.adopt_module_key_flags(common_flags)  # --help lists the shared flags too


# Each flag that is an option of some tasks (bert_tf.tasks.registry.option_names): the option.
TASK_OPTION_FLAGS = {"label_list": "labels", "multi_label": "multi_label",
                     "threshold": "threshold", "max_query_length": "max_query_length",
                     "n_best_size": "n_best_size", "max_answer_length": "max_answer_length",
                     "top_k": "top_k", "pooling": "pooling",
                     "normalize_embeddings": "normalize"}


def task_options(max_seq_length, normalize):
    """The --task's options from the flags; a flag given for a task without its option is an
    error naming the tasks it is for."""
    options = registry.option_names(FLAGS.task)
    for flag, option in TASK_OPTION_FLAGS.items():
        if FLAGS[flag].present and option not in options:
            tasks = [name for name in registry.names() if option in registry.option_names(name)]
            raise flag_error(flag, f"only for --task={' or '.join(tasks)}, not "
                                   f"--task={FLAGS.task}")
    values = {option: FLAGS[flag].value for flag, option in TASK_OPTION_FLAGS.items()}
    return dict(values, max_seq_length=max_seq_length, normalize=normalize)


# What a model directory records of a training run (bert_tf.model.directory) that is an export
# flag: the flags' defaults for its task; the labels and how to read them must agree.
RECORDED_FLAGS = {"label_list": "labels", "multi_label": "multi_label",
                  "threshold": "thresholds", "max_query_length": "max_query_length",
                  "n_best_size": "n_best_size", "max_answer_length": "max_answer_length"}


def main(argv):
    del argv
    common_flags.check_required("init_checkpoint", "export_dir")
    if FLAGS["task"].present:
        registry.task_class(FLAGS.task)  # a task's name (the error names them)
    from bert_tf import api
    from bert_tf.model import directory
    # The folder of a training run: its task is the default (the options' checks need it).
    recorded_task = directory.recorded_task(FLAGS.init_checkpoint)
    if recorded_task and not FLAGS["task"].present:
        FLAGS.task = recorded_task
    from bert_tf.serving import formats
    from bert_tf.serving.export_folders import check_export_dir
    formats.check_options(FLAGS.format, FLAGS.task, FLAGS.quantization, FLAGS.litert_signature)
    task_options(None, None)  # every task option given is the task's
    common_flags.check_pooling_flags()
    from bert_tf.model.checkpoints import load_checkpoint
    from bert_tf.model.load_report import require_complete
    from bert_tf.io_utils import checkpoint_folder
    check_export_dir(FLAGS.export_dir,
                     keep={"init_checkpoint": checkpoint_folder(FLAGS.init_checkpoint)})
    files = api.resolve_model_files(
        FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case,
        FLAGS["do_lower_case"].present)
    formats.check_model(FLAGS.format, FLAGS.task, files.config, files.vocab_file)
    # Its labels and options, unless given, and the length it was trained at (whichever task
    # is exported).
    common_flags.flags_from_model(files, recorded_task, {"max_seq_length": "max_seq_length"})
    common_flags.flags_from_model(files, FLAGS.task, RECORDED_FLAGS,
                                  agree=("label_list", "multi_label"))
    config, vocab_file, do_lower_case = files.config, files.vocab_file, files.do_lower_case
    normalize, max_seq_length = common_flags.embedding_options()
    common_flags.check_max_seq_length(config, value=max_seq_length)
    task = registry.build_for_serving(FLAGS.task, config, task_options(max_seq_length, normalize),
                                      vocab_file, files.task_record(FLAGS.task))
    model = task.build_model()
    require_complete(load_checkpoint(model, FLAGS.init_checkpoint), "init_checkpoint",
                     f"{FLAGS.task} model", f": is it a {FLAGS.task} checkpoint?")
    formats.save(FLAGS.format, task, model, FLAGS.export_dir, vocab_file, do_lower_case,
                 FLAGS.quantization)


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
