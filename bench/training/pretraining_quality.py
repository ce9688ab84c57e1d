"""Time to a quality: pretraining from scratch, bert_tf's command lines vs keras-hub vs
transformers, held-out masked-LM accuracy against wall time.

    bash bench/envs/hf_env.sh                     # once: the transformers peer's venv
    python -m bench.training.pretraining_quality  # every system, 400 steps, eval every 50
    python -m bench.training.pretraining_quality --systems=ours,keras_hub --steps=200 \\
        --recipes=original:adamw:5e-4,original:adam:5e-4

The same BERT (L=4 H=256 A=4 I=1024, uncased vocabulary of 30,522), seq 128, batch 32, learning
rate warmed up linearly over the first 10% of the steps then decayed linearly to 0, masking rate
0.15, from scratch, on the same real text from ../shared/data (3.8 MB): WikiText-2 valid articles,
SQuAD 1.1 dev paragraphs (one document per article), CoNLL-2003 train documents; one sentence per
line, a blank line between documents (`corpus.txt` in --out_dir).

Held-out set, written once (`heldout.npz`) and scored identically for every system: 512 windows
of 128 tokens of WikiText-2 *test* ([CLS] + 126 tokens + [SEP], the original's tokenizer), masked
once (seed 12345) as the original's create_pretraining_data masks: 15% of the tokens, at most 20
per window, 80% [MASK] / 10% random / 10% kept. Each system's child returns its argmax
predictions at those positions at every checkpoint (every --eval_every steps); this process
scores them all the same way: accuracy over the masked positions. WikiText's `<unk>` (a word
outside its vocabulary) is left out of both the corpus and the held-out text: kept, it becomes
four pieces ("<", "un", "##k", ">") that made a fifth of the masked positions and were learned
long before any real word.

Systems, one at a time, each in its own subprocess, 2 threads each (TF intra/inter-op threads,
OMP, torch.set_num_threads):

  ours          the command lines: `data_tools.create_pretraining_data` then `run.run_pretraining`,
                with a RECIPE (`--recipes=NAME:OPTIMIZER:LR,...`; see RECIPES): `original` is the
                original's recipe (static masks, dupe_factor 5, masked-LM + next sentence), and
                the optimizer is `--optimizer` (adamw: the original's AdamWeightDecay, no bias
                correction; adam: with bias correction). Checkpoints every --eval_every steps;
                the wall time of a point is the checkpoint file's time since the run's start plus
                the records' creation time (made once per distinct set of data flags and shared
                by the recipes that use the same ones); the checkpoints are scored afterwards in
                another process (outside the clock). A recipe whose flags a command does not have
                (yet) is skipped with a message.
  keras_hub     keras_hub.models.BertMaskedLM (masked-LM only) on windows of the corpus, masked
                per batch by keras_hub.layers.MaskedLMMaskGenerator (what BertMaskedLMPreprocessor
                uses: 15%, at most 20, 80/10/10), keras AdamW (weight decay 0.01 except bias and
                LayerNorm, global-norm clipping 1.0, epsilon 1e-6), model.fit.
  transformers  BertForMaskedLM + DataCollatorForLanguageModeling (mlm_probability 0.15) on the
                same windows, torch.optim.AdamW (the same exclusions, epsilon 1e-6),
                get_linear_schedule_with_warmup, clip_grad_norm_ 1.0; PyTorch CPU in the venv of
                bench/envs/hf_env.sh ($BERT_TF_HF_VENV, default ~/.cache/bert_tf/hf-venv).

The peers' windows: each document's tokens cut into pieces of 126 ([CLS] piece [SEP]; a last
piece shorter than 32 tokens dropped), shuffled each epoch. Their time excludes their own
evaluations (measured and subtracted); everyone's includes the process start and imports.

TARGET = the lowest of the peers' final accuracies; the table gives the wall time each system
first reaches it (linear between checkpoints is not assumed: the first checkpoint at or above
it) and ours / the fastest peer's time (goal: <= 0.67). Writes results.tsv, results.md and
accuracy_vs_time.png into --out_dir, and prints the table.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import sys
import time

from bench import harness
from bench.common import (DATA, PROJECT_ROOT, VOCAB, keras_hub_backbone, transformers_config,
                          write_documents)

MODEL = dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
             intermediate_size=1024, hidden_act="gelu", hidden_dropout_prob=0.1,
             attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
             initializer_range=0.02)
SEQ, BATCH, PREDICTIONS, MASK_RATE = 128, 32, 20, 0.15
HELDOUT_WINDOWS, HELDOUT_SEED = 512, 12345
THREADS = 2
THREAD_ENV = {"OMP_NUM_THREADS": str(THREADS), "TF_NUM_INTRAOP_THREADS": str(THREADS),
              "TF_NUM_INTEROP_THREADS": str(THREADS), "TF_CPP_MIN_LOG_LEVEL": "2"}

# A recipe of ours: extra flags of create_pretraining_data and of run_pretraining. New recipes
# plug in here; `{vocab}` is replaced by the vocabulary's path.
RECIPES = {
    "original": dict(create=[], train=[],
                     about="the original's: static masks, masked-LM + next sentence"),
    "mlm": dict(create=["--objective=mlm"], train=["--objective=mlm"],
                about="no next-sentence loss (static masks)"),
    "mlm-dynamic": dict(create=["--objective=mlm", "--masking=dynamic"],
                        train=["--objective=mlm", "--masked_lm_prob=0.15", "--vocab_file={vocab}"],
                        about="masked-LM only, masks drawn in tf.data at each epoch"),
    "packed": dict(create=["--objective=mlm", "--masking=dynamic", "--pack_sequences"],
                   train=["--objective=mlm", "--masked_lm_prob=0.15", "--vocab_file={vocab}"],
                   about="masked-LM only, dynamic masks, packed rows"),
    "packed-full": dict(create=["--objective=mlm", "--masking=dynamic", "--pack_sequences",
                                "--short_seq_prob=0"],
                        train=["--objective=mlm", "--masked_lm_prob=0.15", "--vocab_file={vocab}"],
                        about="as packed, every span cut to the full length (no short spans)"),
}
DEFAULT_RECIPES = "original:adamw:5e-4,original:adamw:1e-4,original:adam:5e-4,original:adam:1e-4"
CREATE_FLAGS = ["--do_lower_case", f"--max_seq_length={SEQ}", "--dupe_factor=5",
                "--random_seed=12345"]
# Masks drawn when the records are written (create_pretraining_data refuses them with
# --masking=dynamic, whose masks run_pretraining draws).
STATIC_MASK_FLAGS = [f"--max_predictions_per_seq={PREDICTIONS}", f"--masked_lm_prob={MASK_RATE}"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def log(message):
    print(time.strftime("%H:%M:%S"), message, flush=True)


# ---- Corpus and held-out set (main process) ----

def _wikitext_clean(text):
    text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    return " ".join(word for word in text.split(" ") if word != "<unk>").strip()


def wikitext_documents(path):
    """WikiText-2 articles (bench.common's reader), its number notation undone
    and `<unk>` left out: lists of sentences."""
    from bench.common import wikitext_documents as articles
    documents = [[s for s in map(_wikitext_clean, sentences) if s]
                 for sentences in articles([path])]
    return [sentences for sentences in documents if sentences]


def squad_documents(path):
    """SQuAD 1.1 dev: one document per article, its paragraphs split into sentences."""
    documents = []
    for article in json.load(open(path, encoding="utf-8"))["data"]:
        sentences = []
        for paragraph in article["paragraphs"]:
            sentences += [s.strip() for s in _SENTENCE_END.split(paragraph["context"]) if s.strip()]
        documents.append(sentences)
    return documents


def conll_documents(path):
    """CoNLL-2003: one document per -DOCSTART-, each sentence its tokens joined by spaces."""
    documents, current, sentence = [], [], []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line.startswith("-DOCSTART-"):
            if current:
                documents.append(current)
            current, sentence = [], []
        elif not line:
            if sentence:
                current.append(" ".join(sentence))
            sentence = []
        else:
            sentence.append(line.split()[0])
    if sentence:
        current.append(" ".join(sentence))
    if current:
        documents.append(current)
    return documents


def write_corpus(path):
    documents = (wikitext_documents(DATA / "wikitext-2" / "valid.txt")
                 + squad_documents(DATA / "SQuAD" / "dev-v1.1.json")
                 + conll_documents(DATA / "conll2003" / "train.txt"))
    return len(documents), write_documents(path, documents)


def tokenized_documents(path, tokenizer):
    """Token ids per document of a corpus file in the input format."""
    documents, current = [], []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line:
            if current:
                documents.append(current)
            current = []
            continue
        current += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
    if current:
        documents.append(current)
    return documents


def windows(documents, cls_id, sep_id, min_tokens=32):
    """[CLS] + up to 126 tokens + [SEP] pieces of each document (padded with 0) and lengths."""
    import numpy as np
    size = SEQ - 2
    rows, lengths = [], []
    for ids in documents:
        for start in range(0, len(ids), size):
            piece = ids[start:start + size]
            if len(piece) < min_tokens:
                continue
            row = [cls_id] + piece + [sep_id]
            lengths.append(len(row))
            rows.append(row + [0] * (SEQ - len(row)))
    return np.array(rows, np.int32), np.array(lengths, np.int32)


def write_training_windows(corpus, out_path):
    """The peers' training windows, from the same corpus file ours reads."""
    import numpy as np
    from bert_tf import tokenization
    tokenizer = tokenization.FullTokenizer(str(VOCAB), do_lower_case=True)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    ids, lengths = windows(tokenized_documents(corpus, tokenizer), cls_id, sep_id)
    np.savez(out_path, input_ids=ids, lengths=lengths)
    return len(ids)


def write_heldout(out_path):
    """The one fixed held-out masked set: WikiText-2 test windows masked once, the original's
    way (15%, at most 20, 80% [MASK] / 10% random / 10% kept, seed HELDOUT_SEED)."""
    import numpy as np
    from bert_tf import tokenization
    tokenizer = tokenization.FullTokenizer(str(VOCAB), do_lower_case=True)
    vocab_words = list(tokenizer.vocab.keys())
    cls_id, sep_id, mask_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "[MASK]"])
    documents = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" ".join(sentences)))
                 for sentences in wikitext_documents(DATA / "wikitext-2" / "test.txt")]
    ids, lengths = windows(documents, cls_id, sep_id, min_tokens=SEQ - 2)  # full windows only
    rng = np.random.RandomState(HELDOUT_SEED)
    chosen = np.sort(rng.choice(len(ids), min(HELDOUT_WINDOWS, len(ids)), replace=False))
    ids = ids[chosen].copy()
    n = len(ids)
    positions = np.zeros((n, PREDICTIONS), np.int32)
    labels = np.zeros((n, PREDICTIONS), np.int32)
    weights = np.zeros((n, PREDICTIONS), np.float32)
    for row in range(n):
        candidates = np.arange(1, SEQ - 1)
        count = min(PREDICTIONS, max(1, int(round((SEQ - 2) * MASK_RATE))))
        picked = np.sort(rng.choice(candidates, count, replace=False))
        for k, pos in enumerate(picked):
            labels[row, k], positions[row, k], weights[row, k] = ids[row, pos], pos, 1.0
            draw = rng.random_sample()
            if draw < 0.8:
                ids[row, pos] = mask_id
            elif draw < 0.9:
                ids[row, pos] = tokenizer.vocab[vocab_words[rng.randint(0, len(vocab_words))]]
    np.savez(out_path, input_ids=ids, input_mask=np.ones_like(ids), masked_lm_positions=positions,
             masked_lm_ids=labels, masked_lm_weights=weights)
    return n, int(weights.sum())


