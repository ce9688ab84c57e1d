"""All text of ../shared/data, as the strings a tokenizer is asked to tokenize.

Shared by every tokenizer parity check (tests/test_tokenization.py, tests/test_fast_tokenization.py,
tests/test_graph_tokenization.py, bench/bench_tokenization.py), so that they all compare against
the reference on exactly the same text. Import it as

    import corpora                  # in tests (pytest puts tests/ on sys.path via conftest.py)
    from tests import corpora       # elsewhere, with the project root on sys.path (bench/)

and use
    corpora.all_texts(shared_data)            -> iterator of (corpus_name, text), every text field
    corpora.unique_texts(shared_data)         -> list of distinct texts, first-seen order
    corpora.CORPORA[name](shared_data)        -> iterator of the texts of one corpus
`shared_data` is the ../shared/data directory (the `shared_data` fixture of conftest.py).

What counts as text (every field a BERT task would tokenize):
  glue:            the text columns of every GLUE .tsv (sentence, sentence1/2, question, #1/#2
                   String; column 4 of the header-less CoLA train/dev) and of the original MRPC
                   release files msr_paraphrase_{train,test}.txt, read as the original
                   run_classifier does (csv, tab-delimited, no quoting);
  squad_contexts / squad_questions: SQuAD v1.1 and v2.0 dev paragraphs' contexts and questions;
  conll2003:       the tokens of each sentence of train/valid/test joined by single spaces;
  wikitext2:       every line of valid.txt and test.txt (newline removed; blank lines included);
  sample_text:     every line of sample_text.txt.
"""
import csv
import json
import pathlib

# Header names of the GLUE/MRPC columns that hold text to tokenize.
GLUE_TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "question", "#1 String", "#2 String")
COLA_TEXT_COLUMN = 3  # CoLA train/dev have no header: source, label, original label, sentence


def _read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quotechar=None))


def glue_texts(shared_data):
    root = pathlib.Path(shared_data) / "glue_data"
    paths = sorted(root.glob("*/*.tsv")) + sorted(root.glob("MRPC/msr_paraphrase_*.txt"))
    for path in paths:
        rows = _read_tsv(path)
        if not rows:
            continue
        header = [name.lstrip("\ufeff") for name in rows[0]]
        columns = [i for i, name in enumerate(header) if name in GLUE_TEXT_COLUMNS]
        if columns:
            body = rows[1:]
        elif path.parent.name == "CoLA":
            columns, body = [COLA_TEXT_COLUMN], rows
        else:
            continue  # e.g. MRPC/dev_ids.tsv: ids only
        for row in body:
            for i in columns:
                if i < len(row):
                    yield row[i]


def _squad_paragraphs(shared_data):
    for name in ("dev-v1.1.json", "dev-v2.0.json"):
        with open(pathlib.Path(shared_data) / "SQuAD" / name, encoding="utf-8") as f:
            for article in json.load(f)["data"]:
                yield from article["paragraphs"]


def squad_contexts(shared_data):
    for paragraph in _squad_paragraphs(shared_data):
        yield paragraph["context"]


def squad_questions(shared_data):
    for paragraph in _squad_paragraphs(shared_data):
        for qa in paragraph["qas"]:
            yield qa["question"]


def conll2003_texts(shared_data):
    for split in ("train", "valid", "test"):
        tokens = []
        with open(pathlib.Path(shared_data) / "conll2003" / f"{split}.txt", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] != "-DOCSTART-":
                    tokens.append(fields[0])
                elif tokens:
                    yield " ".join(tokens)
                    tokens = []
        if tokens:
            yield " ".join(tokens)


def _lines(path):
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            yield line.rstrip("\r\n")


def wikitext2_texts(shared_data):
    for split in ("valid", "test"):
        yield from _lines(pathlib.Path(shared_data) / "wikitext-2" / f"{split}.txt")


def sample_texts(shared_data):
    yield from _lines(pathlib.Path(shared_data) / "sample_text.txt")


CORPORA = {
    "glue": glue_texts,
    "squad_contexts": squad_contexts,
    "squad_questions": squad_questions,
    "conll2003": conll2003_texts,
    "wikitext2": wikitext2_texts,
    "sample_text": sample_texts,
}


def all_texts(shared_data):
    """Every text of every corpus, as (corpus_name, text)."""
    for name, texts in CORPORA.items():
        for text in texts(shared_data):
            yield name, text


def unique_texts(shared_data):
    """The distinct texts of all corpora, in first-seen order (each compared once)."""
    return list(dict.fromkeys(text for _, text in all_texts(shared_data)))
