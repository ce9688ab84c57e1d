"""Multiple choice: the paper's SWAG task on the runner.

Oracles:
- SWAG's reader: hand-written rows in SWAG's exact CSV layout (its header with the unnamed
  index column, CSV quoting, a test file without labels), whose questions are worked out by
  hand from the recipe of Hugging Face's run_swag (context sent1, endings sent2 + " " +
  endingK);
- the records: the reference release's convert_single_example (../shared/reference) on each
  (context, ending) pair, for every choice of every question, truncation included;
- the model: transformers' BertForMultipleChoice (bench/envs/hf_env.sh's venv) on the same weights
  and inputs, logits within 1e-5;
- training: a multiple-choice set made from the demo corpus (which of 4 sentences follows a
  sentence: the true one shares its document's facts) must be learned well above chance on
  held-out questions, and the run's eval_results.txt / test_results.tsv must be what the
  trained model gives (recomputed with numpy from the model's logits), as must the exported
  SavedModel's signatures;
- bad input: one `error:` line naming the file and line (or flag), exit 2, nothing written.
"""
import json
import re
import subprocess

import numpy as np
import pytest

from bert_tf.errors import InputError
from bert_tf.tasks import classification
from bert_tf.tasks.multiple_choice import reader
from bert_tf.tasks.multiple_choice import task as multiple_choice
from conftest import assert_one_line_error, read_eval_results, require_hf_venv

SWAG_HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
               "ending3,label\n")
SWAG_TRAIN = SWAG_HEADER + (
    '0,lsmdc3001_21_JUMP_STREET-422,17953,"Someone sits on the bed, eyes closed. Someone",'
    '"Someone sits on the bed, eyes closed.",Someone,gold,opens the door.,'
    '"looks up, startled.",pours some water.,"wakes with a start, and sits up.",3\n'
    "1,anetv_jkn6uvmqwh4,3937,A man is sitting on a roof. He,A man is sitting on a roof.,He,"
    "gen,is using wrap to wrap a pair of skis.,is ripping level tiles off.,"
    "is holding a rubik's cube.,starts pulling up roofing on a roof.,3\n"
    '2,anetv_3qJYiGmnPFg,12840,"The boy lifts his body above the height of a pole. The boy",'
    "The boy lifts his body above the height of a pole.,The boy,gold,"
    'lands on his back on to a red mat.,"turns his body around on the mat, then he gets up.",'
    "falls to the ground.,is ready to compete.,0\n")
# val.csv has the same layout; test.csv has no label column.
SWAG_TEST = SWAG_HEADER.replace(",label\n", "\n") + (
    "0,anetv_wIGN9YYHa9M,2141,A woman is seen speaking to the camera. She,"
    "A woman is seen speaking to the camera.,She,gold,holds up a violin.,"
    '"walks away, smiling.","dances, then stops.",sits on a chair.\n')


