"""bert_tf.tasks.classification's files (`reader`, `glue`) and records (`preprocessor`) against
the original run_classifier and the real GLUE files.

Oracles:
- the reference release's run_classifier (bert-tensorflow 1.0.4 in ../shared/reference): its
  `_read_tsv` (tf.gfile + csv) on real files and an odd one, its processors (MRPC, CoLA on the
  real files; MNLI and XNLI, whose data is not in ../shared, on
  files written here in their layouts from real RTE text), `convert_single_example` with its
  own FullTokenizer, and `file_based_convert_examples_to_features` records, decoded;
- for the GLUE tasks the original lacks: an independent parse of each file that finds the
  columns by the header names of the GLUE layout, and the row counts of ../shared/data/README.md.
"""
import pytest

from bert_tf.tasks import classification as cd
from bert_tf.tasks import preprocessor as tasks_preprocessor
from bert_tf.tasks.classification import preprocessor
from bert_tf.errors import InputError
from bert_tf.tokenization import FullTokenizer
from conftest import decoded_records

SPLITS = ("train", "dev", "test")

# task name -> (folder in glue_data, (train, dev, test) rows from ../shared/data/README.md).
# QNLI has no train file here; the README gives no counts for it: 5463 dev and 5463 test rows
# are the files' line counts less the header (the published GLUE QNLI sizes).
GLUE_TASKS = {
    "cola": ("CoLA", (8551, 1043, 1063)),
    "sst-2": ("SST-2", (67349, 872, 1821)),
    "mrpc": ("MRPC", (3668, 408, 1725)),
    "rte": ("RTE", (2490, 277, 3000)),
    "sts-b": ("STS-B", (5749, 1500, 1379)),
    "wnli": ("WNLI", (635, 71, 146)),
    "qnli": ("QNLI", (None, 5463, 5463)),
}

# The GLUE layout of the tasks the original lacks, by header name: (text_a, text_b, label) of
# train/dev files, (text_a, text_b) of test files, and whether the guid counts rows (SST-2 has
# no index column in train/dev) or uses the index column.
NEW_TASK_COLUMNS = {
    "sst-2": (("sentence", None, "label"), ("sentence", None), "row"),
    "qnli": (("question", "sentence", "label"), ("question", "sentence"), "index"),
    "rte": (("sentence1", "sentence2", "label"), ("sentence1", "sentence2"), "index"),
    "sts-b": (("sentence1", "sentence2", "score"), ("sentence1", "sentence2"), "index"),
    "wnli": (("sentence1", "sentence2", "label"), ("sentence1", "sentence2"), "index"),
}

FIRST_ROWS, LAST_ROWS = 200, 50  # rows per split converted by both (the reference is slow)


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rc(refbert):
    """The reference run_classifier module."""
    return refbert.import_reference("run_classifier")


@pytest.fixture(scope="module")
def glue(shared_data):
    return shared_data / "glue_data"


@pytest.fixture(scope="module")
def tokenizers(refbert, uncased_vocab):
    """(the reference's FullTokenizer, ours) on the uncased vocabulary."""
    return (refbert.tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True),
            FullTokenizer(str(uncased_vocab), do_lower_case=True))


def as_tuple(example):
    """(guid, text_a, text_b, label) of our or the reference's InputExample."""
    return (example.guid, example.text_a, example.text_b, example.label)


def to_reference(rc, example):
    if isinstance(example, cd.PaddingInputExample):
        return rc.PaddingInputExample()
    return rc.InputExample(example.guid, example.text_a, example.text_b, example.label)


def feature_tuple(features_):
    """Fields of our or the reference's InputFeatures."""
    return (list(features_.input_ids), list(features_.input_mask), list(features_.segment_ids),
            features_.label_id, bool(features_.is_real_example))


def sample(examples):
    """The first and last rows of a split (all of a short one)."""
    if len(examples) <= FIRST_ROWS + LAST_ROWS:
        return list(examples)
    return list(examples[:FIRST_ROWS]) + list(examples[-LAST_ROWS:])


def available_splits(processor, data_dir):
    """{split: examples} of the splits whose files exist."""
    found = {}
    for split in SPLITS:
        try:
            found[split] = getattr(processor, f"get_{split}_examples")(data_dir)
        except InputError as e:
            assert "not found" in str(e), e
    return found


def write(path, lines, newline="\n"):
    path.write_text("".join(line + newline for line in lines), encoding="utf-8")
    return path


def raises_input_error(match_parts, call, *args, **kwargs):
    """Calls and returns the InputError message, checking it contains every part."""
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "--" not in message, message  # a Python caller sees argument names, not flags
    for part in match_parts:
        assert part in message, (part, message)
    return message


# ------------------------------------------------------------------------------------------
# Processors
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["mrpc", "cola"])
def test_processors_equal_the_reference_on_real_files(rc, glue, task):
    folder, counts = GLUE_TASKS[task]
    ours = cd.get_processor(task)
    reference = {"mrpc": rc.MrpcProcessor, "cola": rc.ColaProcessor}[task]()
    assert ours.get_labels() == reference.get_labels()
    for split, count in zip(SPLITS, counts):
        got = getattr(ours, f"get_{split}_examples")(glue / folder)
        expected = getattr(reference, f"get_{split}_examples")(str(glue / folder))
        assert [as_tuple(e) for e in got] == [as_tuple(e) for e in expected], (task, split)
        assert len(got) == count