def accuracy(heldout, predictions):
    """Accuracy over the masked positions."""
    import numpy as np
    w = heldout["masked_lm_weights"]
    return float(np.sum(w * (np.asarray(predictions) == heldout["masked_lm_ids"])) / np.sum(w))


def _tf_threads():
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)


def _linear_schedule_lr(step, lr, steps, warmup):
    return lr * step / warmup if step < warmup else lr * max(0.0, 1.0 - step / steps)


def child_ours_eval(spec):
    """Scores every checkpoint of a run_pretraining output dir on the held-out set."""
    import numpy as np
    import tensorflow as tf
    _tf_threads()
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    heldout = dict(np.load(spec["heldout"]))
    inputs = {"input_ids": heldout["input_ids"], "input_mask": heldout["input_mask"],
              "segment_ids": np.zeros_like(heldout["input_ids"]),
              "masked_lm_positions": heldout["masked_lm_positions"]}
    model = BertPretrainer(BertConfig.from_dict(MODEL))
    model({k: v[:2] for k, v in inputs.items()}, training=False)
    predict = tf.function(lambda batch: tf.argmax(
        model(batch, training=False, return_encoder_outputs=False)["masked_lm_log_probs"], -1))
    results = []
    for path in spec["checkpoints"]:
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
        predictions = np.concatenate([
            np.asarray(predict({k: v[i:i + 64] for k, v in inputs.items()})).reshape(
                -1, PREDICTIONS) for i in range(0, len(heldout["input_ids"]), 64)])
        results.append(predictions.tolist())
    print(json.dumps({"predictions": results}))