def swag_dir(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.csv").write_text(SWAG_TRAIN, encoding="utf-8")
    (root / "val.csv").write_text(SWAG_TRAIN, encoding="utf-8")
    (root / "test.csv").write_text(SWAG_TEST, encoding="utf-8")
    return root


def test_swag_files_read_as_the_papers_recipe(tmp_path):
    data = swag_dir(tmp_path / "swag")
    processor = reader.get_processor("SWAG")
    assert processor.num_choices == 4
    examples = classification.read_splits(processor, data, ["train", "eval", "predict"])
    train = examples["train"]
    assert [e.guid for e in train] == ["train-1", "train-2", "train-3"]
    assert train[0].context == "Someone sits on the bed, eyes closed."
    assert train[0].endings == ["Someone opens the door.", "Someone looks up, startled.",
                                "Someone pours some water.",
                                "Someone wakes with a start, and sits up."]
    assert [e.label for e in train] == [3, 3, 0]
    assert train[1].endings[2] == "He is holding a rubik's cube."
    assert train[2].context == "The boy lifts his body above the height of a pole."
    assert train[2].endings[1] == "The boy turns his body around on the mat, then he gets up."
    assert examples["eval"] == [
        reader.ChoiceExample(e.guid.replace("train", "dev"), e.context,
                             e.endings, e.label) for e in train]
    test, = examples["predict"]
    assert (test.guid, test.context, test.label) == (
        "test-1", "A woman is seen speaking to the camera.", 0)  # label: a placeholder
    assert test.endings == ["She holds up a violin.", "She walks away, smiling.",
                            "She dances, then stops.", "She sits on a chair."]


def test_columns_by_name_or_index_tsv_or_csv(tmp_path):
    """Columns by name wherever they are (the header without SWAG's index column, as the
    brief writes it), or by index in a TSV without a header; swag refuses column options."""
    data = tmp_path / "data"
    data.mkdir()
    # SWAG's rows without the index column, and a column order of their own.
    no_index = [line.split(",", 1)[1] for line in SWAG_TRAIN.splitlines()]
    (data / "train.csv").write_text("\n".join(no_index) + "\n")
    processor = reader.get_processor(
        "tsv", context_column="sent1", ending_columns="ending0, ending1,ending2,ending3",
        ending_prefix_column="sent2", label_column="label", skip_header=True, delimiter=",",
        train_file="train.csv")
    swag = reader.get_processor("swag")
    swag_dir(tmp_path / "swag")
    assert processor.get_train_examples(data) == swag.get_train_examples(tmp_path / "swag")

    (data / "train.tsv").write_text("1\tA cat sat.\ton the mat.\tflew away.\n"
                                    "0\tIt rained.\tThe sun shone.\tWe got wet.\n")
    by_index = reader.get_processor(
        "tsv", context_column=1, ending_columns=["2", "3"], label_column=0)
    assert by_index.num_choices == 2
    ChoiceExample = reader.ChoiceExample
    assert by_index.get_train_examples(data) == [
        ChoiceExample("train-0", "A cat sat.", ["on the mat.", "flew away."], 1),
        ChoiceExample("train-1", "It rained.", ["The sun shone.", "We got wet."], 0)]

    with pytest.raises(InputError, match="^ending_columns: is for task_name=tsv; task 'swag' "
                                         "has fixed files and columns$"):
        reader.get_processor("swag", ending_columns="a,b")
    with pytest.raises(InputError, match="^task_name: unknown multiple-choice task 'cola'; "
                                         "valid names: swag, tsv$"):
        reader.get_processor("cola")
    with pytest.raises(InputError, match="^context_column: 'sent1' is a column name, which "
                                         "needs a header line"):
        reader.get_processor("tsv", context_column="sent1",
                             ending_columns="0,1")
    with pytest.raises(InputError, match="^ending_columns: needs the columns of 2 or more "
                                         "endings"):
        reader.get_processor("tsv", context_column=0, ending_columns="1")


# ---- Bad input in the files: an InputError naming the file and line.
GOOD_ROW = "0,v,1,x,Ctx.,He,gold,a.,b.,c.,d.,2\n"
BAD_FILES = [
    ("an ending missing (empty)", GOOD_ROW + "1,v,1,x,Ctx.,He,gold,a.,b.,,d.,2\n",
     "train.csv:3: ending 2 (column 9) is empty: every question needs its context and 4 "
     "endings"),
    ("an ending missing (a field fewer)", GOOD_ROW + "1,v,1,x,Ctx.,He,gold,a.,b.,d.,2\n",
     "train.csv:3: has 11 field(s) where line 1 has 12: every question has the same columns, "
     "its context and 4 endings"),
    ("5 endings where the others have 4", GOOD_ROW + "1,v,1,x,Ctx.,He,gold,a.,b.,c.,d.,e.,2\n",
     "train.csv:3: has 13 field(s) where line 1 has 12"),
    ("a label beyond the endings", GOOD_ROW + "1,v,1,x,Ctx.,He,gold,a.,b.,c.,d.,4\n",
     "train.csv:3: label '4' is not the index of an ending: 0 to 3"),
    ("a negative label", "0,v,1,x,Ctx.,He,gold,a.,b.,c.,d.,-1\n",
     "train.csv:2: label '-1' is not the index of an ending: 0 to 3"),
    ("a label that is a word", "0,v,1,x,Ctx.,He,gold,a.,b.,c.,d.,B\n",
     "train.csv:2: label 'B' is not the index of an ending: 0 to 3"),
    ("an empty context", "0,v,1,x, ,He,gold,a.,b.,c.,d.,1\n",
     "train.csv:2: the context (column 4) is empty"),
    ("an empty line", GOOD_ROW + "\n" + GOOD_ROW, "train.csv:3: is an empty line"),
    ("an unbalanced quote", GOOD_ROW + '1,v,1,x,"Ctx.,He,gold,a.,b.,c.,d.,2\n',
     "train.csv:3: cannot be parsed as comma-separated values"),
    ("no questions", "", "train.csv: has no questions"),
]


@pytest.mark.parametrize("name,rows,expected", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_swag_rows_name_the_file_and_line(tmp_path, name, rows, expected):
    (tmp_path / "train.csv").write_text(SWAG_HEADER + rows, encoding="utf-8")
    processor = reader.get_processor("swag")
    with pytest.raises(InputError) as info:
        processor.get_train_examples(tmp_path)
    assert str(info.value).startswith(f"{tmp_path}/{expected}"), str(info.value)


def test_bad_headers_and_python_examples(tmp_path):
    (tmp_path / "train.csv").write_text(SWAG_HEADER.replace("sent1", "first") + GOOD_ROW)
    with pytest.raises(InputError, match=re.escape(
            f"{tmp_path}/train.csv:1: has no column named 'sent1' (context_column); its "
            f"header is ['', 'video-id', 'fold-ind', 'startphrase', 'first', ")):
        reader.get_processor("swag").get_train_examples(tmp_path)
    (tmp_path / "train.tsv").write_text("ctx\ta\tb\n")
    processor = reader.get_processor("tsv", context_column=0,
                                     ending_columns="1,2,3", label_column=4)
    with pytest.raises(InputError, match=re.escape(
            f"{tmp_path}/train.tsv:1: has 3 field(s): no column 3 (ending_columns)")):
        processor.get_train_examples(tmp_path)
    # Questions made in Python (the API's) are checked before anything is written.
    from bert_tf.model.config import BertConfig
    ChoiceExample = reader.ChoiceExample
    config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16)
    for example, message in (
            (ChoiceExample("q7", "c", ["a", "b", "c"], 0),
             "question 'q7' has 3 endings; every question needs 4"),
            (ChoiceExample("q8", "c", ["a", "b", "c", "d"], 4),
             "question 'q8': label 4 is not the index of an ending: 0 to 3")):
        with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
            multiple_choice.prepare_task(config, {"train": [example]}, 4, None, 16,
                                         tmp_path / "out")
        assert not (tmp_path / "out").exists()
    # Length bucketing would cut [B, T] batches; these are [B, N, T].
    with pytest.raises(InputError, match="^bucket_by_length: is not for multiple choice"):
        multiple_choice.prepare_task(config, {"train": [ChoiceExample("q", "c", list("abcd"), 0)]},
                                     4, None, 16, tmp_path / "out", bucket_by_length=True)
    assert not (tmp_path / "out").exists()


# ---- Records: each choice is the original's convert_single_example of (context, ending).
def test_records_pack_each_choice_as_the_original(tmp_path, refbert, uncased_vocab):
    from bert_tf.model.config import BertConfig
    from bert_tf.text.fast_tokenization import FastTokenizer
    from conftest import decoded_records

    data = swag_dir(tmp_path / "swag")
    processor = reader.get_processor("swag")
    examples = classification.read_splits(processor, data, ["train", "eval", "predict"])
    long_context = " ".join(["The very long context of a question goes on and on."] * 4)
    examples["train"].append(reader.ChoiceExample(
        "long", long_context, ["Short.", "A longer ending, " * 5, "Mid length one.", "x"], 1))
    seq = 24  # every SWAG row here is truncated at 24 pieces, the long one longest first
    lines = []
    prepared = multiple_choice.prepare_task(
        BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=16),
        examples, 4, FastTokenizer(str(uncased_vocab)), seq, tmp_path / "out",
        eval_batch_size=4, predict_batch_size=3, train_batch_size=2, num_train_epochs=1.0,
        log=lines.append)
    assert (prepared.num_train, prepared.num_train_steps, prepared.num_warmup_steps) == (4, 2, 0)
    task = prepared.task
    assert task.name == "multiple_choice" and task.config.num_choices == 4
    assert {mode: records.count for mode, records in task.config.records.items()} == {
        "train": None, "eval": 4, "predict": 3}
    assert lines[0] == "*** multiple choice: 4 endings per question"
    assert lines[2] == f"  eval: 3 questions (+1 padding) -> {tmp_path / 'out' / 'eval.tf_record'}"

    rc = refbert.import_reference("run_classifier")
    tokenizer = refbert.tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    truncated = 0
    for mode, split in (("train", examples["train"]), ("eval", examples["eval"]),
                        ("predict", examples["predict"])):
        records = decoded_records(tmp_path / "out" / f"{mode}.tf_record")
        assert len(records) == task.config.records[mode].count or mode == "train"
        for record, example in zip(records, split):
            assert record["label_ids"] == ("int64_list", [example.label])
            assert record["is_real_example"] == ("int64_list", [1])
            for k, ending in enumerate(example.endings):
                expected = rc.convert_single_example(
                    k, rc.InputExample("x", example.context, ending, "0"), ["0"], seq,
                    tokenizer)
                for name in ("input_ids", "input_mask", "segment_ids"):
                    kind, values = record[name]
                    assert kind == "int64_list" and len(values) == 4 * seq
                    assert values[k * seq:(k + 1) * seq] == getattr(expected, name), (
                        mode, example.guid, k, name)
                truncated += expected.input_mask[-1] == 1
        for padding in records[len(split):]:  # all zeros, not counted
            assert padding["is_real_example"] == ("int64_list", [0])
            assert set(padding["input_ids"][1]) == {0} and padding["label_ids"][1] == [0]
    assert truncated > 4  # the truncation rule was exercised


