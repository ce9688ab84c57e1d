"""The tasks' data preparation (`prepare_task` of bert_tf.tasks.classification, ner, squad):
what run_classifier, run_ner, run_squad and bert_tf.api call to turn raw inputs into records.

Oracle: the reference release's run_classifier (bert-tensorflow 1.0.4 in ../shared/reference):
its MrpcProcessor, padding examples (as on TPU) and file_based_convert_examples_to_features
records, decoded, for the same files."""
import pytest

from bert_tf.errors import InputError
from bert_tf.tasks import classification
from conftest import decoded_records

SEQ = 48


@pytest.fixture(scope="module")
def mrpc(tmp_path_factory, shared_data):
    """A small MRPC data dir: real rows, 21 train, 13 dev, 9 test."""
    data = tmp_path_factory.mktemp("prepare") / "MRPC"
    data.mkdir()
    source = shared_data / "glue_data" / "MRPC"
    for name, rows in (("train.tsv", 21), ("dev.tsv", 13), ("test.tsv", 9)):
        with open(source / name, encoding="utf-8") as f:
            lines = f.readlines()[:rows + 1]  # + the header
        (data / name).write_text("".join(lines), encoding="utf-8")
    return data


def test_classification_records_equal_the_original(mrpc, refbert, uncased_vocab, tmp_path):
    """run_classifier's path (read_splits, then prepare_task) writes the original's records:
    train as is, eval and predict padded to their batch sizes with its padding examples."""
    from bert_tf.model.config import BertConfig
    from bert_tf.text.fast_tokenization import FastTokenizer

    processor = classification.get_processor("MRPC")
    label_list = processor.get_labels(mrpc)
    examples = classification.read_splits(processor, mrpc, ["train", "eval", "predict"])
    lines, checked = [], []
    out = tmp_path / "out"
    prepared = classification.prepare_task(
        BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64),
        examples, label_list, FastTokenizer(str(uncased_vocab), do_lower_case=True), SEQ, out,
        task_name="MRPC", eval_batch_size=8, predict_batch_size=4, train_batch_size=4,
        num_train_epochs=2.0, warmup_proportion=0.1,
        check_model=lambda build_model: checked.append(out.exists()), log=lines.append)

    assert checked == [False]  # the model checked before anything was written
    assert prepared.num_train == 21 and prepared.num_train_steps == 10
    assert prepared.num_warmup_steps == 1
    task = prepared.task
    assert isinstance(task, classification.ClassificationTask)
    assert {m: records.paths for m, records in task.config.records.items()} == {
        m: (str(out / f"{m}.tf_record"),) for m in ("train", "eval", "predict")}
    assert {m: records.count for m, records in task.config.records.items()} == {
        "train": None, "eval": 16, "predict": 12}
    assert (task.config.num_labels, task.config.task_metric, task.config.labels) == (
        2, "f1", ["0", "1"])
    assert lines == ["*** task mrpc: 2 labels ['0', '1']",
                     f"  train: 21 examples (+0 padding) -> {out / 'train.tf_record'}",
                     f"  eval: 13 examples (+3 padding) -> {out / 'eval.tf_record'}",
                     f"  predict: 9 examples (+3 padding) -> {out / 'predict.tf_record'}"]
    assert sorted(p.name for p in out.iterdir()) == ["eval.tf_record", "predict.tf_record",
                                                      "train.tf_record"]  # no temporaries

    # The original's run_classifier main on the same files (padding as with --use_tpu).
    import tensorflow as tf
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
    rc = refbert.import_reference("run_classifier")
    reference = rc.MrpcProcessor()
    tokenizer = refbert.tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    for mode, read, batch_size in (("train", reference.get_train_examples, None),
                                   ("eval", reference.get_dev_examples, 8),
                                   ("predict", reference.get_test_examples, 4)):
        split = read(str(mrpc))
        while batch_size and len(split) % batch_size:
            split.append(rc.PaddingInputExample())
        path = str(tmp_path / f"reference_{mode}.tf_record")
        rc.file_based_convert_examples_to_features(split, reference.get_labels(), SEQ,
                                                   tokenizer, path)
        assert decoded_records(task.config.records[mode].paths[0]) == decoded_records(path), \
            mode