def test_tsv_rows_equal_the_reference_reader(rc, glue, tmp_path):
    """Our reader against the original's `_read_tsv` (tf.gfile + csv): real files, and one with
    CRLF line ends, a lone CR, quotes, blank and ragged lines, and no final newline."""
    (tmp_path / "odd.tsv").write_bytes(
        'h1\th2\r\n"open\tquote" "\r\na\rb\tc\n\n\tx\t\ty\ncafé\t\u2028\x0c\x85end'.encode())
    paths = [tmp_path / "odd.tsv", glue / "MRPC" / "train.tsv", glue / "QNLI" / "dev.tsv",
             glue / "STS-B" / "train.tsv", glue / "CoLA" / "train.tsv"]
    for path in paths:
        got = [row for _, row in cd.read_rows(path)]
        expected = rc.DataProcessor._read_tsv(str(path))
        if expected and expected[0] and expected[0][0].startswith("\ufeff"):
            expected[0][0] = expected[0][0][1:]  # ours drops a byte order mark
        assert got == expected, path
    assert [n for n, _ in cd.read_rows(tmp_path / "odd.tsv")] == [1, 2, 3, 4, 5, 6]


def _text_of(row, header, name):
    return None if name is None else row[header.index(name)]


@pytest.mark.parametrize("task", sorted(NEW_TASK_COLUMNS))
def test_new_glue_tasks_against_their_documented_columns(glue, task):
    """Every row of every split, against a parse that finds the columns by header name."""
    folder, counts = GLUE_TASKS[task]
    processor = cd.get_processor(task)
    labeled_columns, test_columns, guid_kind = NEW_TASK_COLUMNS[task]
    labels = processor.get_labels()
    assert processor.is_regression == (task == "sts-b")
    assert (labels is None) == processor.is_regression
    found = available_splits(processor, glue / folder)
    assert sorted(found) == sorted(s for s, n in zip(SPLITS, counts) if n is not None)
    for split, count in zip(SPLITS, counts):
        if count is None:
            continue
        lines = (glue / folder / f"{split}.tsv").read_text(encoding="utf-8").split("\n")
        assert lines[-1] == ""
        header, rows = lines[0].split("\t"), [line.split("\t") for line in lines[1:-1]]
        expected = []
        for i, row in enumerate(rows, 1):
            row_id = i if guid_kind == "row" or "index" not in header else row[0]
            if split == "test":
                a, b = test_columns
                label = 0.0 if processor.is_regression else labels[0]
            else:
                a, b, label_name = labeled_columns
                label = _text_of(row, header, label_name)
                label = float(label) if processor.is_regression else label
            expected.append((f"{split}-{row_id}", _text_of(row, header, a),
                             _text_of(row, header, b), label))
        got = found[split]
        assert len(got) == count
        assert [as_tuple(e) for e in got] == expected, (task, split)
        if split != "test" and not processor.is_regression:
            assert {e.label for e in got} == set(labels)


MNLI_HEADER = ("index promptID pairID genre sentence1_binary_parse sentence2_binary_parse "
               "sentence1_parse sentence2_parse sentence1 sentence2").split()
XNLI_DEV_HEADER = ("language gold_label sentence1_binary_parse sentence2_binary_parse "
                   "sentence1_parse sentence2_parse sentence1 sentence2 promptID pairID genre "
                   "label1 label2 label3 label4 label5 sentence1_tokenized sentence2_tokenized "
                   "match").split()
NLI_LABELS = ("entailment", "neutral", "contradiction")


@pytest.fixture(scope="module")
def rte_pairs(glue):
    """Real sentence pairs (RTE dev) to fill MNLI and XNLI files with."""
    return [(e.text_a, e.text_b) for e in cd.get_processor("rte").get_dev_examples(glue / "RTE")]


def other_label(i):
    """An annotator's label that differs from gold label NLI_LABELS[i % 3] (so that reading
    the wrong label column shows)."""
    return NLI_LABELS[(i + 1) % 3]


def write_mnli(directory, pairs):
    """MNLI train / dev_(mis)matched / test_(mis)matched files in the GLUE layout."""
    def rows(num_annotator_labels, with_gold=True):
        labels_header = [f"label{k}" for k in range(1, num_annotator_labels + 1)]
        yield "\t".join(MNLI_HEADER + labels_header + ["gold_label"] * with_gold)
        for i, (a, b) in enumerate(pairs):
            labels = [other_label(i)] * num_annotator_labels + [NLI_LABELS[i % 3]] * with_gold
            yield "\t".join([str(i), str(1000 + i), f"{1000 + i}{'enc'[i % 3]}", "fiction",
                             "( x )", "( y )", "(ROOT x)", "(ROOT y)", a, b] + labels)

    directory.mkdir(parents=True, exist_ok=True)
    write(directory / "train.tsv", rows(1))
    for genre in ("matched", "mismatched"):
        write(directory / f"dev_{genre}.tsv", rows(5))
        write(directory / f"test_{genre}.tsv", rows(0, with_gold=False))
    return directory