# ---- The model: transformers' BertForMultipleChoice on the same weights.
HF_SIDE = r'''
import sys
import numpy as np
import torch
import transformers

directory, inputs_path, output_path = sys.argv[1:4]
config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=32,
                                 max_position_embeddings=24, type_vocab_size=2,
                                 hidden_act="gelu")
torch.manual_seed(0)
model = transformers.BertForMultipleChoice(config)
with torch.no_grad():  # weights far from their initial values, so a misplaced one shows
    for name, parameter in model.named_parameters():
        if "LayerNorm.weight" in name:
            parameter.uniform_(0.5, 1.5)
        elif name.startswith("classifier"):
            parameter.normal_(0.0, 1.0)
        else:
            parameter.normal_(0.0, 0.1 if parameter.dim() == 1 else 0.3)
model.save_pretrained(directory, safe_serialization=True)
model.eval()
inputs = np.load(inputs_path)
with torch.no_grad():
    logits = model(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                   attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                   token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long)).logits
np.save(output_path, logits.numpy())
'''


def test_logits_equal_transformers_bert_for_multiple_choice(tmp_path):
    """A BertForMultipleChoice (random weights, saved by transformers) loads into ours with
    nothing new or unused (classifier.weight/bias are our output_weights/output_bias), and
    both give the same logits on packed questions of 4 choices with padding."""
    python = require_hf_venv("transformers", "the oracle BertForMultipleChoice")
    from bert_tf.model.checkpoints import hf_directory_files, load_checkpoint
    from bert_tf.model.models import BertMultipleChoice

    rng = np.random.default_rng(0)
    batch, choices, length = 3, 4, 12
    lengths_a = rng.integers(2, 6, (batch, choices))
    lengths = lengths_a + rng.integers(2, length - 5, (batch, choices))
    position = np.arange(length)
    mask = (position < lengths[..., None]).astype(np.int32)
    segments = ((position >= lengths_a[..., None]) & (mask > 0)).astype(np.int32)
    ids = (rng.integers(5, 40, (batch, choices, length)) * mask).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    np.savez(tmp_path / "inputs.npz", **inputs)
    (tmp_path / "hf_side.py").write_text(HF_SIDE)
    result = subprocess.run([str(python), str(tmp_path / "hf_side.py"), str(tmp_path / "hf"),
                             str(tmp_path / "inputs.npz"), str(tmp_path / "logits.npy")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = np.load(tmp_path / "logits.npy")

    config, _, _ = hf_directory_files(tmp_path / "hf")
    model = BertMultipleChoice(config)
    report = load_checkpoint(model, tmp_path / "hf")
    assert report.format == "hugging face" and report.new == [] and report.unused == []
    assert "output_weights" in report.loaded and "output_bias" in report.loaded
    logits = model(inputs)["logits"].numpy()
    assert logits.shape == (batch, choices)
    assert np.ptp(expected, axis=1).min() > 0.1  # the choices' scores differ: a real check
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=0)
    # The task's path (the last layer at [CLS] only) gives the same.
    task = multiple_choice.MultipleChoiceTask(multiple_choice.MultipleChoiceConfig(config))
    np.testing.assert_allclose(task.outputs(model, inputs, training=False)["logits"], expected,
                               atol=1e-5, rtol=0)


# ---- Training: which of 4 sentences of the demo corpus follows a sentence.
DEMO_SEQ = 16  # names come early in the demo's sentences: 16 pieces keep most of them
# One layer, computed at [CLS] only (the task's model skips the last layer's other positions):
# its wide feed-forward layer is cheap, and it is what learns fast here. [CLS] attends to the
# context and the ending at once; the feed-forward units then tell a fact seen twice (the
# person's name pieces, city, trade, ...) from two different ones. Measured over 10 seeds
# (200 steps): 1,024 units gave held-out accuracy 0.44-0.75, 128 units 0.35-0.78.
DEMO_CONFIG = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
               "intermediate_size": 1024, "max_position_embeddings": 32,
               "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
               # Wider than BERT's 0.02: a model this small then leaves the start's plateau
               # (every ending scored alike) sooner.
               "initializer_range": 0.1}
