"""Hugging Face export: a task's model as a transformers BERT directory.

`save(task, model, export_dir, vocab_file, do_lower_case)` writes what
`transformers.AutoModelFor...from_pretrained` and `AutoTokenizer.from_pretrained` read:
  config.json             the architecture (`architecture`: BertModel, BertForPreTraining,
                          BertForMaskedLM for a masked-LM-only pretraining model,
                          BertForSequenceClassification with id2label / label2id and
                          problem_type, BertForTokenClassification with its tags,
                          BertForQuestionAnswering, BertForMultipleChoice), the encoder's
                          fields in Hugging Face's names (BertConfig.to_hf_dict);
  model.safetensors       the weights under transformers' names (one table read both ways:
                          bert_tf.model.variable_names), the fused query/key/value split; no
                          pooler where the architecture has none, no tied decoder;
  vocab.txt, tokenizer.json (the fast tokenizer, built with `tokenizers`: BertNormalizer
                          with the casing, BertPreTokenizer, WordPiece of 200 characters a
                          word as ours, [CLS]/[SEP] templates), tokenizer_config.json
                          (`tokenizer_config`), special_tokens_map.json.
The encoder with a pooling (task encoder, config.pooling) is a sentence-transformers directory
besides: modules.json (Transformer, Pooling in 1_Pooling, Normalize in 2_Normalize when the
embeddings are normalized; a module without files, as sentence-transformers writes it),
1_Pooling/config.json, sentence_bert_config.json.
bert_tf_model.json records the task, its labels and options (bert_tf.model.directory), so that
the directory given back to our command lines or API is the model it was (`--init_checkpoint`
alone); bert_tf_export.json (the marker of bert_tf.serving.export_folders) lists what was
written.
"""
import json
import os

import numpy as np
import tensorflow as tf
from safetensors.numpy import save as safetensors_bytes
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from bert_tf.errors import argument_error
from bert_tf.io_utils import atomic_output
from bert_tf.model import directory
from bert_tf.model.checkpoints import HF_WEIGHT_FILES, original_weights
from bert_tf.model.variable_names import HF_ENCODER_PREFIX, original_to_hf_name
from bert_tf.serving.export_folders import check_export_dir, write_marker
from bert_tf.serving.vocabulary import check_special_tokens
from bert_tf.tokenization import MAX_INPUT_CHARS_PER_WORD, load_vocab

# The special tokens of a BERT tokenizer (transformers' names), each a vocabulary entry.
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                  "cls_token": "[CLS]", "mask_token": "[MASK]"}
# transformers' task models whose encoder has no pooler (BertModel(add_pooling_layer=False)).
WITHOUT_POOLER = ("BertForMaskedLM", "BertForTokenClassification", "BertForQuestionAnswering")
# sentence-transformers' pooling modes (its models.Pooling) of ours (bert_tf.model.pooling).
ST_POOLING_MODES = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                    "max": "pooling_mode_max_tokens"}


def architecture(task, model):
    """transformers' class of `task`'s `model`."""
    if task.name == "pretraining":
        return "BertForPreTraining" if model.next_sentence is not None else "BertForMaskedLM"
    return {"encoder": "BertModel", "classifier": "BertForSequenceClassification",
            "ner": "BertForTokenClassification", "squad": "BertForQuestionAnswering",
            "multiple_choice": "BertForMultipleChoice"}[task.name]


def check_vocabulary(vocab_file, name="vocab_file"):
    """InputError naming `name` unless the vocabulary can be a Hugging Face BERT tokenizer's:
    given, and holding each special token (bert_tf.serving.vocabulary). Returns the
    vocabulary."""
    if not vocab_file:
        raise argument_error(name, "required for the Hugging Face format (it writes the "
                                   "tokenizer)")
    vocab = load_vocab(vocab_file)
    check_special_tokens(vocab_file, vocab, "a Hugging Face BERT tokenizer")
    return vocab