def test_mnli_matched_and_mismatched_equal_the_reference(rc, tmp_path, rte_pairs):
    data_dir = write_mnli(tmp_path / "MNLI", rte_pairs[:60])
    reference = rc.MnliProcessor()
    for task in ("mnli", "mnli-mm"):
        ours = cd.get_processor(task)
        assert ours.get_labels() == reference.get_labels()
        for split in SPLITS:
            got = getattr(ours, f"get_{split}_examples")(data_dir)
            expected = getattr(reference, f"get_{split}_examples")(str(data_dir))
            if task == "mnli-mm" and split != "train":
                # The reference has no mismatched sets: same rows, other file and guid prefix.
                expected = [rc.InputExample(e.guid.replace("dev_matched", "dev_mismatched"),
                                            e.text_a, e.text_b, e.label) for e in expected]
            assert [as_tuple(e) for e in got] == [as_tuple(e) for e in expected], (task, split)
            if split != "test":
                assert [e.label for e in got] == [NLI_LABELS[i % 3] for i in range(60)]
    (data_dir / "dev_matched.tsv").unlink()
    raises_input_error([str(data_dir / "dev_matched.tsv"), "not found"],
                       cd.MnliProcessor().get_dev_examples, data_dir)
    assert len(cd.MnliProcessor(matched=False).get_dev_examples(data_dir)) == 60


def test_xnli_equals_the_reference(rc, tmp_path, rte_pairs):
    pairs = rte_pairs[:90]
    (tmp_path / "multinli").mkdir()
    train_labels = ("entailment", "neutral", "contradictory")  # the translated files' spelling
    write(tmp_path / "multinli" / "multinli.train.zh.tsv",
          ["premise\thypo\tlabel"] + [f"{a}\t{b}\t{train_labels[i % 3]}"
                                      for i, (a, b) in enumerate(pairs)])
    dev_rows = ["\t".join(XNLI_DEV_HEADER)]
    for i, (a, b) in enumerate(pairs):
        language = ("en", "zh", "fr")[i % 3]
        text_a = a if language != "zh" else "这是中文。" + a
        dev_rows.append("\t".join([language, NLI_LABELS[i % 3], "( x )", "( y )", "(ROOT x)",
                                   "(ROOT y)", text_a, b, str(i), f"{i}n", "travel"]
                                  + [other_label(i)] * 5 + [text_a, b, "True"]))
    write(tmp_path / "xnli.dev.tsv", dev_rows)
    ours, reference = cd.get_processor("xnli"), rc.XnliProcessor()
    assert ours.get_labels() == reference.get_labels()
    for split in ("train", "dev"):
        got = getattr(ours, f"get_{split}_examples")(tmp_path)
        expected = getattr(reference, f"get_{split}_examples")(str(tmp_path))
        assert [as_tuple(e) for e in got] == [as_tuple(e) for e in expected], split
    assert len(got) == 30 and all(e.text_a.startswith("这是中文") for e in got)
    assert [e.label for e in got] == [NLI_LABELS[i % 3] for i in range(1, 90, 3)]
    # The original has no test set; ours reads xnli.test.tsv like dev, placeholder labels.
    write(tmp_path / "xnli.test.tsv", dev_rows)
    test = ours.get_test_examples(tmp_path)
    assert [e.guid for e in test] == [e.guid.replace("dev", "test") for e in got]
    assert {e.label for e in test} == {"contradiction"}
    raises_input_error([str(tmp_path / "xnli.dev.tsv"), "has no examples in language 'de'"],
                       cd.XnliProcessor(language="de").get_dev_examples, tmp_path)


def test_get_processor_names():
    assert set(cd.PROCESSORS) == {"cola", "mnli", "mnli-mm", "mrpc", "xnli", "sst-2", "qnli",
                                  "qqp", "rte", "sts-b", "wnli", "tsv", "jsonl"}
    assert isinstance(cd.get_processor("MRPC"), cd.MrpcProcessor)
    assert isinstance(cd.get_processor("jsonl"), cd.JsonLinesProcessor)
    assert isinstance(cd.get_processor("STS-B"), cd.StsbProcessor)
    assert isinstance(cd.get_processor("tsv", text_a_column=0, label_column=1), cd.TsvProcessor)
    # Options left at their defaults are fine for a named task; others are named as errors.
    cd.get_processor("rte", text_a_column=None, skip_header=False, delimiter="\t")
    raises_input_error(["text_a_column: ", "is for task_name=tsv;"],
                       cd.get_processor, "rte", text_a_column=3)
    message = raises_input_error(["task_name", "'glue'", "cola", "sts-b", "mnli-mm", "tsv"],
                                 cd.get_processor, "glue")
    assert message.startswith("task_name: unknown task 'glue'; valid names: ")


def test_qqp_layout(tmp_path):
    """QQP (absent here) in the GLUE layout: id qid1 qid2 question1 question2 is_duplicate."""
    write(tmp_path / "train.tsv", ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
                                   "7\t1\t2\tHow do I cook rice?\tWhat is the way to cook rice?\t1",
                                   "9\t3\t4\tWhy is the sky blue?\tWhat is 2 + 2?\t0"])
    write(tmp_path / "test.tsv", ["id\tquestion1\tquestion2", "0\tIs it \"so\"?\tIs it?"])
    processor = cd.get_processor("qqp")
    assert [as_tuple(e) for e in processor.get_train_examples(tmp_path)] == [
        ("train-7", "How do I cook rice?", "What is the way to cook rice?", "1"),
        ("train-9", "Why is the sky blue?", "What is 2 + 2?", "0")]
    assert [as_tuple(e) for e in processor.get_test_examples(tmp_path)] == [
        ("test-0", 'Is it "so"?', "Is it?", "0")]