ENDINGS = "ending0,ending1,ending2,ending3"


def demo_vocab(path):
    """Every word of the demo corpus's templates and facts, and its name syllables as first
    and `##` pieces (invented names are split into them)."""
    from data_tools import demo_corpus as dc

    words = set()
    for template in dc._TEMPLATES:
        words.update(re.findall(r"[a-z]+|[.,]", template.lower()))
    for group in (dc._CITIES, dc._TRADES, dc._PETS, dc._COLOURS, dc._FOODS, dc._DAYS):
        words.update(word.lower() for word in group)
    syllables = sorted(dc._SYLLABLES)
    tokens = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(words - set(syllables))
              + syllables + ["##" + s for s in syllables])
    path.write_text("\n".join(tokens) + "\n")
    return len(tokens)


def train_on_demo(root, num_train=3200, epochs=2.0, seed=1, learning_rate=5e-4):
    """Writes the demo's multiple-choice task (train, 200 dev and 30 test questions about other
    people) and trains a 1-layer BERT from scratch on it with the runner: train, eval, predict
    and export. Returns (results, the PreparedTask, the settings)."""
    from data_tools import demo_corpus
    from bert_tf.model.config import BertConfig
    from bert_tf.serving.export import trained_model_exporter
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings

    data = root / "data"
    data.mkdir(parents=True)
    demo_corpus.write_choice_task(data, num_train=num_train, num_dev=200, num_test=30, seed=2)
    vocab_size = demo_vocab(root / "vocab.txt")
    config = dict(DEMO_CONFIG, vocab_size=vocab_size)
    (root / "bert_config.json").write_text(json.dumps(config))
    processor = reader.get_processor(
        "tsv", context_column="context", ending_columns=ENDINGS, label_column="label",
        skip_header=True)
    examples = classification.read_splits(processor, data, ["train", "eval", "predict"])
    out = root / "out"
    prepared = multiple_choice.prepare_task(
        BertConfig.from_dict(config), examples, 4,
        FastTokenizer(str(root / "vocab.txt")), DEMO_SEQ, out, eval_batch_size=40,
        predict_batch_size=8, train_batch_size=32, num_train_epochs=epochs,
        warmup_proportion=0.1, dropout_rate=0.0, log=lambda line: None)
    settings = RunSettings(
        output_dir=str(out), do_train=True, do_eval=True, do_predict=True,
        train_batch_size=32, eval_batch_size=40, predict_batch_size=8,
        learning_rate=learning_rate,
        num_train_steps=prepared.num_train_steps, num_warmup_steps=prepared.num_warmup_steps,
        seed=seed, log_steps=1000, vocab_file=str(root / "vocab.txt"))
    export = trained_model_exporter(str(root / "export"), settings.vocab_file,
                                    settings.do_lower_case, settings.output_dir)
    results = runner.run(prepared.task, settings, log=lambda line: None, export=export)
    return results, prepared, settings


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("choice_demo")
    results, prepared, settings = train_on_demo(root)
    return {"root": root, "results": results, "task": prepared.task, "settings": settings}


