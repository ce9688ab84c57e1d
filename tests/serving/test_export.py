"""run.export_savedmodel: SavedModels on token ids and on raw strings give the Keras model's
outputs on real MRPC text (strings packed by the graph tokenizer equal to the original's
packing), carry the vocabulary and config as assets, and refuse a checkpoint without the head."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from command_lines import run_line
from conftest import command_env

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "max_position_embeddings": 128,
        "type_vocab_size": 2}


def export(flags, expect=0):
    line = [sys.executable, "-m", "run.export_savedmodel"]
    line += [f"--{k}={v}" for k, v in flags.items()]
    process = run_line(line, command_env())
    output = process.stdout + process.stderr
    assert process.returncode == expect, output[-3000:]
    return output


@pytest.fixture(scope="module")
def exported(tmp_path_factory, uncased_vocab, shared_data):
    """A tiny classifier in the original naming (vocab.txt moved away after export) and its
    SavedModel; the Keras model; MRPC dev pairs."""
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertClassifier
    root = tmp_path_factory.mktemp("export")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    shutil.copy(uncased_vocab, root / "vocab.txt")
    model = BertClassifier(BertConfig.from_dict(TINY), 3)
    model.classifier.projection.output_bias.assign([0.2, -0.1, 0.05])
    checkpoint = write_tf1_checkpoint(model, root / "model.ckpt")
    flags = {"init_checkpoint": checkpoint, "bert_config_file": root / "bert_config.json",
             "vocab_file": root / "vocab.txt", "task": "classifier", "max_seq_length": 64,
             "label_list": "a,b,c", "export_dir": root / "exported"}
    log = export(flags)
    os.rename(root / "vocab.txt", root / "vocab.moved")  # the SavedModel must not need it
    with open(shared_data / "glue_data" / "MRPC" / "dev.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:25]
    return {"root": root, "flags": flags, "log": log, "model": model,
            "pairs": [(r[3], r[4]) for r in rows]}


def test_string_and_id_signatures_equal_the_keras_model(exported, uncased_vocab):
    import tensorflow as tf

    from bert_tf import api
    root = exported["root"]
    assert "serve_text_pair" in exported["log"]
    loaded = tf.saved_model.load(str(root / "exported"))
    text_a = [a for a, _ in exported["pairs"]]
    text_b = [b for _, b in exported["pairs"]]
    inputs = api.encode(api.load_tokenizer(str(uncased_vocab)), text_a, text_b, 64)
    expected = tf.nn.softmax(exported["model"](inputs, training=False)["logits"]).numpy()

    by_ids = loaded.signatures["serving_default"](
        **{k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(by_ids["probabilities"].numpy(), expected, rtol=1e-5, atol=1e-6)
    by_text = loaded.signatures["serve_text_pair"](text_a=tf.constant(text_a),
                                                   text_b=tf.constant(text_b))
    np.testing.assert_allclose(by_text["probabilities"].numpy(), expected, rtol=1e-5, atol=1e-6)
    assert [x.decode() for x in by_text["label"].numpy()] == [
        "abc"[i] for i in expected.argmax(axis=1)]
    single = loaded.signatures["serve_text"](text=tf.constant(text_a[:3] + [""]))
    solo = api.encode(api.load_tokenizer(str(uncased_vocab)), text_a[:3] + [""], None, 64)
    np.testing.assert_allclose(
        single["probabilities"].numpy(),
        tf.nn.softmax(exported["model"](solo, training=False)["logits"]).numpy(),
        rtol=1e-5, atol=1e-6)


def test_a_multi_label_classifier_exports_its_labels_over_the_thresholds(exported, tmp_path):
    """--multi_label --threshold: the same checkpoint served with a sigmoid per label; the
    string signatures return the names over each label's threshold."""
    import tensorflow as tf

    from bert_tf import api
    flags = dict(exported["flags"], vocab_file=exported["root"] / "vocab.moved",
                 export_dir=tmp_path / "multi", multi_label=True, threshold="0.5,0.48,0.52")
    export(flags)
    text_a = [a for a, _ in exported["pairs"]]
    inputs = api.encode(api.load_tokenizer(str(exported["root"] / "vocab.moved")), text_a,
                        None, 64)
    expected = tf.sigmoid(exported["model"](inputs, training=False)["logits"]).numpy()
    served = tf.saved_model.load(str(tmp_path / "multi")).signatures["serve_text"](
        text=tf.constant(text_a))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, rtol=1e-5, atol=1e-6)
    over = served["probabilities"].numpy() > np.float32([0.5, 0.48, 0.52])
    assert 0 < over.sum() < over.size
    assert [[name.decode() for name in row if name] for row in served["labels"].numpy()] == [
        [label for label, chosen in zip("abc", row) if chosen] for row in over]
    # The export records that it is multi-label, and each label's threshold.
    marker = json.loads((tmp_path / "multi" / "assets" / "bert_tf_export.json").read_text())
    assert (marker["labels"], marker["multi_label"], marker["thresholds"]) == (
        ["a", "b", "c"], True, [0.5, 0.48, 0.52])