# ------------------------------------------------------------------------------------------
# Conversion
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def task_examples(glue):
    """{task: [(split, sample of its examples)]} of every GLUE task in ../shared/data."""
    found = {}
    for task, (folder, _) in GLUE_TASKS.items():
        splits = available_splits(cd.get_processor(task), glue / folder)
        found[task] = [(split, sample(examples)) for split, examples in splits.items()]
    return found


@pytest.mark.parametrize("max_seq_length", [32, 128])
def test_convert_single_example_equals_the_reference(rc, tokenizers, task_examples,
                                                     max_seq_length):
    reference_tokenizer, tokenizer = tokenizers
    truncated = 0
    for task, splits in task_examples.items():
        processor = cd.get_processor(task)
        labels = processor.get_labels()
        regression = processor.is_regression
        for split, examples in splits:
            for i, example in enumerate(examples):
                got = cd.convert_single_example(i, example, labels, max_seq_length, tokenizer,
                                                regression=regression)
                if regression:
                    # The original cannot convert a float label: compare inputs with a dummy.
                    reference_example = rc.InputExample(example.guid, example.text_a,
                                                        example.text_b, "x")
                    expected = rc.convert_single_example(i + 5, reference_example, ["x"],
                                                         max_seq_length, reference_tokenizer)
                    assert isinstance(got.label_id, float) and got.label_id == example.label
                    assert feature_tuple(got)[:3] == feature_tuple(expected)[:3]
                else:
                    expected = rc.convert_single_example(i + 5, to_reference(rc, example),
                                                         labels, max_seq_length,
                                                         reference_tokenizer)
                    assert feature_tuple(got) == feature_tuple(expected), (task, split, i)
                truncated += got.input_mask[-1] == 1
    if max_seq_length == 32:
        assert truncated > 1000  # the truncation branches (pairs and single texts) were taken


def test_padding_example(rc, tokenizers):
    reference_tokenizer, tokenizer = tokenizers
    expected = rc.convert_single_example(0, rc.PaddingInputExample(), ["0", "1"], 16,
                                         reference_tokenizer)
    got = cd.convert_single_example(0, cd.PaddingInputExample(), ["0", "1"], 16, tokenizer)
    assert feature_tuple(got) == feature_tuple(expected) == ([0] * 16, [0] * 16, [0] * 16, 0,
                                                             False)
    regression = cd.convert_single_example(0, cd.PaddingInputExample(), None, 16, tokenizer,
                                           regression=True)
    assert regression.label_id == 0.0 and isinstance(regression.label_id, float)


def test_pad_examples():
    examples = [cd.InputExample(f"dev-{i}", "a") for i in range(10)]
    padded, num_real = cd.pad_examples(examples, 8)
    assert num_real == 10 and len(padded) == 16 and len(examples) == 10
    assert padded[:10] == examples
    assert all(isinstance(e, cd.PaddingInputExample) for e in padded[10:])
    assert cd.pad_examples(examples, 5) == (examples, 10)
    assert cd.pad_examples([], 8) == ([], 0)


def test_conversion_errors_and_log(tokenizers):
    _, tokenizer = tokenizers
    example = cd.InputExample("dev-3", "a b", None, "maybe")
    raises_input_error(["dev-3", "'maybe'", "['0', '1']"], cd.convert_single_example, 0,
                       example, ["0", "1"], 16, tokenizer)
    raises_input_error(["dev-3", "'maybe'", "not a number"], cd.convert_single_example, 0,
                       example, None, 16, tokenizer, regression=True)
    raises_input_error(["max_seq_length: ", "at least 3"], cd.convert_single_example, 0,
                       cd.InputExample("x", "a", "b", "0"), ["0"], 2, tokenizer)
    lines = []
    examples = [cd.InputExample(f"t-{i}", "Hello world", None, "1") for i in range(8)]
    cd.convert_examples_to_features(examples, ["0", "1"], 8, tokenizer, log=lines.append)
    assert lines[:3] == ["*** Example ***", "guid: t-0", "tokens: [CLS] hello world [SEP]"]
    assert lines[6] == "label: 1 (id = 1)" and len(lines) == 5 * 7


def test_fast_tokenizer_path_gives_the_same_features(task_examples, tokenizers, uncased_vocab,
                                                     monkeypatch):
    from bert_tf.text.fast_tokenization import FastTokenizer

    _, tokenizer = tokenizers
    fast = FastTokenizer(str(uncased_vocab), do_lower_case=True)
    monkeypatch.setattr(tasks_preprocessor, "CHUNK", 97)  # several chunks per split
    # The batch path only: no text tokenized one at a time.
    monkeypatch.setattr(fast, "tokenize", lambda text: pytest.fail(f"tokenize({text!r})"))
    for task, splits in task_examples.items():
        processor = cd.get_processor(task)
        for split, examples in splits:
            examples, _ = cd.pad_examples(examples, 64)
            args = (processor.get_labels(), 48)
            expected = cd.convert_examples_to_features(examples, *args, tokenizer,
                                                       regression=processor.is_regression)
            got = cd.convert_examples_to_features(examples, *args, fast,
                                                  regression=processor.is_regression)
            assert got == expected, (task, split)