def demo_questions(root, split):
    """(contexts, endings, labels or None) of the demo task's dev.tsv or test.tsv."""
    lines = (root / "data" / split).read_text().splitlines()[1:]
    rows = [line.split("\t") for line in lines]
    return ([row[0] for row in rows], [row[1:5] for row in rows],
            [int(row[5]) for row in rows] if len(rows[0]) > 5 else None)


def trained_logits(trained, contexts, endings):
    """The trained checkpoint's logits, computed here: its model restored, the questions packed
    (bert_tf.text.packing.pack_choices: the records' packing, checked against the original's
    above)."""
    import tensorflow as tf

    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.text.packing import pack_choices

    task = trained["task"]
    model = task.build_model()
    latest = tf.train.latest_checkpoint(trained["settings"].output_dir)
    tf.train.Checkpoint(model=model).restore(latest).expect_partial()
    packed = pack_choices(FastTokenizer(str(trained["root"] / "vocab.txt")), contexts, endings,
                          max_seq_length=DEMO_SEQ)
    return model(packed, return_encoder_outputs=False)["logits"].numpy().astype(np.float64), \
        packed


def test_training_on_the_demo_set_beats_chance(trained):
    """Chance is 0.25; 200 held-out questions make its standard deviation 0.03, so 0.40 is
    5 of them above it (this seed gives 0.575; others 0.44-0.75)."""
    results = trained["results"]
    assert results["eval_accuracy"] >= 0.40, results
    assert results["eval_loss"] < 1.25, results  # chance: log(4) = 1.386
    # 3,200 questions, 2 epochs, batch 32.
    assert results["global_step"] == trained["settings"].num_train_steps == 200
    text = (trained["root"] / "out" / "eval_results.txt").read_text()
    assert re.fullmatch(r"eval_accuracy = \S+\neval_loss = \S+\nglobal_step = 200\n"
                        r"loss = \S+\n", text), text