def hf_weights(model, model_architecture):
    """{transformers' name: float32 array} of `model`'s weights for `model_architecture`."""
    prefix = "" if model_architecture == "BertModel" else HF_ENCODER_PREFIX
    weights = {}
    for name, value in original_weights(model).items():
        if model_architecture in WITHOUT_POOLER and name.startswith("bert/pooler/"):
            continue
        hf_name, transpose = original_to_hf_name(name, prefix)
        value = np.asarray(value, np.float32)
        weights[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    return weights


def hf_config(task, model_architecture, vocab):
    """The config.json object of `task`'s model as `model_architecture`."""
    config = task.config.bert_config.to_hf_dict()
    config.update(architectures=[model_architecture], pad_token_id=vocab["[PAD]"])
    labels = None
    if task.name == "classifier":
        task_config = task.config
        if task_config.multi_label:
            config["problem_type"] = "multi_label_classification"
        elif task_config.regression:
            config["problem_type"] = "regression"
        else:
            config["problem_type"] = "single_label_classification"
        labels = list(task_config.labels or ["LABEL_0"])
    elif task.name == "ner":
        labels = list(task.config.labels)
    if labels is not None:
        config["id2label"] = {str(i): label for i, label in enumerate(labels)}
        config["label2id"] = {label: i for i, label in enumerate(labels)}
    return dict(sorted(config.items()))


def tokenizer_json(vocab, do_lower_case):
    """tokenizer.json (text) of the fast tokenizer giving our ids (bert_tf.tokenization)."""
    tokenizer = Tokenizer(models.WordPiece(dict(vocab), unk_token=SPECIAL_TOKENS["unk_token"],
                                           max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    # strip_accents None: accents stripped when lower-casing, as the original's BasicTokenizer.
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None,
        lowercase=bool(do_lower_case))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = SPECIAL_TOKENS["cls_token"], SPECIAL_TOKENS["sep_token"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS.values()))
    return tokenizer.to_str(pretty=True)


def tokenizer_config(do_lower_case, model_max_length):
    """tokenizer_config.json's object. The class is the generic fast tokenizer, which runs
    tokenizer.json as written: transformers' BertTokenizer rebuilds its WordPiece from the
    vocabulary with words of at most 100 characters (ours: 200). `do_lower_case` is read by
    our loader (bert_tf.model.checkpoints.hf_directory_files)."""
    return dict(SPECIAL_TOKENS, tokenizer_class="PreTrainedTokenizerFast",
                model_input_names=["input_ids", "token_type_ids", "attention_mask"],
                do_lower_case=bool(do_lower_case), model_max_length=model_max_length)


def sentence_transformers_files(task):
    """{relative path: JSON object} of a sentence-transformers directory around the BertModel
    (task encoder with a pooling), {} without a pooling."""
    config = task.config
    if task.name != "encoder" or config.pooling is None:
        return {}
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if config.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    pooling = {"word_embedding_dimension": config.bert_config.hidden_size}
    pooling.update({mode: our_mode == config.pooling
                    for our_mode, mode in ST_POOLING_MODES.items()})
    pooling["pooling_mode_mean_sqrt_len_tokens"] = False
    return {"modules.json": modules, "1_Pooling/config.json": pooling,
            # The casing is the tokenizer's (tokenizer_config.json): sentence-transformers'
            # own lower-casing stays off.
            "sentence_bert_config.json": {"max_seq_length": config.max_seq_length,
                                          "do_lower_case": False}}


def save(task, model, export_dir, vocab_file, do_lower_case=True, log=print):
    """Writes `task`'s `model` as a Hugging Face directory (see the module docstring) under a
    temporary name renamed when complete. `export_dir` must be new, empty or an earlier export
    (`check_export_dir`); the vocabulary must hold the special tokens (`check_vocabulary`)."""
    check_export_dir(export_dir)
    vocab = check_vocabulary(vocab_file)
    model_architecture = architecture(task, model)
    bert_config = task.config.bert_config
    json_files = {"config.json": hf_config(task, model_architecture, vocab),
                  "tokenizer_config.json": tokenizer_config(
                      do_lower_case, bert_config.max_position_embeddings),
                  "special_tokens_map.json": SPECIAL_TOKENS}
    json_files.update(sentence_transformers_files(task))
    weights = safetensors_bytes(hf_weights(model, model_architecture), metadata={"format": "pt"})
    export_dir = os.fspath(export_dir)
    with atomic_output(export_dir) as tmp:
        tf.io.gfile.makedirs(tmp)
        with tf.io.gfile.GFile(os.path.join(tmp, HF_WEIGHT_FILES[0]), "wb") as f:
            f.write(weights)
        tf.io.gfile.copy(os.fspath(vocab_file), os.path.join(tmp, "vocab.txt"))
        files = dict({name: json.dumps(value, indent=2, ensure_ascii=False) + "\n"
                      for name, value in json_files.items()},
                     **{"tokenizer.json": tokenizer_json(vocab, do_lower_case)})
        for name, text in files.items():
            tf.io.gfile.makedirs(os.path.dirname(os.path.join(tmp, name)))
            with tf.io.gfile.GFile(os.path.join(tmp, name), "w") as f:
                f.write(text)
        # Our loader's defaults when the directory is read back: task, labels, options.
        directory.write_record(tmp, directory.task_record(task, do_lower_case, vocab_file))
        description = {"task": task.name, "format": "huggingface",
                       "architecture": model_architecture,
                       "max_seq_length": task.config.max_seq_length}
        description.update(task.export_description())
        write_marker(tmp, description, marker_folder="")
    log(f"exported {export_dir} (Hugging Face {model_architecture}"
        f"{', sentence-transformers' if 'modules.json' in files else ''}; "
        f"{len(weights) / 2**20:.1f} MiB of weights)")
    return export_dir