def test_assets_hold_the_vocabulary_and_config(exported):
    export_dir = exported["root"] / "exported"
    assets = sorted(os.listdir(export_dir / "assets"))
    assert "bert_config.json" in assets and any(a.startswith("vocab") for a in assets)
    assert json.loads((export_dir / "assets" / "bert_config.json").read_text())[
        "hidden_size"] == 32
    marker = json.loads((export_dir / "assets" / "bert_tf_export.json").read_text())
    assert (marker["task"], marker["labels"], marker["multi_label"]) == (
        "classifier", ["a", "b", "c"], False)
    assert "thresholds" not in marker
    graph = (export_dir / "saved_model.pb").read_bytes()
    assert str(exported["root"]).encode() not in graph  # no absolute path baked in


def test_a_checkpoint_without_the_head_is_refused(exported, tmp_path):
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    encoder_only = write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)),
                                        tmp_path / "encoder.ckpt")
    flags = dict(exported["flags"], init_checkpoint=encoder_only,
                 vocab_file=exported["root"] / "vocab.moved", export_dir=tmp_path / "out")
    output = export(flags, expect=2)
    assert "error: --init_checkpoint: " in output and "output_weights" in output
    assert not (tmp_path / "out").exists()


def test_string_signature_serves_without_tensorflow_text(exported, tmp_path):
    """The exported classifier, loaded in a fresh process that cannot import tensorflow_text,
    gives the in-process probabilities on raw strings."""
    import textwrap

    import tensorflow as tf

    from conftest import env_without_tensorflow_text
    pairs = exported["pairs"][:6]
    path = str(exported["root"] / "exported")
    expected = tf.saved_model.load(path).signatures["serve_text_pair"](
        text_a=tf.constant([a for a, _ in pairs]),
        text_b=tf.constant([b for _, b in pairs]))["probabilities"].numpy()
    script = textwrap.dedent("""
        import json, sys
        import tensorflow as tf
        pairs = json.loads(sys.argv[2])
        served = tf.saved_model.load(sys.argv[1]).signatures["serve_text_pair"](
            text_a=tf.constant([a for a, _ in pairs]), text_b=tf.constant([b for _, b in pairs]))
        print(json.dumps({"blocked": "tensorflow_text" not in sys.modules,
                          "probabilities": served["probabilities"].numpy().tolist()}))
        """)
    out = subprocess.run([sys.executable, "-c", script, path, json.dumps(pairs)],
                         capture_output=True, text=True,
                         env=env_without_tensorflow_text(tmp_path / "blocker"))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["blocked"]
    np.testing.assert_allclose(result["probabilities"], expected, rtol=1e-6, atol=1e-7)