def test_nothing_is_written_when_preparation_fails(uncased_vocab, tmp_path):
    """A check that fails (the model check, the training steps) leaves no output folder; the
    API's in-memory examples go the same way."""
    from bert_tf.model.config import BertConfig
    from bert_tf.tokenization import FullTokenizer

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    tokenizer = FullTokenizer(str(uncased_vocab), do_lower_case=True)
    examples = {"train": [classification.InputExample("train-0", "a good film", None, "pos"),
                          classification.InputExample("train-1", "dull", None, "neg")]}
    out = tmp_path / "out"

    def refuse(build_model):
        raise InputError("--init_checkpoint: does not fit")

    with pytest.raises(InputError, match="does not fit"):
        classification.prepare_task(config, examples, ["neg", "pos"], tokenizer, 16, out,
                                    check_model=refuse, log=lambda line: None)
    with pytest.raises(InputError, match="0.0 epochs of 2 examples"):
        classification.prepare_task(config, examples, ["neg", "pos"], tokenizer, 16, out,
                                    num_train_epochs=0.0, log=lambda line: None)
    assert not out.exists()
    prepared = classification.prepare_task(config, examples, ["neg", "pos"], tokenizer, 16, out,
                                           train_batch_size=1, num_train_epochs=1.0,
                                           log=lambda line: None)
    assert (prepared.num_train, prepared.num_train_steps) == (2, 2)
    assert len(decoded_records(prepared.task.config.records["train"].paths[0])) == 2


def test_every_processor_takes_the_data_dir_for_its_labels(tmp_path):
    """get_labels(data_dir) on every processor: a task on the user's files (TSV, JSON Lines)
    infers its labels from the training file there; the others ignore it."""
    (tmp_path / "train.tsv").write_text("good\tpos\nbad\tneg\n")
    (tmp_path / "train.jsonl").write_text('{"text": "good", "label": "pos"}\n'
                                          '{"text": "bad", "label": "neg"}\n')
    for name in classification.PROCESSORS:
        options = dict(text_a_column=0, label_column=1) if name == "tsv" else {}
        processor = classification.get_processor(name, **options)
        assert processor.get_labels(tmp_path) == processor.get_labels(data_dir=tmp_path)
    assert classification.get_processor("tsv", text_a_column=0, label_column=1).get_labels(
        tmp_path) == ["neg", "pos"]
    assert classification.get_processor("jsonl").get_labels(tmp_path) == ["neg", "pos"]
    assert classification.get_processor("mrpc").get_labels(tmp_path) == ["0", "1"]
    assert classification.get_processor("sts-b").get_labels(tmp_path) is None


@pytest.fixture(scope="module")
def tokenizers(uncased_vocab):
    """(the records' Python tokenizer, the exported model's GraphTokenizer) of one vocabulary."""
    from bert_tf.text.graph_tokenization import GraphTokenizer
    from bert_tf.tokenization import FullTokenizer
    return (FullTokenizer(str(uncased_vocab), do_lower_case=True),
            GraphTokenizer(str(uncased_vocab), do_lower_case=True))


def _served(inputs, length):
    """Graph-packed inputs (cut to the batch's longest) as lists padded to `length`."""
    return {name: [list(row) + [0] * (length - len(row)) for row in value.numpy().tolist()]
            for name, value in inputs.items()}