def child_keras_hub(spec):
    import numpy as np
    import tensorflow as tf
    _tf_threads()
    import keras
    import keras_hub
    keras.utils.set_random_seed(spec["seed"])
    steps, lr, eval_every = spec["steps"], spec["lr"], spec["eval_every"]
    warmup = max(1, int(0.1 * steps))
    data = np.load(spec["windows"])
    heldout = dict(np.load(spec["heldout"]))
    vocab = [line.rstrip("\n") for line in open(VOCAB, encoding="utf-8")]
    cls_id, sep_id, mask_id = (vocab.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    backbone = keras_hub_backbone(MODEL, dropout=0.1,
                                  max_sequence_length=MODEL["max_position_embeddings"])
    lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    masker = keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=MODEL["vocab_size"], mask_selection_rate=MASK_RATE,
        mask_token_id=mask_id, mask_selection_length=PREDICTIONS,
        unselectable_token_ids=[0, cls_id, sep_id], mask_token_rate=0.8, random_token_rate=0.1)

    class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            return tf.where(step < warmup, lr * step / warmup,
                            lr * tf.maximum(0.0, 1.0 - step / steps))

    optimizer = keras.optimizers.AdamW(WarmupLinear(), weight_decay=0.01, epsilon=1e-6,
                                       global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    lm.compile(optimizer=optimizer,
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               weighted_metrics=[])

    def to_features(ids):
        masked = masker(ids)
        x = {"token_ids": masked["token_ids"], "segment_ids": tf.zeros_like(ids),
             "padding_mask": tf.not_equal(ids, 0), "mask_positions": masked["mask_positions"]}
        return x, masked["mask_ids"], masked["mask_weights"]

    dataset = (tf.data.Dataset.from_tensor_slices(data["input_ids"]).shuffle(len(data["input_ids"]),
                                                                                seed=spec["seed"])
               .repeat().batch(BATCH, drop_remainder=True).map(to_features).prefetch(2))
    eval_x = {"token_ids": heldout["input_ids"], "segment_ids": np.zeros_like(heldout["input_ids"]),
              "padding_mask": heldout["input_mask"].astype(bool),
              "mask_positions": heldout["masked_lm_positions"]}
    points, eval_seconds = [], [0.0]

    class Evaluate(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            start = time.time()
            logits = lm.predict(eval_x, batch_size=64, verbose=0)
            eval_seconds[0] += time.time() - start
            done = (epoch + 1) * eval_every
            points.append({"step": done, "time": time.time() - eval_seconds[0],
                           "predictions": np.argmax(logits, -1).tolist()})
            print(f"keras_hub step {done} loss {logs.get('loss', float('nan')):.3f}",
                  file=sys.stderr, flush=True)

    # One fit (one iterator over the repeated, shuffled windows), an "epoch" per evaluation.
    lm.fit(dataset, steps_per_epoch=eval_every, epochs=steps // eval_every, verbose=0,
           callbacks=[Evaluate()])
    print(json.dumps({"points": points}))


def child_transformers(spec):
    import numpy as np
    import torch
    import transformers
    torch.set_num_threads(THREADS)
    torch.manual_seed(spec["seed"])
    steps, lr, eval_every = spec["steps"], spec["lr"], spec["eval_every"]
    data = np.load(spec["windows"])
    heldout = dict(np.load(spec["heldout"]))
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(VOCAB), do_lower_case=True)
    config = transformers_config(MODEL, type_vocab_size=2,
                                 max_position_embeddings=MODEL["max_position_embeddings"])
    model = transformers.BertForMaskedLM(config).train()
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=MASK_RATE)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not any(x in n for x in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters()
                          if any(x in n for x in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, eps=1e-6)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, max(1, int(0.1 * steps)),
                                                             steps)
    examples = [{"input_ids": row[:n].tolist()}
                for row, n in zip(data["input_ids"], data["lengths"])]
    rng = np.random.RandomState(0)
    order = []
    eval_ids = torch.tensor(heldout["input_ids"]).long()
    eval_mask = torch.tensor(heldout["input_mask"]).long()
    positions = torch.tensor(heldout["masked_lm_positions"]).long()
    points, eval_seconds = [], 0.0
    for step in range(1, steps + 1):
        if len(order) < BATCH:
            order += rng.permutation(len(examples)).tolist()
        batch = collator([examples[i] for i in order[:BATCH]])
        del order[:BATCH]
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if step % eval_every == 0:
            start = time.time()
            model.eval()
            predictions = []
            with torch.no_grad():
                for i in range(0, len(eval_ids), 64):
                    # BertForMaskedLM's own layers, its head at the masked positions only.
                    hidden = model.bert(input_ids=eval_ids[i:i + 64],
                                        attention_mask=eval_mask[i:i + 64]).last_hidden_state
                    picked = torch.gather(hidden, 1, positions[i:i + 64, :, None].expand(
                        -1, -1, hidden.shape[-1]))
                    predictions += model.cls(picked).argmax(-1).tolist()
            model.train()
            eval_seconds += time.time() - start
            points.append({"step": step, "time": time.time() - eval_seconds,
                           "predictions": predictions})
            print(f"transformers step {step} loss {loss.item():.3f}", file=sys.stderr, flush=True)
    print(json.dumps({"points": points}))