def test_eval_results_and_predictions_are_the_trained_models(trained):
    """eval_results.txt and test_results.tsv from the model's logits (numpy): accuracy and
    cross-entropy over the 200 dev questions; 30 lines of 4 probabilities (the 2 padding
    questions left out)."""
    contexts, endings, labels = demo_questions(trained["root"], "dev.tsv")
    logits, _ = trained_logits(trained, contexts, endings)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    results = trained["results"]
    assert results["eval_accuracy"] == pytest.approx(np.mean(logits.argmax(1) == labels),
                                                     abs=1e-6)
    assert results["eval_loss"] == pytest.approx(-np.mean(log_probs[np.arange(200), labels]),
                                                 rel=1e-4)
    contexts, endings, labels = demo_questions(trained["root"], "test.tsv")
    assert labels is None and len(contexts) == 30
    logits, _ = trained_logits(trained, contexts, endings)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    lines = (trained["root"] / "out" / "test_results.tsv").read_text().splitlines()
    written = np.array([[float(p) for p in line.split("\t")] for line in lines])
    assert written.shape == (30, 4)
    np.testing.assert_allclose(written, probabilities, atol=2e-6)


def test_exported_savedmodel_serves_token_ids_and_questions(trained):
    """serving_default on [batch, 4, length] token ids and serve_choices on (context,
    endings) strings give the trained model's probabilities; serve_choices takes other
    numbers of endings too."""
    import tensorflow as tf

    contexts, endings, _ = demo_questions(trained["root"], "test.tsv")
    logits, packed = trained_logits(trained, contexts, endings)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    loaded = tf.saved_model.load(str(trained["root"] / "export"))
    assert sorted(loaded.signatures) == ["serve_choices", "serving_default"]
    served = loaded.signatures["serving_default"](**{name: tf.constant(value)
                                                     for name, value in packed.items()})
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    np.testing.assert_allclose(served["logits"], logits, atol=1e-4)
    assert served["choice"].numpy().tolist() == logits.argmax(1).tolist()
    served = loaded.signatures["serve_choices"](context=tf.constant(contexts),
                                                endings=tf.constant(endings))
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    assert served["choice"].numpy().tolist() == logits.argmax(1).tolist()
    three = [row[:3] for row in endings[:5]]
    logits_3, _ = trained_logits(trained, contexts[:5], three)
    served = loaded.signatures["serve_choices"](context=tf.constant(contexts[:5]),
                                                endings=tf.constant(three))
    np.testing.assert_allclose(served["logits"], logits_3, atol=1e-4)