def test_a_task_preprocessor_packs_served_texts_as_its_records(mrpc, shared_data, tokenizers,
                                                               tmp_path):
    """One preprocessor class per task packs both its records (Python tokenizer,
    `write`) and the exported model's raw strings (GraphTokenizer, in the graph): on real
    texts (MRPC pairs, CoNLL-2003 sentences, SQuAD 1.1 questions with their contexts, MRPC
    sentences as a question's endings) the graph half gives each record's inputs, and NER's
    first pieces are the positions its records tag."""
    import json

    import tensorflow as tf

    from bert_tf.tasks.classification.preprocessor import ClassificationPreprocessor
    from bert_tf.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
    from bert_tf.tasks.multiple_choice.reader import ChoiceExample
    from bert_tf.tasks.ner.preprocessor import NerPreprocessor
    from bert_tf.tasks.squad.preprocessor import SquadPreprocessor
    python_tokenizer, graph_tokenizer = tokenizers
    names = ("input_ids", "input_mask", "segment_ids")

    def record_inputs(path):
        return [{name: values for name, (_, values) in record.items() if name in names}
                for record in decoded_records(path)]

    # Classification: MRPC dev pairs.
    examples = classification.read_splits(classification.get_processor("MRPC"), mrpc,
                                          ["eval"])["eval"]
    records = ClassificationPreprocessor(
        python_tokenizer, SEQ, {"eval": examples}, ["0", "1"])
    records.write("eval", examples, str(tmp_path / "classifier.tf_record"))
    served = _served(ClassificationPreprocessor(graph_tokenizer, SEQ).text_inputs(
        tf.constant([e.text_a for e in examples]), tf.constant([e.text_b for e in examples])),
        SEQ)
    written = record_inputs(tmp_path / "classifier.tf_record")
    assert len(written) == len(examples) == 13
    assert [{n: served[n][i] for n in names} for i in range(13)] == written

    # NER: CoNLL-2003 dev sentences, one window each at 64 pieces.
    conll = tmp_path / "conll"
    conll.mkdir()
    with open(shared_data / "conll2003" / "valid.txt", encoding="utf-8") as f:
        text = f.read()
    (conll / "valid.txt").write_text("\n\n".join(text.split("\n\n")[:30]) + "\n",
                                     encoding="utf-8")
    tagger = NerPreprocessor(python_tokenizer, 64, str(conll), {"eval": "valid.txt"},
                                 ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
                                  "B-MISC", "I-MISC"])
    features = tagger.read()["eval"]
    sentences = tagger.sentences["eval"]
    assert len(features) == len(sentences) >= 20  # one window each
    inputs, words, first_piece, in_window = NerPreprocessor(graph_tokenizer, 64).word_inputs(
        tf.constant([" ".join(sentence_words) for sentence_words, _ in sentences]))
    served = _served(inputs, 64)
    assert all(in_window.numpy())
    assert [w.decode() for w in words.flat_values.numpy()] == [
        word for sentence_words, _ in sentences for word in sentence_words]
    rows = words.value_rowids().numpy()
    for i, feature in enumerate(features):
        assert {n: served[n][i] for n in names} == {n: list(getattr(feature, n)) for n in names}
        assert list(first_piece.numpy()[rows == i]) == [
            position for position, mask in enumerate(feature.label_mask) if mask]

    # SQuAD: the first window of SQuAD 1.1 dev questions.
    with open(shared_data / "SQuAD" / "dev-v1.1.json", encoding="utf-8") as f:
        dev = json.load(f)
    article = dict(dev["data"][0], paragraphs=dev["data"][0]["paragraphs"][:3])
    squad_file = tmp_path / "squad.json"
    squad_file.write_text(json.dumps({"version": "1.1", "data": [article]}), encoding="utf-8")
    windows = SquadPreprocessor(python_tokenizer, 96, predict_file=str(squad_file),
                                      doc_stride=32, max_query_length=16, log=lambda _: None)
    windows.read()
    _, questions, features = windows.predict_data
    first = {}
    for feature in features:
        first.setdefault(feature.example_index, feature)
    inputs, query_length = SquadPreprocessor(
        graph_tokenizer, 96, max_query_length=16).question_context_inputs(
        tf.constant([q.question_text for q in questions]),
        tf.constant([" ".join(q.doc_tokens) for q in questions]))
    served = _served(inputs, 96)
    assert len(questions) >= 30
    for i in range(len(questions)):
        assert {n: served[n][i] for n in names} == {n: list(getattr(first[i], n)) for n in names}
        assert query_length.numpy()[i] + 2 == list(first[i].segment_ids).index(1)

    # Multiple choice: MRPC dev sentences as a question's context and endings.
    questions = [ChoiceExample(guid=str(i), context=e.text_a,
                               endings=[e.text_b, examples[i - 1].text_b], label=0)
                 for i, e in enumerate(examples)]
    MultipleChoicePreprocessor(
        python_tokenizer, SEQ, {"eval": questions}, 2).write(
        "eval", questions, str(tmp_path / "choices.tf_record"))
    inputs = MultipleChoicePreprocessor(graph_tokenizer, SEQ).choice_inputs(
        tf.constant([q.context for q in questions]), tf.constant([q.endings for q in questions]))
    served = {name: [[list(row) + [0] * (SEQ - len(row)) for row in choices]
                     for choices in value.numpy().tolist()] for name, value in inputs.items()}
    written = record_inputs(tmp_path / "choices.tf_record")
    assert [{n: sum(served[n][i], []) for n in names} for i in range(13)] == written