CHILDREN = {"ours_eval": child_ours_eval, "keras_hub": child_keras_hub,
            "transformers": child_transformers}


# ---- Parent ----

def run_child(venv, spec, label):
    """Runs a child with 2 threads, its progress lines logged under `label`; returns (its start
    time, its JSON result)."""
    start = time.time()

    def progress(line):
        if re.search(r"step \d+", line) and label:
            log(f"  {label}: {line.strip()} ({time.time() - start:.0f} s)")

    result = harness.run_child(harness.child_command(__spec__.name, spec, venv=venv),
                               label or spec["child"], env=dict(os.environ, **THREAD_ENV),
                               on_line=progress, check=True)
    return start, result


def defined_flags(module_files):
    names = set()
    for path in module_files:
        names |= set(re.findall(r"DEFINE_\w+\(\s*[\"'](\w+)[\"']", path.read_text()))
    return names


def missing_flags(recipe):
    """The recipe's flags that the command lines of this checkout do not define (yet)."""
    create = defined_flags([PROJECT_ROOT / "data_tools" / "create_pretraining_data.py"])
    train = defined_flags([PROJECT_ROOT / "run" / "run_pretraining.py",
                           PROJECT_ROOT / "run" / "common_flags.py"])
    missing = [f"data_tools.create_pretraining_data {f.split('=')[0]}" for f in recipe["create"]
               if f.split("=")[0].lstrip("-") not in create]
    missing += [f"run.run_pretraining {f.split('=')[0]}" for f in recipe["train"]
                if f.split("=")[0].lstrip("-") not in train]
    return missing