# ---- The command lines.
@pytest.mark.slow
def test_command_lines_evaluate_predict_and_export_as_the_run(trained, tmp_path):
    """run_multiple_choice on the trained checkpoint gives the run's eval numbers and
    test_results.tsv; export_savedmodel --task=multiple_choice serves what the run's export
    serves."""
    import tensorflow as tf

    from conftest import run_command_line

    root = trained["root"]
    model_flags = {"vocab_file": root / "vocab.txt", "bert_config_file": root / "bert_config.json",
                   "init_checkpoint": root / "out", "max_seq_length": DEMO_SEQ}
    status, output = run_command_line("run.run_multiple_choice", dict(
        model_flags, task_name="tsv", data_dir=root / "data", context_column="context",
        ending_columns=ENDINGS, label_column="label", skip_header=True,
        output_dir=tmp_path / "out", do_eval=True, do_predict=True, eval_batch_size=40))
    assert status == 0, output[-3000:]
    ours = (tmp_path / "out" / "eval_results.txt").read_text().splitlines()
    run = (root / "out" / "eval_results.txt").read_text().splitlines()
    assert [line for line in ours if line.startswith("eval_")] == [
        line for line in run if line.startswith("eval_")]
    assert (tmp_path / "out" / "test_results.tsv").read_text() == (
        root / "out" / "test_results.tsv").read_text()

    status, output = run_command_line("run.export_savedmodel", dict(
        model_flags, task="multiple_choice", export_dir=tmp_path / "export"))
    assert status == 0, output[-3000:]
    contexts, endings, _ = demo_questions(root, "test.tsv")
    inputs = {"context": tf.constant(contexts), "endings": tf.constant(endings)}
    exported = tf.saved_model.load(str(tmp_path / "export")).signatures["serve_choices"]
    expected = tf.saved_model.load(str(root / "export")).signatures["serve_choices"]
    np.testing.assert_allclose(exported(**inputs)["probabilities"],
                               expected(**inputs)["probabilities"], atol=1e-6)


@pytest.mark.slow
def test_command_line_keeps_the_best_checkpoint(trained, tmp_path):
    """run_multiple_choice with evaluation every 2 steps keeps the checkpoint of the lowest
    dev loss among them and evaluates it last (eval_results.txt: its step and values)."""
    from conftest import eval_history, run_command_line

    root = trained["root"]
    output_dir = tmp_path / "out"
    status, output = run_command_line("run.run_multiple_choice", dict(
        vocab_file=root / "vocab.txt", bert_config_file=root / "bert_config.json",
        init_checkpoint=root / "out", max_seq_length=DEMO_SEQ, task_name="tsv",
        data_dir=root / "data", context_column="context", ending_columns=ENDINGS,
        label_column="label", skip_header=True, output_dir=output_dir, do_train=True,
        do_eval=True, eval_during_training=True, keep_best_checkpoint=True,
        best_metric="eval_loss", save_checkpoints_steps=2, num_train_epochs=0.04,
        learning_rate=5e-3, warmup_proportion=0, eval_batch_size=40, seed=1))
    assert status == 0, output[-3000:]
    history = eval_history(output, "eval_loss")
    steps = sorted(history)
    assert len(steps) >= 3 and steps == list(range(2, steps[-1] + 1, 2)), steps
    best_step = min(history, key=lambda step: (history[step], step))
    results = read_eval_results(output_dir / "eval_results.txt")
    assert int(results["best_step"]) == int(results["global_step"]) == best_step
    assert float(results["eval_loss"]) == pytest.approx(history[best_step], abs=1e-6)
    assert (output_dir / "best" / f"model.ckpt-{best_step}.index").exists()


