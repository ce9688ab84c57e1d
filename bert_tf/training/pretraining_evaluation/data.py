"""The suite's training and dev files, cut from the user's data the same way every time: the
first rows of a GLUE task's train.tsv, the first sentences of CoNLL-2003's train.txt, SQuAD
v1.1 split by article. Each slice is written once (atomically) and read by every run."""
import copy
import json
import os
import shutil

from bert_tf import io_utils
from bert_tf.errors import file_error


def glue_slice(source, target, rows, has_header=True):
    """`target`: train.tsv with the first `rows` rows of `source`'s (all with None), after its
    header line if it `has_header` (CoLA's has none), and `source`'s dev.tsv."""
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(source, "train.tsv"), encoding="utf-8") as f:
        lines = f.readlines()
    with io_utils.atomic_open(os.path.join(target, "train.tsv"), "w") as f:
        f.writelines(lines[:None if rows is None else rows + int(has_header)])
    _copy(os.path.join(source, "dev.tsv"), os.path.join(target, "dev.tsv"))
    return target


def conll_sentences(path):
    """A CoNLL file's sentences as their line blocks, -DOCSTART- blocks left out."""
    blocks, block = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                block.append(line)
                continue
            if block and not block[0].startswith("-DOCSTART-"):
                blocks.append(block)
            block = []
    if block and not block[0].startswith("-DOCSTART-"):
        blocks.append(block)
    return blocks


def conll_slice(source, target, sentences):
    """`target`: train.txt with the first `sentences` sentences of `source`'s (all with None),
    and `source`'s valid.txt."""
    os.makedirs(target, exist_ok=True)
    blocks = conll_sentences(os.path.join(source, "train.txt"))
    with io_utils.atomic_open(os.path.join(target, "train.txt"), "w") as f:
        f.write("\n".join("".join(block) for block in blocks[:sentences]))
    _copy(os.path.join(source, "valid.txt"), os.path.join(target, "valid.txt"))
    return target


def squad_split(source_file, target, train_articles):
    """`target`: train.json, the first `train_articles` articles of the SQuAD v1.1 file with each
    question's first answer (the original's training reads exactly one), and eval.json, the
    other articles unchanged (every answer, for the official metric)."""
    os.makedirs(target, exist_ok=True)
    dataset = check_squad_split(source_file, train_articles)
    train = copy.deepcopy(dataset)
    train["data"] = train["data"][:train_articles]
    for article in train["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    held_out = dict(dataset, data=dataset["data"][train_articles:])
    for name, data in (("train.json", train), ("eval.json", held_out)):
        with io_utils.atomic_open(os.path.join(target, name), "w") as f:
            json.dump(data, f)
    return target


def check_squad_split(path, train_articles):
    """The SQuAD json file at `path`, which must have more than `train_articles` articles (some
    left to score); otherwise an InputError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            dataset = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise file_error(path, f"not a SQuAD json file ({error})") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise file_error(path, "not a SQuAD json file (no \"data\" list)")
    if len(dataset["data"]) <= train_articles:
        raise file_error(path, f"has {len(dataset['data'])} articles: training on "
                               f"{train_articles} leaves none to score")
    return dataset


def _copy(source, target):
    with open(source, "rb") as f, io_utils.atomic_open(target, "wb") as out:
        shutil.copyfileobj(f, out)