def run_command(line, label, env):
    """(start time, wall seconds) of `line`."""
    start = time.time()
    return start, harness.run_command(line, label, env).seconds


def run_ours(args, name, optimizer, lr, workdir, corpus, heldout_path, records_cache):
    recipe = RECIPES[name]
    env = dict(os.environ, **THREAD_ENV)
    create_flags = [f.replace("{vocab}", str(VOCAB)) for f in recipe["create"]]
    key = " ".join(create_flags)
    if key not in records_cache:
        records_dir = workdir / f"records-{len(records_cache)}"
        records_dir.mkdir(parents=True, exist_ok=True)
        line = [sys.executable, "-m", "data_tools.create_pretraining_data",
                f"--input_file={corpus}", f"--output_file={records_dir / 'train.tfrecord'}",
                f"--vocab_file={VOCAB}", *CREATE_FLAGS,
                *([] if "--masking=dynamic" in create_flags else STATIC_MASK_FLAGS),
                *create_flags]
        log(f"  ours {name}: {' '.join(line[1:])}")
        _, seconds = run_command(line, "create_pretraining_data", env)
        records_cache[key] = (records_dir, seconds)
        log(f"  records made in {seconds:.1f} s")
    records_dir, create_seconds = records_cache[key]
    label = f"ours {name}:{optimizer}:{lr:g}"
    output_dir = workdir / f"ours-{name}-{optimizer}-{lr:g}-{args.steps}"
    if output_dir.exists():
        shutil.rmtree(output_dir)  # a run_pretraining output dir would resume
    config = workdir / "bert_config.json"
    config.write_text(json.dumps(MODEL))
    train_flags = [f.replace("{vocab}", str(VOCAB)) for f in recipe["train"]]
    line = [sys.executable, "-m", "run.run_pretraining", f"--bert_config_file={config}",
            f"--input_file={records_dir}/*.tfrecord", f"--output_dir={output_dir}", "--do_train",
            f"--train_batch_size={BATCH}", f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}", f"--num_train_steps={args.steps}",
            f"--num_warmup_steps={max(1, int(0.1 * args.steps))}", f"--learning_rate={lr}",
            f"--optimizer={optimizer}", f"--save_checkpoints_steps={args.eval_every}",
            f"--iterations_per_loop={args.eval_every}", f"--log_steps={args.eval_every}",
            "--keep_checkpoint_max=1000", f"--seed={args.seed}", *train_flags]
    log(f"  {label}: {' '.join(line[1:])}")
    start, seconds = run_command(line, label, env)
    log(f"  {label}: trained in {seconds:.1f} s (+ records {create_seconds:.1f} s)")
    checkpoints = []
    for step in range(args.eval_every, args.steps + 1, args.eval_every):
        index = output_dir / f"model.ckpt-{step}.index"
        if index.exists():
            checkpoints.append((step, str(index)[:-len(".index")],
                                index.stat().st_mtime - start + create_seconds))
    _, result = run_child(None, {"child": "ours_eval", "heldout": str(heldout_path),
                                           "checkpoints": [c[1] for c in checkpoints]}, None)
    return [{"step": step, "time": t, "predictions": p}
            for (step, _, t), p in zip(checkpoints, result["predictions"])]