def bad_swag_dir(root):
    data = swag_dir(root / "swag")
    (data / "val.csv").write_text(SWAG_TRAIN.replace(",3\n1,", ",7\n1,"))  # line 2's label
    (data / "train.csv").write_text(SWAG_TRAIN.replace(",is ripping level tiles off.,", ",,"))
    tsv = root / "tsv"
    tsv.mkdir()
    (tsv / "train.tsv").write_text("c\ta\tb\tc\td\t0\nc\ta\tb\tc\td\t1\n")
    (tsv / "dev.tsv").write_text("c\ta\tb\tc\td\t0\nc\ta\tb\tc\td\te\t1\n")  # 5 endings
    (tsv / "headered.tsv").write_text("context\te0\te1\te2\te3\tlabel\nc\ta\tb\tc\td\t0\n")
    return data, tsv


TSV_FLAGS = {"task_name": "tsv", "context_column": 0, "ending_columns": "1,2,3,4",
             "label_column": 5}
COMMAND_LINE_CASES = [
    ("a label outside 0..N-1", lambda d, t: {"task_name": "swag", "data_dir": d, "do_eval": True},
     "error: {swag}/val.csv:2: label '7' is not the index of an ending: 0 to 3"),
    ("N different between rows", lambda d, t: dict(TSV_FLAGS, data_dir=t, do_train=True,
                                                   do_eval=True),
     "error: {tsv}/dev.tsv:2: has 7 field(s) where line 1 has 6: every question has the same "
     "columns, its context and 4 endings"),
    ("a missing ending", lambda d, t: {"task_name": "swag", "data_dir": d, "do_train": True},
     "error: {swag}/train.csv:3: ending 1 (column 8) is empty"),
    # A header read as a question.
    ("a header without --skip_header",
     lambda d, t: dict(TSV_FLAGS, data_dir=t, train_file="headered.tsv", do_train=True),
     "error: {tsv}/headered.tsv:1: label 'label' is not the index of an ending: 0 to 3; if line "
     "1 is a header, pass --skip_header"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,make,expected", COMMAND_LINE_CASES,
                         ids=[c[0] for c in COMMAND_LINE_CASES])
def test_bad_input_is_one_error_line_and_nothing_is_written(tmp_path, uncased_vocab, name, make,
                                                            expected):
    swag, tsv = bad_swag_dir(tmp_path)
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(DEMO_CONFIG, vocab_size=30522)))
    flags = dict(make(swag, tsv), vocab_file=uncased_vocab, max_seq_length=16,
                 bert_config_file=tmp_path / "bert_config.json", output_dir=tmp_path / "out")
    assert_one_line_error("run.run_multiple_choice", flags,
                          expected.format(swag=swag, tsv=tsv))
    assert not (tmp_path / "out").exists()


def test_serve_choices_says_what_is_wrong_with_its_inputs(tmp_path, uncased_vocab):
    """serve_choices checks its inputs in the graph: `context` and `endings` of
    different batch sizes, or no ending, fail with an InvalidArgumentError (it is a SavedModel)
    that names them and their counts, not at an op deep inside (Minimum, ArgMax); other
    numbers of endings are served."""
    import tensorflow as tf

    from bert_tf.model.config import BertConfig
    from bert_tf.serving import export
    config = BertConfig.from_dict(dict(DEMO_CONFIG, vocab_size=30522))
    task = multiple_choice.MultipleChoiceTask(multiple_choice.MultipleChoiceConfig(
        bert_config=config, max_seq_length=16, num_choices=4))
    export.save(task, task.build_model(), str(tmp_path / "export"), str(uncased_vocab),
                log=lambda line: None)
    serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serve_choices"]
    served = serve(context=tf.constant(["He sat.", "She ran."]),
                   endings=tf.constant([["a", "b", "c"], ["d", "e", "f"]]))
    assert served["probabilities"].shape == (2, 3) and served["choice"].shape == (2,)
    cases = [(["He sat.", "She ran.", "It rained."], [["a", "b"], ["c", "d"]],
              "serve_choices: `context` holds 3 questions but `endings` 2 rows of endings; give "
              "one row of endings per context"),
             (["He sat."], tf.zeros([1, 0], tf.string),
              "serve_choices: `endings` holds 0 endings per question; give one or more")]
    for context, endings, expected in cases:
        with pytest.raises(tf.errors.InvalidArgumentError) as failure:
            serve(context=tf.constant(context), endings=tf.constant(endings))
        assert expected in str(failure.value), str(failure.value)