def conll_sentences(path, count, skip=0):
    """The first `count` sentences (lists of words) of a CoNLL file after `skip`."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] != "-DOCSTART-":
                words.append(parts[0])
            elif words:
                sentences.append(words)
                words = []
    return sentences[skip:skip + count]


def test_ner_string_signature_tags_each_word_as_run_ner(tmp_path, uncased_vocab, shared_data):
    """serve_text of an exported TaggingTask: one tag per word, the Keras model's prediction at
    the word's first piece (FullTokenizer word by word, as tagging_data); words past
    max_seq_length - 2 pieces dropped."""
    import tensorflow as tf

    from bert_tf import tokenization
    from bert_tf.tasks.ner import preprocessor as ner_preprocessor
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertTokenClassifier
    labels = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    model = BertTokenClassifier(BertConfig.from_dict(TINY), len(labels))
    flags = {"init_checkpoint": write_tf1_checkpoint(model, tmp_path / "model.ckpt"),
             "bert_config_file": tmp_path / "bert_config.json", "vocab_file": uncased_vocab,
             "task": "ner", "max_seq_length": 32, "label_list": ",".join(labels),
             "export_dir": tmp_path / "exported"}
    export(flags)
    sentences = conll_sentences(shared_data / "conll2003" / "valid.txt", 10, skip=3)
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serve_text"](
        text=tf.constant([" ".join(words) for words in sentences] + [""]))

    tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    dropped = 0
    for i, words in enumerate(sentences + [[]]):
        pieces = ner_preprocessor.word_pieces(tokenizer, words)
        starts = np.cumsum([0] + [len(p) for p in pieces])[:-1]
        kept = [w for w, s in zip(words, starts) if s < 30]
        dropped += len(words) - len(kept)
        ids = tokenizer.convert_tokens_to_ids(
            ["[CLS]"] + [p for word in pieces for p in word][:30] + ["[SEP]"])
        inputs = {"input_ids": np.array([ids], np.int32),
                  "input_mask": np.ones((1, len(ids)), np.int32),
                  "segment_ids": np.zeros((1, len(ids)), np.int32)}
        predicted = model(inputs, training=False)["logits"].numpy()[0].argmax(-1)
        expected = [labels[predicted[s + 1]] for s in starts[:len(kept)]]
        n = int(served["num_words"][i])
        assert [w.decode() for w in served["words"][i, :n].numpy()] == kept
        assert [t.decode() for t in served["tags"][i, :n].numpy()] == expected
        assert all(t == b"" for t in served["tags"][i, n:].numpy())
    assert dropped > 0  # some sentence is longer than one window


def best_span(start_logits, end_logits, doc_start, doc_end, n_best=20, max_answer_length=30):
    """The original's post-processing of one window, numpy: (start, end) or None; the n-best
    starts and ends among the context's positions (the served signature's rule: the answer does
    not depend on the padding)."""
    context = range(doc_start, doc_end)
    starts = sorted(context, key=lambda i: start_logits[i], reverse=True)
    ends = sorted(context, key=lambda i: end_logits[i], reverse=True)
    spans = [(start_logits[s] + end_logits[e], s, e) for s in starts[:n_best]
             for e in ends[:n_best] if s <= e
             and e - s + 1 <= max_answer_length]
    if not spans:
        return None
    return max(spans, key=lambda span: span[0])[1:]  # max keeps the first of ties


def test_squad_string_signature_returns_the_best_span(tmp_path, uncased_vocab, shared_data):
    """serve_text_pair of an exported SquadTask (question, context): the best span of the
    Keras model's logits under the original's rules (numpy), de-tokenized as its tok_text."""
    import tensorflow as tf

    from bert_tf import tokenization
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertSpanLabeler
    import keras
    keras.utils.set_random_seed(1)
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    model = BertSpanLabeler(BertConfig.from_dict(TINY))
    flags = {"init_checkpoint": write_tf1_checkpoint(model, tmp_path / "model.ckpt"),
             "bert_config_file": tmp_path / "bert_config.json", "vocab_file": uncased_vocab,
             "task": "squad", "max_seq_length": 96, "max_query_length": 16,
             "max_answer_length": 5, "export_dir": tmp_path / "exported"}
    export(flags)
    with open(shared_data / "SQuAD" / "dev-v1.1.json", encoding="utf-8") as f:
        paragraphs = json.load(f)["data"][0]["paragraphs"]
    pairs = [(p["qas"][0]["question"], p["context"]) for p in paragraphs[:5]]
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serve_text_pair"](
        text_a=tf.constant([q for q, _ in pairs]), text_b=tf.constant([c for _, c in pairs]))

    tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    found = 0
    for i, (question, context) in enumerate(pairs):
        query = tokenizer.tokenize(question)[:16]
        doc = tokenizer.tokenize(context)[:96 - 3 - len(query)]
        tokens = ["[CLS]"] + query + ["[SEP]"] + doc + ["[SEP]"]
        ids = tokenizer.convert_tokens_to_ids(tokens) + [0] * (96 - len(tokens))
        inputs = {"input_ids": np.array([ids], np.int32),
                  "input_mask": np.array([[1] * len(tokens) + [0] * (96 - len(tokens))],
                                         np.int32),
                  "segment_ids": np.array([[0] * (len(query) + 2) + [1] * (len(doc) + 1)
                                           + [0] * (96 - len(tokens))], np.int32)}
        outputs = model(inputs, training=False)
        start_logits = outputs["start_logits"].numpy()[0]
        end_logits = outputs["end_logits"].numpy()[0]
        span = best_span(start_logits, end_logits, len(query) + 2, len(query) + 2 + len(doc),
                         max_answer_length=5)
        if span is None:  # the original's "empty" prediction
            assert served["answer"][i].numpy() == b"empty" and served["score"][i] == 0
            continue
        found += 1
        start, end = span
        text = " ".join(tokens[start:end + 1]).replace(" ##", "").replace("##", "").strip()
        assert served["answer"][i].numpy().decode() == " ".join(text.split())
        np.testing.assert_allclose(served["start_logit"][i], start_logits[start], atol=1e-5)
        np.testing.assert_allclose(served["end_logit"][i], end_logits[end], atol=1e-5)
        np.testing.assert_allclose(served["score"][i], start_logits[start] + end_logits[end],
                                   atol=1e-5)
    assert found >= 3


def test_masked_lm_string_signature_returns_top_k_tokens(tmp_path, uncased_vocab, shared_data):
    """serve_text of an exported pretraining model: at each literal "[MASK]", the top-k tokens
    and probabilities of the Keras model's masked-LM head (inputs from the Python tokenizer on
    the parts around the masks)."""
    import tensorflow as tf

    from bert_tf import tokenization
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    model = BertPretrainer(BertConfig.from_dict(TINY))
    bias = np.random.default_rng(0).normal(0, 2, TINY["vocab_size"]).astype(np.float32)
    model.masked_lm.output_bias.assign(bias)  # well-separated probabilities: a stable top-k
    flags = {"init_checkpoint": write_tf1_checkpoint(model, tmp_path / "model.ckpt"),
             "bert_config_file": tmp_path / "bert_config.json", "vocab_file": uncased_vocab,
             "task": "pretraining", "top_k": 3, "max_seq_length": 48,
             "export_dir": tmp_path / "exported"}
    export(flags)
    with open(shared_data / "sample_text.txt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if len(line.split()) > 6][:3]
    texts = [" ".join(w if i % 4 != 2 else "[MASK]" for i, w in enumerate(line.split()))
             for line in lines]
    texts += ["[MASK] went to the [MASK][MASK] store.", "no mask here", "[MASK]", ""]
    loaded = tf.saved_model.load(str(tmp_path / "exported"))
    assert sorted(loaded.signatures) == ["serve_text", "serving_default"]
    served = loaded.signatures["serve_text"](text=tf.constant(texts))

    tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    vocab = tokenizer.inv_vocab
    for i, text in enumerate(texts):
        tokens = []
        for j, part in enumerate(text.split("[MASK]")):
            tokens += (["[MASK]"] if j else []) + tokenizer.tokenize(part)
        tokens = ["[CLS]"] + tokens[:46] + ["[SEP]"]
        positions = [p for p, t in enumerate(tokens) if t == "[MASK]"]
        n = int(served["mask"][i].numpy().sum())
        assert n == len(positions) == text.count("[MASK]")
        assert served["positions"][i, :n].numpy().tolist() == positions
        if not positions:
            continue
        ids = tokenizer.convert_tokens_to_ids(tokens)
        inputs = {"input_ids": np.array([ids], np.int32),
                  "input_mask": np.ones((1, len(ids)), np.int32),
                  "segment_ids": np.zeros((1, len(ids)), np.int32),
                  "masked_lm_positions": np.array([positions], np.int32)}
        probabilities = np.exp(model(inputs, training=False)["masked_lm_log_probs"].numpy()[0])
        top = np.argsort(-probabilities, axis=-1)[:, :3]
        assert [[t.decode() for t in row] for row in served["tokens"][i, :n].numpy()] == [
            [vocab[t] for t in row] for row in top]
        np.testing.assert_allclose(served["probabilities"][i, :n].numpy(),
                                   np.take_along_axis(probabilities, top, axis=-1),
                                   rtol=1e-4, atol=1e-6)
        assert (served["tokens"][i, n:].numpy() == b"").all()
        by_ids = loaded.signatures["serving_default"](
            **{k: tf.constant(v) for k, v in inputs.items() if k != "masked_lm_positions"})
        assert by_ids["token_ids"][0].numpy().tolist() == top.tolist()


def test_saved_model_cli_runs_the_string_signature(exported, tmp_path):
    """`saved_model_cli run` (TensorFlow's tool, TF1 session loader) on serve_text_pair, without
    tensorflow_text: the in-process probabilities."""
    import pathlib

    import tensorflow as tf

    from conftest import env_without_tensorflow_text
    pairs = exported["pairs"][:4]
    path = str(exported["root"] / "exported")
    expected = tf.saved_model.load(path).signatures["serve_text_pair"](
        text_a=tf.constant([a for a, _ in pairs]),
        text_b=tf.constant([b for _, b in pairs]))["probabilities"].numpy()
    cli = pathlib.Path(sys.executable).parent / "saved_model_cli"
    command = [str(cli)] if cli.exists() else [sys.executable, "-m",
                                                "tensorflow.python.tools.saved_model_cli"]
    out = subprocess.run(
        command + ["run", "--dir", path, "--tag_set", "serve", "--signature_def",
                   "serve_text_pair", "--input_exprs",
                   f"text_a={[a for a, _ in pairs]!r};text_b={[b for _, b in pairs]!r}",
                   "--outdir", str(tmp_path / "out")],
        capture_output=True, text=True, env=env_without_tensorflow_text(tmp_path / "blocker"))
    assert out.returncode == 0, out.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "probabilities.npy"), expected,
                               rtol=1e-6, atol=1e-7)


def test_a_checkpoint_that_does_not_match_the_config_is_refused(exported, tmp_path):
    config = tmp_path / "wider.json"
    config.write_text(json.dumps(dict(TINY, hidden_size=48, intermediate_size=96)))
    flags = dict(exported["flags"], bert_config_file=config,
                 vocab_file=exported["root"] / "vocab.moved", export_dir=tmp_path / "out")
    # The checkpoint's folder has its config: the given one is refused as another model's.
    output = export(flags, expect=2)
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"error: --bert_config_file: {config} is not the config of the "
                           f"model in --init_checkpoint={exported['root']} (hidden_size 48 vs "
                           f"32, intermediate_size 96 vs 64, "), last
    assert not (tmp_path / "out").exists()
    # Without a config beside it, the checkpoint's shapes are checked against the given one.
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in exported["root"].glob("model.ckpt.*"):
        shutil.copy(path, bare / path.name)
    output = export(dict(flags, init_checkpoint=bare / "model.ckpt"), expect=2)
    last = output.strip().splitlines()[-1]
    assert last.startswith("error: ") and "model.ckpt" in last and "shape" in last, last
    assert not (tmp_path / "out").exists()