def first_reach(points, target):
    for p in points:
        if p["accuracy"] >= target - 1e-12:
            return p
    return None


def report(results, out_dir, args):
    peers = [s for s in results if not s.startswith("ours")]
    finals = {s: results[s][-1]["accuracy"] for s in results if results[s]}
    target = min(finals[s] for s in peers) if peers else None
    reach = {s: first_reach(results[s], target) if target is not None else None for s in results}
    fastest_peer = min((s for s in peers if reach[s]), key=lambda s: reach[s]["time"],
                       default=None)
    with open(out_dir / "results.tsv", "w") as f:
        f.write("system\tstep\tseconds\taccuracy\n")
        for s, points in results.items():
            for p in points:
                f.write(f"{s}\t{p['step']}\t{p['time']:.1f}\t{p['accuracy']:.4f}\n")
    lines = [f"Held-out masked-LM accuracy (WikiText-2 test, {args.heldout_positions} fixed "
             f"masked positions), {args.steps} steps, eval every {args.eval_every}.", ""]
    if target is not None:
        lines.append(f"TARGET = lowest final accuracy of the peers = {target:.4f}"
                     + (f"; fastest peer to reach it: {fastest_peer} "
                        f"({reach[fastest_peer]['time']:.0f} s)" if fastest_peer else ""))
        lines.append("")
    lines += ["| system | s/step | final accuracy | best | "
              "reaches TARGET at step | seconds | vs fastest peer (goal <= 0.67) |",
              "|---|---|---|---|---|---|---|"]
    for s, points in results.items():
        if not points:
            continue
        per_step = ((points[-1]["time"] - points[0]["time"])
                    / max(1, points[-1]["step"] - points[0]["step"])) if len(points) > 1 else 0
        r = reach[s]
        ratio = (f"{r['time'] / reach[fastest_peer]['time']:.2f}x" if r and fastest_peer
                 else "never" if target is not None else "")
        lines.append(f"| {s} | {per_step:.2f} | {points[-1]['accuracy']:.4f} | "
                     f"{max(p['accuracy'] for p in points):.4f} | {r['step'] if r else '-'} | "
                     f"{round(r['time']) if r else '-'} | {ratio} |")
    lines += ["", "Accuracy at each checkpoint (step: accuracy @ seconds):", ""]
    for s, points in results.items():
        lines.append(f"- {s}: " + ", ".join(f"{p['step']}: {p['accuracy']:.3f} @ {p['time']:.0f}"
                                          for p in points))
    text = "\n".join(lines) + "\n"
    (out_dir / "results.md").write_text(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 5))
        for s, points in results.items():
            ax.plot([p["time"] for p in points], [p["accuracy"] for p in points], marker="o",
                    label=s)
        if target is not None:
            ax.axhline(target, color="gray", linestyle="--", label=f"TARGET {target:.3f}")
        ax.set_xlabel("wall seconds since the system's start (2 threads)")
        ax.set_ylabel("held-out masked-LM accuracy")
        ax.set_title(f"BERT L4 H256 from scratch, seq {SEQ}, batch {BATCH}, {args.steps} steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "accuracy_vs_time.png", dpi=110)
    except ImportError:
        print("matplotlib missing: no plot (pip install matplotlib)", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_child(parser)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--eval_every", type=int, default=50)
    parser.add_argument("--systems", default="ours,keras_hub,transformers")
    parser.add_argument("--recipes", default=DEFAULT_RECIPES,
                        help="ours' runs: NAME[:OPTIMIZER[:LR]],... NAME one of "
                             + ", ".join(RECIPES) + " (default optimizer adamw, lr 5e-4)")
    parser.add_argument("--peer_lr", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=0,
                        help="every system's initialisation, input order and drawn masks")
    parser.add_argument("--out_dir", default=None,
                        help="default: bench/out/pretraining_quality (git-ignored)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep results already in --out_dir/points.json (systems run there "
                             "with the same --steps/--eval_every/--seed) and run only the others")
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        CHILDREN[spec["child"]](spec)
        return
    out_dir = pathlib.Path(args.out_dir or PROJECT_ROOT / "bench" / "out" / "pretraining_quality")
    out_dir.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    corpus, heldout_path, windows_path = (out_dir / "corpus.txt", out_dir / "heldout.npz",
                                          out_dir / "windows.npz")
    if not corpus.exists():
        documents, size = write_corpus(corpus)
        log(f"corpus: {documents} documents, {size / 1e6:.2f} MB -> {corpus}")
    if not heldout_path.exists():
        n, positions = write_heldout(heldout_path)
        log(f"held-out: {n} windows, {positions} masked positions -> {heldout_path}")
    if not windows_path.exists() and {"keras_hub", "transformers"} & set(systems):
        log(f"peer windows: {write_training_windows(corpus, windows_path)} -> {windows_path}")
    import numpy as np
    heldout = dict(np.load(heldout_path))
    args.heldout_positions = int(heldout["masked_lm_weights"].sum())
    points_file = out_dir / "points.json"
    saved = json.loads(points_file.read_text()) if args.reuse and points_file.exists() else {}
    saved = {k: v for k, v in saved.items()
             if (v.get("steps"), v.get("eval_every"), v.get("seed", 0))
             == (args.steps, args.eval_every, args.seed)}
    results = {k: v["points"] for k, v in saved.items()}

    def keep(label, points):
        for p in points:
            predictions = p.pop("predictions")
            p["accuracy"] = accuracy(heldout, predictions)
            log(f"  {label} step {p['step']}: accuracy {p['accuracy']:.4f} at {p['time']:.0f} s")
        results[label] = points
        saved[label] = {"steps": args.steps, "eval_every": args.eval_every, "seed": args.seed,
                        "points": points}
        points_file.write_text(json.dumps(saved, indent=1))

    records_cache = {}
    for system in systems:
        if system == "ours":
            for spec in [r for r in args.recipes.split(",") if r]:
                parts = spec.split(":")
                name, optimizer = parts[0], parts[1] if len(parts) > 1 else "adamw"
                lr = float(parts[2]) if len(parts) > 2 else 5e-4
                label = f"ours {name}:{optimizer}:{lr:g}"
                if name not in RECIPES:
                    sys.exit(f"error: --recipes: unknown recipe {name!r} (one of "
                             f"{', '.join(RECIPES)})")
                missing = missing_flags(RECIPES[name])
                if missing:
                    log(f"{label}: skipped, this checkout's command lines lack "
                        + ", ".join(missing) + f" ({RECIPES[name]['about']})")
                    continue
                if label in results:
                    log(f"{label}: kept from {points_file}")
                    continue
                log(f"{label}: {RECIPES[name]['about']}")
                keep(label, run_ours(args, name, optimizer, lr, out_dir, corpus, heldout_path,
                                     records_cache))
        elif system in ("keras_hub", "transformers"):
            label = f"{system} lr {args.peer_lr:g}"
            if label in results:
                log(f"{label}: kept from {points_file}")
                continue
            venv = harness.HF if system == "transformers" else None
            if venv and not venv.exists():
                log(f"transformers skipped: {venv.missing()}")
                continue
            log(f"{label}: {args.steps} steps")
            start, result = run_child(venv, {"child": system, "steps": args.steps,
                                               "lr": args.peer_lr, "eval_every": args.eval_every,
                                               "seed": args.seed,
                                               "windows": str(windows_path),
                                               "heldout": str(heldout_path)}, label)
            for p in result["points"]:
                p["time"] -= start
            keep(label, result["points"])
        else:
            sys.exit(f"error: --systems: unknown system {system!r}")
    report(results, out_dir, args)


if __name__ == "__main__":
    main()