def _original_doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """The original run_squad's window loop (convert_examples_to_features), verbatim but for
    the spans as (start, length) pairs."""
    doc_spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = num_tokens - start_offset
        if length > max_tokens_for_doc:
            length = max_tokens_for_doc
        doc_spans.append((start_offset, length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return doc_spans


@pytest.mark.parametrize("max_seq_length, doc_stride", [(24, 8), (64, 61)])
def test_windows_against_the_original_truncation_and_spans(rc, tokenizers, task_examples,
                                                           max_seq_length, doc_stride):
    """Every example of every GLUE task (sampled), converted with doc_stride (61: longer
    than a pair's room, where windows then start a whole window apart):
    - an example the original's truncation leaves whole is one feature, the original's;
    - otherwise its windows are [CLS] a [SEP] (window [SEP]) with, for a pair, a as the
      original's _truncate_seq_pair keeps it and the windows over b's pieces, for a single
      text the windows over its pieces, the spans those of run_squad's loop over the room
      left (max_seq_length - 3 - len(a), or - 2); the first window is the original's feature;
    - every feature holds its example's index, windows consecutive.
    The reference's FullTokenizer gives the pieces."""
    reference_tokenizer, tokenizer = tokenizers
    windowed_examples = 0
    for task, splits in task_examples.items():
        processor = cd.get_processor(task)
        labels, regression = processor.get_labels(), processor.is_regression
        for split, examples in splits:
            got = cd.convert_examples_to_features(examples, labels, max_seq_length, tokenizer,
                                                  regression=regression, doc_stride=doc_stride)
            by_example = {}
            for feature in got:
                by_example.setdefault(feature.example_id, []).append(feature)
            assert [f.example_id for f in got] == sorted(f.example_id for f in got)
            assert sorted(by_example) == list(range(len(examples)))
            for index, example in enumerate(examples):
                windows = by_example[index]
                reference = rc.InputExample(example.guid, example.text_a, example.text_b,
                                            labels[0] if labels else "x")
                expected_first = rc.convert_single_example(
                    index + 5, reference, labels or ["x"], max_seq_length, reference_tokenizer)
                assert feature_tuple(windows[0])[:3] == feature_tuple(expected_first)[:3]
                assert all(w.label_id == windows[0].label_id for w in windows)
                tokens_a = reference_tokenizer.tokenize(example.text_a)
                tokens_b = reference_tokenizer.tokenize(example.text_b) if example.text_b else []
                if tokens_b:
                    kept_a, kept_b = list(tokens_a), list(tokens_b)
                    rc._truncate_seq_pair(kept_a, kept_b, max_seq_length - 3)
                    room, pieces = max_seq_length - 3 - len(kept_a), tokens_b
                    whole = len(kept_b) == len(tokens_b) or room < 1
                else:
                    kept_a, room, pieces = None, max_seq_length - 2, tokens_a
                    whole = len(tokens_a) <= room
                if whole:
                    assert len(windows) == 1, (task, split, index)
                    continue
                windowed_examples += 1
                spans = _original_doc_spans(len(pieces), room, doc_stride)
                assert len(windows) == len(spans), (task, split, index)
                for window, (start, length) in zip(windows, spans):
                    tokens = reference_tokenizer.convert_ids_to_tokens(
                        window.input_ids[:sum(window.input_mask)])
                    part = pieces[start:start + length]
                    if kept_a is None:
                        assert tokens == ["[CLS]"] + part + ["[SEP]"]
                        assert window.segment_ids == [0] * max_seq_length
                    else:
                        assert tokens == ["[CLS]"] + kept_a + ["[SEP]"] + part + ["[SEP]"]
                        assert window.segment_ids[:len(tokens)] == (
                            [0] * (len(kept_a) + 2) + [1] * (length + 1))
    # Windows in most examples at 24, in the long ones (QNLI sentences, ...) at 64.
    assert windowed_examples > {24: 1000, 64: 10}[max_seq_length]


def test_window_records_of_texts_that_fit_are_the_originals_with_their_index(rc, glue,
                                                                              tokenizers,
                                                                              tmp_path):
    """MRPC rows at 128 (all but a few fit): the records of one-window examples decode to
    the original's record plus example_id; padding examples get -1."""
    import tensorflow as tf

    reference_tokenizer, tokenizer = tokenizers
    examples, _ = cd.pad_examples(cd.MrpcProcessor().get_dev_examples(glue / "MRPC")[:150], 8)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
    rc.file_based_convert_examples_to_features([to_reference(rc, e) for e in examples],
                                               ["0", "1"], 128, reference_tokenizer,
                                               str(tmp_path / "reference.tf_record"))
    windows = cd.convert_examples_to_features(examples, ["0", "1"], 128, tokenizer,
                                              doc_stride=64)
    assert cd.write_features(windows, tmp_path / "ours.tf_record") == len(windows)
    ours, expected = (decoded_records(tmp_path / name)
                      for name in ("ours.tf_record", "reference.tf_record"))
    per_example = {}
    for record in ours:
        per_example.setdefault(record.pop("example_id")[1][0], []).append(record)
    assert sorted(per_example) == [-1] + list(range(150))
    assert len(per_example[-1]) == 2 and per_example[-1] == expected[150:]
    single = [i for i in range(150) if len(per_example[i]) == 1]
    assert len(single) >= 140
    assert [per_example[i][0] for i in single] == [expected[i] for i in single]
    assert all(per_example[i][0] == expected[i] for i in range(150))  # first windows too


def test_bad_doc_stride(tokenizers):
    _, tokenizer = tokenizers
    examples = [cd.InputExample("x", "a b c", None, "0")]
    for stride in (0, 14, 30):
        raises_input_error(["doc_stride: must be at least 1 and less than the window, "
                            f"max_seq_length - 2 = 14 pieces, got {stride}"],
                           cd.convert_examples_to_features, examples, ["0"], 16, tokenizer,
                           doc_stride=stride)


# ------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------


def test_records_equal_the_reference(rc, glue, tokenizers, tmp_path):
    import tensorflow as tf

    reference_tokenizer, tokenizer = tokenizers
    examples, num_real = cd.pad_examples(cd.MrpcProcessor().get_train_examples(glue / "MRPC")
                                         [:300], 8)
    assert (len(examples), num_real) == (304, 300)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
    rc.file_based_convert_examples_to_features([to_reference(rc, e) for e in examples],
                                               ["0", "1"], 64, reference_tokenizer,
                                               str(tmp_path / "reference.tf_record"))
    count = cd.write_classifier_records(examples, ["0", "1"], 64, tokenizer,
                                        tmp_path / "ours.tf_record")
    assert count == 304
    expected = decoded_records(tmp_path / "reference.tf_record")
    got = decoded_records(tmp_path / "ours.tf_record")
    assert len(expected) == 304 and got == expected
    assert [r["is_real_example"] for r in got[-5:]] == [("int64_list", [1])] + [
        ("int64_list", [0])] * 4
    assert sorted(tmp_path.iterdir()) == [tmp_path / "ours.tf_record",
                                          tmp_path / "reference.tf_record"]  # no temporaries


def test_regression_records(glue, tokenizers, tmp_path):
    import tensorflow as tf

    _, tokenizer = tokenizers
    processor = cd.get_processor("sts-b")
    examples, _ = cd.pad_examples(processor.get_dev_examples(glue / "STS-B")[:21], 8)
    cd.write_classifier_records(examples, processor.get_labels(), 32, tokenizer,
                                tmp_path / "stsb.tf_record", regression=True)
    spec = preprocessor.classifier_feature_spec(32, regression=True)
    parsed = [tf.io.parse_single_example(r, spec)
              for r in tf.data.TFRecordDataset(str(tmp_path / "stsb.tf_record"))]
    assert len(parsed) == 24
    scores = [float(p["label_ids"]) for p in parsed]
    assert scores[:21] == pytest.approx([e.label for e in examples[:21]])
    assert scores[21:] == [0.0] * 3 and len(set(scores)) > 5
    assert [int(p["is_real_example"]) for p in parsed] == [1] * 21 + [0] * 3


# ------------------------------------------------------------------------------------------
# TsvProcessor: a task described by options
# ------------------------------------------------------------------------------------------


def test_tsv_columns_by_header_name_and_inferred_labels(tmp_path):
    write(tmp_path / "train.tsv", ["id\tlabel\tsentence", "a\tpos\tGood \"fun\" film",
                                   "b\tneg\tDull", "c\tneutral \tFine"])
    write(tmp_path / "dev.tsv", ["sentence\tlabel", "Great\tpos"])  # another column order
    write(tmp_path / "test.tsv", ["id\tsentence", "x\tAwful"])  # no label column
    processor = cd.get_processor("tsv", text_a_column="sentence", label_column="label",
                                 skip_header=True)
    assert processor.get_labels(tmp_path) == ["neg", "neutral", "pos"]  # sorted, stripped
    assert [as_tuple(e) for e in processor.get_train_examples(tmp_path)] == [
        ("train-1", 'Good "fun" film', None, "pos"), ("train-2", "Dull", None, "neg"),
        ("train-3", "Fine", None, "neutral")]
    assert [as_tuple(e) for e in processor.get_dev_examples(tmp_path)] == [
        ("dev-1", "Great", None, "pos")]
    assert [as_tuple(e) for e in processor.get_test_examples(tmp_path)] == [
        ("test-1", "Awful", None, "neg")]
    assert not processor.is_regression


def test_csv_quoting_and_pairs(tmp_path):
    write(tmp_path / "train.csv", ['"He said ""hi"", then left","second, text",1',
                                   '"multi', 'line",b,0',
                                   'plain,"quoted, with comma",1'], newline="\r\n")
    processor = cd.TsvProcessor(text_a_column=0, text_b_column="1", label_column=2,
                                label_list="1,0", delimiter=",", train_file="train.csv")
    assert processor.get_labels() == ["1", "0"]  # the order given, not sorted
    assert [as_tuple(e) for e in processor.get_train_examples(tmp_path)] == [
        ("train-0", 'He said "hi", then left', "second, text", "1"),
        ("train-1", "multi\nline", "b", "0"),  # "\r" dropped, as from TSV files
        ("train-2", "plain", "quoted, with comma", "1")]
    # Line numbers count the lines of multi-line records; an error names the line its record
    # starts on.
    write(tmp_path / "dev.tsv", ['"multi', 'line",b,0', "x,y,1", '"two', 'lines",b,2'])
    raises_input_error([f"{tmp_path / 'dev.tsv'}:4:", "label '2'", "['1', '0']"],
                       processor.get_dev_examples, tmp_path)
    write(tmp_path / "dev.tsv", ["ok,b,0", '"unbalanced,b,0', "x,y,1"])
    raises_input_error([f"{tmp_path / 'dev.tsv'}:2:", "comma-separated", "end of data"],
                       processor.get_dev_examples, tmp_path)


def test_tsv_regression_and_single_text_records(tmp_path, tokenizers):
    _, tokenizer = tokenizers
    write(tmp_path / "train.tsv", ["a cat\t0.5", "a dog\t4"])
    processor = cd.TsvProcessor(text_a_column=0, label_column=1, regression=True)
    examples = processor.get_train_examples(tmp_path)
    assert [as_tuple(e) for e in examples] == [("train-0", "a cat", None, 0.5),
                                               ("train-1", "a dog", None, 4.0)]
    assert processor.get_labels() is None and processor.is_regression
    got = cd.convert_single_example(0, examples[1], None, 6, tokenizer, regression=True)
    assert feature_tuple(got) == ([101, 1037, 3899, 102, 0, 0], [1, 1, 1, 1, 0, 0], [0] * 6,
                                  4.0, True)


def test_multi_label_rows_and_records(tmp_path, tokenizers):
    """Labels joined by the separator, stripped, each once, an empty field none; the inferred
    list is the sorted union; records hold multi-hot label_ids [num_labels] (padding all 0),
    read back by classifier_feature_spec's multi-label variant."""
    import tensorflow as tf

    _, tokenizer = tokenizers
    write(tmp_path / "train.tsv", ["text\ttags", "a long film\tpos; long", "dull\t",
                                   "not good\tneg;negation;neg", "fine\t pos ;"])
    write(tmp_path / "test.tsv", ["text", "nice"])
    processor = cd.TsvProcessor(text_a_column="text", label_column="tags", skip_header=True,
                                multi_label=True, label_separator=";")
    assert processor.is_multi_label and not processor.is_regression
    examples = processor.get_train_examples(tmp_path)
    assert [as_tuple(e) for e in examples] == [
        ("train-1", "a long film", None, ("pos", "long")), ("train-2", "dull", None, ()),
        ("train-3", "not good", None, ("neg", "negation")), ("train-4", "fine", None, ("pos",))]
    labels = processor.get_labels()
    assert labels == ["long", "neg", "negation", "pos"]
    assert [as_tuple(e) for e in processor.get_test_examples(tmp_path)] == [
        ("test-1", "nice", None, ())]
    padded, _ = cd.pad_examples(examples, 3)
    path = tmp_path / "train.tf_record"
    assert cd.write_classifier_records(padded, labels, 8, tokenizer, path,
                                       multi_label=True) == 6
    decoded = decoded_records(path)
    assert [r["label_ids"] for r in decoded] == [("int64_list", ids) for ids in (
        [1, 0, 0, 1], [0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1], [0] * 4, [0] * 4)]
    assert [r["is_real_example"][1] for r in decoded] == [[1]] * 4 + [[0]] * 2
    single = cd.convert_single_example(0, cd.InputExample("x", "a long film", None, "1"),
                                       ["0", "1"], 8, tokenizer)  # the same inputs
    assert decoded[0]["input_ids"] == ("int64_list", single.input_ids)
    spec = preprocessor.classifier_feature_spec(8, multi_label_size=4)
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(str(path))]
    assert parsed[2]["label_ids"].numpy().tolist() == [0, 1, 1, 0]


def test_bad_multi_label_input(tmp_path, tokenizers):
    _, tokenizer = tokenizers
    path = write(tmp_path / "dev.tsv", ["good\tpos", "odd\tpos,weird"])
    processor = cd.TsvProcessor(text_a_column=0, label_column=1, multi_label=True,
                                label_list="pos,neg")
    raises_input_error([f"{path}:2: label 'weird' is not one of the labels ['pos', 'neg']"],
                       processor.get_dev_examples, tmp_path)
    write(tmp_path / "train.tsv", ["good\t", "bad\t"])
    raises_input_error([f"{tmp_path / 'train.tsv'}: has no label in any row", "label_list"],
                       cd.TsvProcessor(text_a_column=0, label_column=1,
                                       multi_label=True).get_labels, tmp_path)
    raises_input_error(["label_list: label 'a,b' holds the label_separator ','"],
                       cd.TsvProcessor, text_a_column=0, multi_label=True,
                       label_list=["a,b", "c"])
    raises_input_error(["label_separator: must be a visible"], cd.TsvProcessor,
                       text_a_column=0, multi_label=True, label_separator=" ")
    raises_input_error(["multi_label: cannot be a regression task"], cd.TsvProcessor,
                       text_a_column=0, multi_label=True, regression=True)
    raises_input_error(["multi_label: is for task_name=tsv"], cd.get_processor, "sst-2",
                       multi_label=True)
    raises_input_error(["'dev-0'", "label 'x' is not one of the labels"],
                       cd.convert_single_example, 0, cd.InputExample("dev-0", "a", None, ("x",)),
                       ["pos"], 8, tokenizer, multi_label=True)
    raises_input_error(["'dev-0'", "a multi-label example's label is a list"],
                       cd.convert_single_example, 0, cd.InputExample("dev-0", "a", None, "pos"),
                       ["pos"], 8, tokenizer, multi_label=True)


# ------------------------------------------------------------------------------------------
# Bad input: InputError naming the file and line (or the flag)
# ------------------------------------------------------------------------------------------

RTE_HEADER = "index\tsentence1\tsentence2\tlabel"


def test_missing_file(tmp_path):
    raises_input_error([str(tmp_path / "train.tsv"), "RTE train file not found"],
                       cd.get_processor("rte").get_train_examples, tmp_path)
    raises_input_error([str(tmp_path / "nowhere" / "dev.tsv"), "not found"],
                       cd.TsvProcessor(text_a_column=0, label_column=1).get_dev_examples,
                       tmp_path / "nowhere")


@pytest.mark.parametrize("line, expected", [
    ("1\tonly two fields", ["has 2 field(s); expected 4 or more tab-separated fields"]),
    ("", ["is an empty line; expected 4 or more tab-separated fields"]),
    ("1\ta\tb\tmaybe", ["label 'maybe' is not one of the labels "
                        "['entailment', 'not_entailment']"]),
    ("1\ta\tb\tentailment\t", []),  # extra fields are fine (the original ignores them)
])
def test_bad_rows_name_file_and_line(tmp_path, line, expected):
    path = write(tmp_path / "train.tsv", [RTE_HEADER, "0\ta\tb\tentailment", line,
                                          "2\ta\tb\tentailment"])
    if not expected:
        assert len(cd.get_processor("rte").get_train_examples(tmp_path)) == 3
        return
    message = raises_input_error([f"{path}:3: "] + expected,
                                 cd.get_processor("rte").get_train_examples, tmp_path)
    assert "\n" not in message


def test_bad_regression_label(tmp_path):
    header = "\t".join(["index", "genre", "filename", "year", "old_index", "source1",
                        "source2", "sentence1", "sentence2", "score"])
    row = "0\tmain-news\tf\t2012\t0001\tnone\tnone\tA man.\tA woman."
    for bad in ("n/a", "nan", ""):
        path = write(tmp_path / "dev.tsv", [header, row + "\t1.5", row + "\t" + bad])
        raises_input_error([f"{path}:3: regression label {bad!r} is not a finite number"],
                           cd.get_processor("sts-b").get_dev_examples, tmp_path)
    path = write(tmp_path / "train.tsv", ["a\tx", "b\ty"])
    raises_input_error([f"{path}:1: regression label 'x'"],
                       cd.TsvProcessor(text_a_column=0, label_column=1,
                                       regression=True).get_train_examples, tmp_path)


def test_bad_tsv_files(tmp_path):
    processor = cd.TsvProcessor(text_a_column="text", label_column="label", skip_header=True)
    write(tmp_path / "train.tsv", ["text\tlabel", "good\tpos", "bad\tneg"])
    write(tmp_path / "dev.tsv", ["text\tlabel", "fine\tpos", "", "meh\tmeh"])
    raises_input_error([f"{tmp_path / 'dev.tsv'}:3: is an empty line"],
                       processor.get_dev_examples, tmp_path)
    write(tmp_path / "dev.tsv", ["text\tlabel", "fine\tpos", "meh\tmeh"])
    raises_input_error([f"{tmp_path / 'dev.tsv'}:3: label 'meh' is not one of the labels "
                        "['neg', 'pos']"], processor.get_dev_examples, tmp_path)
    write(tmp_path / "dev.tsv", ["sentence\tlabel", "fine\tpos"])
    raises_input_error([f"{tmp_path / 'dev.tsv'}:1: has no column named 'text' "
                        "(text_a_column)"], processor.get_dev_examples, tmp_path)
    (tmp_path / "dev.tsv").write_bytes(b"text\tlabel\nfine\tpos\ncaf\xe9\tpos\n")
    raises_input_error([f"{tmp_path / 'dev.tsv'}:3: not valid UTF-8"],
                       processor.get_dev_examples, tmp_path)
    write(tmp_path / "dev.tsv", ["text\tlabel"])
    raises_input_error([f"{tmp_path / 'dev.tsv'}: has no examples"],
                       processor.get_dev_examples, tmp_path)


def test_bad_tsv_options(tmp_path):
    raises_input_error(["text_a_column: ", "required"], cd.TsvProcessor, label_column=1)
    raises_input_error(["label_column: 'label' is a column name", "(skip_header)"],
                       cd.TsvProcessor, text_a_column=0, label_column="label")
    raises_input_error(["delimiter: ", "';'"], cd.TsvProcessor, text_a_column=0, delimiter=";")
    raises_input_error(["label_list: ", "['a']"], cd.TsvProcessor, text_a_column=0,
                       label_list=["a", "b", "a"])
    raises_input_error(["text_b_column: ", "-1"], cd.TsvProcessor, text_a_column=0,
                       text_b_column=-1)
    # Predict-only without a training file needs the labels given.
    write(tmp_path / "test.tsv", ["some text"])
    predict_only = cd.TsvProcessor(text_a_column=0)
    raises_input_error(["label_list: is needed", "label_list=neg,pos",
                        str(tmp_path / "train.tsv")],
                       predict_only.get_test_examples, tmp_path)
    given = cd.TsvProcessor(text_a_column=0, label_list=["b", "a"])
    assert [as_tuple(e) for e in given.get_test_examples(tmp_path)] == [
        ("test-0", "some text", None, "b")]
    write(tmp_path / "train.tsv", ["some text\tb"])
    raises_input_error(["label_column: ", "required to read the train file"],
                       given.get_train_examples, tmp_path)
