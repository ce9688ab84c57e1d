"""Time to a quality: pretraining from scratch, bert_tf's command lines vs keras-hub vs
transformers, held-out masked-LM accuracy against steps and time, over seeds.

    bash bench/envs/hf_env.sh                     # once: the transformers peer's venv
    python -m bench.training.pretraining_quality  # every system, 400 steps, eval every 50
    python -m bench.training.pretraining_quality --systems=ours,keras_hub --steps=3000 \\
        --eval_every=250 --seeds=0,1,2 --recipes=efficient::1e-3 --peer_lr=1e-3
    python -m bench.training.pretraining_quality --step_time --systems=ours,keras_hub \\
        --recipes=efficient::1e-3 --peer_lr=1e-3       # seconds per step, side by side
    python -m bench.training.pretraining_quality --report --steps=3000 --eval_every=250

The same BERT for every system (`--model`: L4-H256, the default, L2-H128 or L4-H512; A = H/64,
I = 4H; uncased vocabulary of 30,522), `--seq` (128), `--batch` (32), from scratch, masking rate
0.15 (the peers; ours' recipe may set another), on the same real text from ../shared/data
(3.8 MB): WikiText-2 valid articles, SQuAD 1.1 dev paragraphs (one document per article),
CoNLL-2003 train documents; one sentence per line, a blank line between documents (`corpus.txt`
in --out_dir). The peers' schedule: the rate warmed up linearly over the first 10% of the steps
then decayed linearly to 0; ours' as its recipe says (below).

Held-out set, written once (`heldout.npz`; `heldout-<seq>.npz` at another --seq) and scored
identically for every system: 512 windows of --seq tokens of WikiText-2 *test* ([CLS] + tokens +
[SEP], the original's tokenizer), masked once (seed 12345) as the original's
create_pretraining_data masks: 15% of the tokens, at most 20 per window at 128, 80% [MASK] / 10%
random / 10% kept. Each system's checkpoints (every --eval_every steps) give their argmax
predictions at those positions; this process scores them all the same way: accuracy over the
masked positions. Predicting "the" everywhere scores 0.069 at 128 (the unigram plateau).
WikiText's `<unk>` (a word outside its vocabulary) is left out of both the corpus and the
held-out text: kept, it becomes four pieces ("<", "un", "##k", ">") that made a fifth of the
masked positions and were learned long before any real word.

Systems, one at a time, each in its own subprocess, 2 threads each (TF intra/inter-op threads,
OMP, torch.set_num_threads); --seeds runs each once per seed, the seed setting its
initialisation, input order and masks (ours: run_pretraining's --seed and the records'
--random_seed 12345 + seed):

  ours          the command lines: `data_tools.create_pretraining_data` then `run.run_pretraining`,
                per `--recipes=NAME[:OPTIMIZER[:LR[:STEPS]]],...` (RECIPES below). `efficient`
                and its variants make their records with `--recipe=efficient`; run_pretraining takes
                the sequence length, predictions, objective, masking rate and vocabulary from the
                records' manifest and the optimizer, warmup and shuffle buffer from the recipe:
                the bench gives only the rate under test and the run's own flags. The others
                (`original`, ...) get --dupe_factor=5 and the masking flags at
                create_pretraining_data, and OPTIMIZER (default adamw; adam: with bias
                correction) with the peers' 10% warmup (PEER_WARMUP_SHARE) at
                run_pretraining. OPTIMIZER empty or `recipe` gives no --optimizer (the
                recipe's); LR defaults to the efficient recipe's rate for its family, 5e-4
                otherwise. STEPS (default --steps; a multiple of --eval_every below it): ours'
                own schedule, which ends there, against the peers' --steps.
                Checkpoints every --eval_every steps are scored afterwards in another process,
                then deleted but the last. A recipe whose flags this checkout's command lines
                lack is skipped with a message.
  keras_hub     keras_hub.models.BertMaskedLM (masked-LM only) on windows of the corpus, masked
                per batch by keras_hub.layers.MaskedLMMaskGenerator (what BertMaskedLMPreprocessor
                uses: 15%, at most 20 at seq 128, 80/10/10), keras AdamW (weight decay 0.01 except
                bias and LayerNorm, global-norm clipping 1.0, epsilon 1e-6), model.fit.
  transformers  BertForMaskedLM + DataCollatorForLanguageModeling (mlm_probability 0.15) on the
                same windows, torch.optim.AdamW (the same exclusions, epsilon 1e-6),
                get_linear_schedule_with_warmup, clip_grad_norm_ 1.0; PyTorch CPU in the venv of
                bench/envs/hf_env.sh ($BERT_TF_HF_VENV, default ~/.cache/bert_tf/hf-venv).
                --peer_lr (comma-separated: one run per rate) is both peers' rate.

The peers' windows: each document's tokens cut into pieces of seq - 2 ([CLS] piece [SEP]; a last
piece shorter than 32 tokens dropped), shuffled each epoch.

Modes:
  (default)     the curves: every system and seed, accuracy at every checkpoint, kept in
                --out_dir/points.json per (system, seed, steps, eval_every, model, batch, seq);
                --reuse skips the runs already there. Each peer's final model stays in --out_dir
                (a keras-hub preset, a transformers directory: SYSTEM-LR-MODEL-bB-sS-STEPS-seedN)
                for run.evaluate_pretraining. Then the report.
  --step_time   seconds per training step of each selected system, side by side: in each of
                --rounds rounds (systems interleaved, the order reversed every other round) each
                system trains for real twice, --step_time_steps=SHORT,LONG steps (ours: its
                recipe's command lines on its records, made once; evaluations off), and
                (wall of LONG - wall of SHORT) / (LONG - SHORT) is its s/step: start-up,
                compilation and the last checkpoint cancel. The median over rounds per system,
                with the date and the load average before and after each run, goes to
                --out_dir/step_times.json (merged by system); a table with ratios to keras_hub.
  --report      the report alone, from points.json and step_times.json.

The report covers every curve in points.json at this setup (--steps, --eval_every, --model,
--batch, --seq) of the systems in --systems. Time = step x the system's s/step from
step_times.json (a system measured there at another rate counts: the rate does not change the
step); without it, the measured wall times (marked *: ours' from its process start plus the
records' creation, the peers' without their evaluations). TARGET = the fastest peer's mean final
accuracy over its seeds, the fastest being the peer with the fewest seconds to its own mean
final accuracy along its seed-mean curve; that time is the ratios' denominator. Per system and
seed: the final accuracy, the first checkpoint at or above TARGET, its seconds, the ratio, and
`stall`: the checkpoints after the first 10% of steps still below 0.075. Per system: the
worst seed's ratio, and for ours the goal (every seed <= 0.5, no stall). Writes results.md,
results.tsv (system, seed, step, seconds, accuracy), accuracy_vs_steps.png and
accuracy_vs_time.png (matplotlib) into --out_dir, and prints the tables.
"""
import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import re
import shutil
import statistics
import sys
import time

from bench import harness
from bench.common import (DATA, MAX_PREDICTIONS, PROJECT_ROOT, VOCAB, keras_hub_backbone,
                          transformers_config, write_documents)

# --model: (layers, hidden size); heads H/64, intermediate 4H.
MODELS = {"L2-H128": (2, 128), "L4-H256": (4, 256), "L4-H512": (4, 512)}
MASK_RATE = 0.15
HELDOUT_WINDOWS, HELDOUT_SEED = 512, 12345
DATA_SEED = 12345  # ours' records: --random_seed = DATA_SEED + the seed
# Predicting "the" everywhere at seq 128; a stalled run stays below STALL_BELOW past the first
# STALL_AFTER of --steps.
PLATEAU, STALL_BELOW, STALL_AFTER = 0.069, 0.075, 0.10
THREADS = 2
THREAD_ENV = {"OMP_NUM_THREADS": str(THREADS), "TF_NUM_INTRAOP_THREADS": str(THREADS),
              "TF_NUM_INTEROP_THREADS": str(THREADS), "TF_CPP_MIN_LOG_LEVEL": "2"}

# A recipe of ours: extra flags of create_pretraining_data and of run_pretraining. New recipes
# plug in here; `{vocab}` is replaced by the vocabulary's path, `{warmupN}` by N% of the steps,
# `{third}` by a third of them.
# Records made with --recipe=efficient carry the recipe in their manifest, and run_pretraining
# takes the optimizer, warmup and shuffle buffer from it: each variant changes one or two.
EFFICIENT = ["--recipe=efficient"]
RECIPES = {
    "original": dict(create=[], train=[],
                     about="the original's: static masks, masked-LM + next sentence"),
    "mlm": dict(create=["--objective=mlm"], train=[],
                about="no next-sentence loss (static masks)"),
    "mlm-dynamic": dict(create=["--objective=mlm", "--masking=dynamic"], train=[],
                        about="masked-LM only, masks drawn in tf.data at each epoch"),
    "packed": dict(create=["--objective=mlm", "--masking=dynamic", "--pack_sequences"], train=[],
                   about="masked-LM only, dynamic masks, packed rows"),
    "packed-full": dict(create=["--objective=mlm", "--masking=dynamic", "--pack_sequences",
                                "--short_seq_prob=0"], train=[],
                        about="as packed, every span cut to the full length (no short spans)"),
    "efficient": dict(create=EFFICIENT, train=[],
                      about="--recipe=efficient: its records, optimizer, warmup, shuffle "
                            "buffer"),
    "efficient-mask30": dict(create=EFFICIENT + ["--masked_lm_prob=0.3"], train=[],
                             about="efficient, 30% of the tokens masked"),
    "efficient-mask40": dict(create=EFFICIENT + ["--masked_lm_prob=0.4"], train=[],
                             about="efficient, 40% of the tokens masked"),
    "efficient-nopack": dict(create=EFFICIENT + ["--nopack_sequences"], train=[],
                             about="efficient, rows not packed"),
    "efficient-sentences": dict(create=EFFICIENT + ["--nofull_windows"], train=[],
                                about="efficient on the original's sentence spans"),
    "efficient-warmup6": dict(create=EFFICIENT, train=["--num_warmup_steps={warmup6}"],
                              about="efficient, warmup 6% of the steps"),
    "efficient-warmup6-buffer100": dict(
        create=EFFICIENT, train=["--num_warmup_steps={warmup6}", "--shuffle_buffer_size=100"],
        about="efficient, warmup 6%, shuffle buffer 100 (the original's)"),
    "efficient-warmup20": dict(create=EFFICIENT, train=["--num_warmup_steps={warmup20}"],
                               about="efficient, warmup 20% of the steps"),
    "efficient-adamw": dict(create=EFFICIENT, train=["--optimizer=adamw"],
                            about="efficient with AdamWeightDecay (no bias correction)"),
    "efficient-nodropout": dict(create=EFFICIENT, train=["--dropout=0"],
                                about="efficient, dropout off while pretraining (Cramming)"),
    "efficient-latedropout": dict(create=EFFICIENT, train=["--dropout_from_step={third}"],
                                  about="efficient, dropout off for the first third of the "
                                        "steps (late dropout)"),
}
DEFAULT_RECIPES = "efficient,original:adam:1e-3"


def is_efficient(recipe):
    """Whether the recipe's records are made with --recipe=efficient (and its schedule used)."""
    return "--recipe=efficient" in recipe["create"]


def library_recipe(name):
    from bert_tf.data.pretraining.recipes import RECIPES as LIBRARY
    return LIBRARY[name]


def model_config(name):
    layers, hidden = MODELS[name]
    return dict(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                num_attention_heads=hidden // 64, intermediate_size=4 * hidden,
                hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02)


def predictions(seq):
    """Masked positions per row at most: the original's at 128 and 512, else the rate's."""
    return MAX_PREDICTIONS.get(seq, math.ceil(MASK_RATE * seq))


# The peers' standard schedule (and ours' runs without the recipe's): a linear warmup over this
# share of the steps, then a linear decay to 0.
PEER_WARMUP_SHARE = 0.10


def warmup(steps, share=PEER_WARMUP_SHARE):
    """Warmup steps: `share` of `steps`, at least one."""
    return max(1, round(share * steps))


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


def windows(documents, cls_id, sep_id, seq, min_tokens=32):
    """[CLS] + up to seq - 2 tokens + [SEP] pieces of each document (padded with 0) and lengths."""
    import numpy as np
    size = seq - 2
    rows, lengths = [], []
    for ids in documents:
        for start in range(0, len(ids), size):
            piece = ids[start:start + size]
            if len(piece) < min_tokens:
                continue
            row = [cls_id] + piece + [sep_id]
            lengths.append(len(row))
            rows.append(row + [0] * (seq - len(row)))
    return np.array(rows, np.int32), np.array(lengths, np.int32)


def write_training_windows(corpus, out_path, seq):
    """The peers' training windows, from the same corpus file ours reads."""
    import numpy as np
    from bert_tf import tokenization
    tokenizer = tokenization.FullTokenizer(str(VOCAB), do_lower_case=True)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    ids, lengths = windows(tokenized_documents(corpus, tokenizer), cls_id, sep_id, seq)
    np.savez(out_path, input_ids=ids, lengths=lengths)
    return len(ids)


def write_heldout(out_path, seq):
    """The one fixed held-out masked set: WikiText-2 test windows masked once, the original's
    way (15%, at most predictions(seq), 80% [MASK] / 10% random / 10% kept, seed
    HELDOUT_SEED)."""
    import numpy as np
    from bert_tf import tokenization
    tokenizer = tokenization.FullTokenizer(str(VOCAB), do_lower_case=True)
    vocab_words = list(tokenizer.vocab.keys())
    cls_id, sep_id, mask_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "[MASK]"])
    documents = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" ".join(sentences)))
                 for sentences in wikitext_documents(DATA / "wikitext-2" / "test.txt")]
    ids, _ = windows(documents, cls_id, sep_id, seq, min_tokens=seq - 2)  # full ones only
    rng = np.random.RandomState(HELDOUT_SEED)
    chosen = np.sort(rng.choice(len(ids), min(HELDOUT_WINDOWS, len(ids)), replace=False))
    ids = ids[chosen].copy()
    n, most = len(ids), predictions(seq)
    positions = np.zeros((n, most), np.int32)
    labels = np.zeros((n, most), np.int32)
    weights = np.zeros((n, most), np.float32)
    for row in range(n):
        candidates = np.arange(1, seq - 1)
        count = min(most, max(1, int(round((seq - 2) * MASK_RATE))))
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


# ---- Children: one system's training, or the scoring of ours' checkpoints ----

def _tf_threads():
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)


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
    model = BertPretrainer(BertConfig.from_dict(spec["model"]))
    model({k: v[:2] for k, v in inputs.items()}, training=False)
    predict = tf.function(lambda batch: tf.argmax(
        model(batch, training=False, return_encoder_outputs=False)["masked_lm_log_probs"], -1))
    results = []
    for path in spec["checkpoints"]:
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
        predictions = np.concatenate([
            np.asarray(predict({k: v[i:i + 64] for k, v in inputs.items()})).reshape(
                -1, heldout["masked_lm_positions"].shape[1])
            for i in range(0, len(heldout["input_ids"]), 64)])
        results.append(predictions.tolist())
    print(json.dumps({"predictions": results}))


def child_keras_hub(spec):
    """keras-hub's BertMaskedLM trained for spec["steps"]; with spec["evaluate"], its held-out
    predictions every spec["eval_every"] steps (their time left out of its clock)."""
    import numpy as np
    import tensorflow as tf
    _tf_threads()
    import keras
    import keras_hub
    keras.utils.set_random_seed(spec["seed"])
    steps, lr, model, batch = spec["steps"], spec["lr"], spec["model"], spec["batch"]
    eval_every = spec["eval_every"] if spec["evaluate"] else steps
    warmup_steps = spec["warmup_steps"]
    data = np.load(spec["windows"])
    heldout = dict(np.load(spec["heldout"]))
    vocab = [line.rstrip("\n") for line in open(VOCAB, encoding="utf-8")]
    cls_id, sep_id, mask_id = (vocab.index(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    backbone = keras_hub_backbone(model, dropout=0.1,
                                  max_sequence_length=model["max_position_embeddings"])
    lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    masker = keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=model["vocab_size"], mask_selection_rate=MASK_RATE,
        mask_token_id=mask_id, mask_selection_length=spec["predictions"],
        unselectable_token_ids=[0, cls_id, sep_id], mask_token_rate=0.8, random_token_rate=0.1)

    class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            return tf.where(step < warmup_steps, lr * step / warmup_steps,
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
               .repeat().batch(batch, drop_remainder=True).map(to_features).prefetch(2))
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
           callbacks=[Evaluate()] if spec["evaluate"] else [])
    if spec.get("save_to"):
        with saved_model_folder(spec["save_to"]) as folder:
            backbone.save_to_preset(folder)
            tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(VOCAB), lowercase=True,
                                                       strip_accents=True)
            tokenizer.save_to_preset(folder)
    print(json.dumps({"points": points}))


def child_transformers(spec):
    """transformers' BertForMaskedLM, as child_keras_hub."""
    import numpy as np
    import torch
    import transformers
    torch.set_num_threads(THREADS)
    torch.manual_seed(spec["seed"])
    steps, lr, eval_every, batch = spec["steps"], spec["lr"], spec["eval_every"], spec["batch"]
    data = np.load(spec["windows"])
    heldout = dict(np.load(spec["heldout"]))
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(VOCAB), do_lower_case=True)
    config = transformers_config(spec["model"], type_vocab_size=2,
                                 max_position_embeddings=spec["model"]["max_position_embeddings"])
    model = transformers.BertForMaskedLM(config).train()
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=MASK_RATE)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not any(x in n for x in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters()
                          if any(x in n for x in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, eps=1e-6)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, spec["warmup_steps"],
                                                            steps)
    examples = [{"input_ids": row[:n].tolist()}
                for row, n in zip(data["input_ids"], data["lengths"])]
    rng = np.random.RandomState(spec["seed"])
    order = []
    eval_ids = torch.tensor(heldout["input_ids"]).long()
    eval_mask = torch.tensor(heldout["input_mask"]).long()
    positions = torch.tensor(heldout["masked_lm_positions"]).long()
    points, eval_seconds = [], 0.0
    for step in range(1, steps + 1):
        if len(order) < batch:
            order += rng.permutation(len(examples)).tolist()
        inputs = collator([examples[i] for i in order[:batch]])
        del order[:batch]
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if spec["evaluate"] and step % eval_every == 0:
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
    if spec.get("save_to"):
        with saved_model_folder(spec["save_to"]) as folder:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            # This transformers saves the fast tokenizer's tokenizer.json and no vocab.txt,
            # which BERT readers other than transformers (ours included) take.
            shutil.copyfile(VOCAB, os.path.join(folder, "vocab.txt"))
    print(json.dumps({"points": points}))


@contextlib.contextmanager
def saved_model_folder(path):
    """A peer's final model for downstream evaluation (run.evaluate_pretraining), written into
    a partial folder that replaces `path` when complete."""
    partial = f"{path}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    yield partial
    shutil.rmtree(path, ignore_errors=True)
    os.replace(partial, path)


CHILDREN = {"ours_eval": child_ours_eval, "keras_hub": child_keras_hub,
            "transformers": child_transformers}


# ---- Runs (parent) ----

@dataclasses.dataclass(frozen=True)
class Run:
    """One system at one rate: ours with a recipe (and an optimizer, None: the recipe's; and
    its own number of steps, None: --steps), or a peer."""
    system: str
    lr: float
    recipe: str = None
    optimizer: str = None
    steps: int = None

    @property
    def label(self):
        if self.system == "ours":
            return (f"ours {self.recipe}:{self.optimizer or 'recipe'}:{self.lr:g}"
                    + (f":{self.steps}" if self.steps else ""))
        return f"{self.system} lr {self.lr:g}"


def family(label):
    """What a step time is shared by: the recipe (ours) or the peer, whatever the rate."""
    return label.split(":")[0] if label.startswith("ours ") else label.split(" ")[0]


def parse_runs(parser, args):
    """The Runs of --systems, --recipes and --peer_lr; a bad value is a usage error (exit 2)."""
    runs = []
    for system in [s for s in args.systems.split(",") if s]:
        if system == "ours":
            for spec in [r for r in args.recipes.split(",") if r]:
                name, optimizer, lr, steps = (spec.split(":") + ["", "", ""])[:4]
                if name not in RECIPES or spec.count(":") > 3:
                    parser.error(f"--recipes: {spec!r}: NAME[:OPTIMIZER[:LR[:STEPS]]], NAME one "
                                 f"of {', '.join(RECIPES)}")
                if steps and not (steps.isdigit() and 0 < int(steps) < args.steps
                                  and int(steps) % args.eval_every == 0):
                    parser.error(f"--recipes: {spec!r}: STEPS must be a multiple of "
                                 f"--eval_every={args.eval_every} below --steps={args.steps}")
                efficient = is_efficient(RECIPES[name])
                if optimizer in ("", "recipe"):
                    optimizer = (None if efficient or ":" in spec else "adamw")
                try:
                    lr = float(lr) if lr else (library_recipe("efficient").training_flags[
                        "learning_rate"] if efficient else 5e-4)
                except ValueError:
                    parser.error(f"--recipes: {spec!r}: the rate {lr!r} is not a number")
                runs.append(Run("ours", lr, name, optimizer, int(steps) if steps else None))
        elif system in ("keras_hub", "transformers"):
            try:
                rates = [float(r) for r in args.peer_lr.split(",") if r]
            except ValueError:
                parser.error(f"--peer_lr: {args.peer_lr!r}: comma-separated numbers")
            runs += [Run(system, lr) for lr in rates]
        else:
            parser.error(f"--systems: unknown system {system!r} (ours, keras_hub, transformers)")
    return runs


def defined_flags(module_files):
    names = set()
    for path in module_files:
        names |= set(re.findall(r"DEFINE_\w+\(\s*[\"'](\w+)[\"']", path.read_text()))
    return names


def missing_flags(recipe):
    """The recipe's flags (and, for --recipe=efficient, those the recipe sets) that the command
    lines of this checkout do not define (yet)."""
    create = defined_flags([PROJECT_ROOT / "data_tools" / "create_pretraining_data.py"])
    train = defined_flags([PROJECT_ROOT / "run" / "run_pretraining.py",
                           PROJECT_ROOT / "run" / "common_flags.py"])
    wanted = [("data_tools.create_pretraining_data", create, f) for f in recipe["create"]]
    wanted += [("run.run_pretraining", train, f) for f in recipe["train"]]
    if is_efficient(recipe) and "recipe" in create:
        wanted += [("data_tools.create_pretraining_data (--recipe=efficient)", create, f"--{name}")
                   for name in library_recipe("efficient").data_flags]

    def name(flag, defined):
        name = flag.lstrip("-").split("=")[0]
        return name[2:] if name not in defined and name.startswith("no") else name

    return [f"{command} --{name(f, defined)}" for command, defined, f in wanted
            if name(f, defined) not in defined]


def child_spec(args, run, seed, steps, evaluate):
    return {"child": run.system, "steps": steps, "warmup_steps": warmup(steps), "lr": run.lr,
            "eval_every": args.eval_every, "seed": seed, "evaluate": evaluate,
            "model": model_config(args.model), "batch": args.batch,
            "predictions": predictions(args.seq), "windows": str(args.windows),
            "heldout": str(args.heldout)}


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


def make_records(args, name, seed, cache):
    """(folder, seconds to make) of ours' records for recipe `name` and `seed`: made once per
    distinct set of data flags and seed, shared by the recipes that use the same ones. The
    folder is this process's (another bench process may work in --out_dir), removed by
    remove_records at its end."""
    recipe = RECIPES[name]
    create_flags = [f.replace("{vocab}", str(VOCAB)) for f in recipe["create"]]
    key = (tuple(create_flags), seed)
    if key not in cache:
        folder = args.out_dir / f"records-{name}-seq{args.seq}-seed{seed}-pid{os.getpid()}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        # The original's data settings, where the efficient recipe sets its own.
        original = [] if is_efficient(recipe) else [
            "--dupe_factor=5", f"--max_predictions_per_seq={predictions(args.seq)}",
            f"--masked_lm_prob={MASK_RATE}"]
        line = [sys.executable, "-m", "data_tools.create_pretraining_data",
                f"--input_file={args.corpus}", f"--output_file={folder / 'train.tfrecord'}",
                f"--vocab_file={VOCAB}", "--do_lower_case", f"--max_seq_length={args.seq}",
                f"--random_seed={DATA_SEED + seed}", *original, *create_flags]
        log(f"  ours {name}: {' '.join(line[1:])}")
        seconds = harness.run_command(line, "create_pretraining_data",
                                      dict(os.environ, **THREAD_ENV)).seconds
        cache[key] = (folder, seconds)
        log(f"  records made in {seconds:.1f} s")
    return cache[key]


def remove_records(cache):
    for folder, _ in cache.values():
        shutil.rmtree(folder, ignore_errors=True)


def train_line(args, run, records, output_dir, steps, save_every, seed):
    """run_pretraining's command line for `run` on `records` (a folder): the rate and the run's
    own flags; the recipe's schedule (efficient) or the optimizer with the peers' warmup (others);
    what the records' manifest gives only when they have none."""
    recipe = RECIPES[run.recipe]
    config = args.out_dir / f"bert_config-{args.model}.json"
    text = json.dumps(model_config(args.model))
    if not config.exists() or config.read_text() != text:  # another process may be reading it
        config.write_text(text)
    line = [sys.executable, "-m", "run.run_pretraining", f"--bert_config_file={config}",
            f"--input_file={records}/*.tfrecord", f"--output_dir={output_dir}", "--do_train",
            f"--train_batch_size={args.batch}", f"--num_train_steps={steps}",
            f"--learning_rate={run.lr}", f"--save_checkpoints_steps={save_every}",
            f"--iterations_per_loop={args.eval_every}", f"--log_steps={args.eval_every}",
            "--keep_checkpoint_max=1000", f"--seed={seed}"]
    if not any(pathlib.Path(records).glob("*.manifest.json")):
        line += [f"--max_seq_length={args.seq}",
                 f"--max_predictions_per_seq={predictions(args.seq)}"]
        if "--objective=mlm" in recipe["create"]:
            line.append("--objective=mlm")
        if "--masking=dynamic" in recipe["create"]:
            line += [f"--masked_lm_prob={MASK_RATE}", f"--vocab_file={VOCAB}"]
    if not is_efficient(recipe):
        line.append(f"--num_warmup_steps={warmup(steps)}")
    line += [re.sub(r"\{warmup(\d+)\}", lambda m: str(warmup(steps, int(m[1]) / 100)),
                    f.replace("{vocab}", str(VOCAB)).replace("{third}", str(steps // 3)))
             for f in recipe["train"]]
    if run.optimizer:
        line.append(f"--optimizer={run.optimizer}")
    return line


def run_training(line, label):
    """(start time, wall seconds) of a run_pretraining command line, its log lines logged."""
    start = time.time()

    def progress(text):
        # The flags taken from the records' manifest and the recipe, then the progress lines.
        if text.startswith("*** from") or (re.search(r"\bsteps?\b", text) and "***" not in text):
            log(f"  {label}: {text.strip()[:200]} ({time.time() - start:.0f} s)")

    result = harness.run_command(line, label, dict(os.environ, **THREAD_ENV), on_line=progress)
    return start, result.seconds


def curve_ours(args, run, seed, records_cache):
    """ours' points: train, then score every checkpoint in another process (outside the clock),
    then delete all checkpoints but the last."""
    records, create_seconds = make_records(args, run.recipe, seed, records_cache)
    steps = run.steps or args.steps  # its schedule's length
    output_dir = args.out_dir / (f"ours-{run.recipe}-{run.optimizer or 'recipe'}-{run.lr:g}-"
                                 f"{args.model}-b{args.batch}-s{args.seq}-{steps}-seed{seed}")
    if output_dir.exists():
        shutil.rmtree(output_dir)  # a run_pretraining output dir would resume
    line = train_line(args, run, records, output_dir, steps, args.eval_every, seed)
    log(f"  {run.label} seed {seed}: {' '.join(line[1:])}")
    start, seconds = run_training(line, f"{run.label} seed {seed}")
    log(f"  {run.label} seed {seed}: trained in {seconds:.1f} s (+ records {create_seconds:.1f} s)")
    checkpoints = []
    for step in range(args.eval_every, steps + 1, args.eval_every):
        index = output_dir / f"model.ckpt-{step}.index"
        if index.exists():
            checkpoints.append((step, str(index)[:-len(".index")],
                                index.stat().st_mtime - start + create_seconds))
    _, result = run_child(None, {"child": "ours_eval", "heldout": str(args.heldout),
                                 "model": model_config(args.model),
                                 "checkpoints": [c[1] for c in checkpoints]}, None)
    for _, prefix, _ in checkpoints[:-1]:
        for path in output_dir.glob(pathlib.Path(prefix).name + ".*"):
            path.unlink()
    return [{"step": step, "time": t, "predictions": p}
            for (step, _, t), p in zip(checkpoints, result["predictions"])]


def curve_peer(args, run, seed):
    """A peer's points; its final model is kept in --out_dir (a keras-hub preset, a transformers
    directory) for downstream evaluation."""
    venv = harness.HF if run.system == "transformers" else None
    save_to = args.out_dir / (f"{run.system}-{run.lr:g}-{args.model}-b{args.batch}-s{args.seq}-"
                              f"{args.steps}-seed{seed}")
    start, result = run_child(venv, dict(child_spec(args, run, seed, args.steps, True),
                                         save_to=str(save_to)), f"{run.label} seed {seed}")
    for p in result["points"]:
        p["time"] -= start
    return result["points"]


def available(run):
    """None, or why `run` cannot run in this checkout or on this machine."""
    if run.system == "ours":
        missing = missing_flags(RECIPES[run.recipe])
        return ("this checkout's command lines lack " + ", ".join(missing)) if missing else None
    if run.system == "transformers" and not harness.HF.exists():
        return harness.HF.missing()
    return None


# ---- points.json: the curves, per (system, seed, steps, eval_every, model, batch, seq) ----

SETUP = ("steps", "eval_every", "model", "batch", "seq")


def setup_of(args):
    return {name: getattr(args, name) for name in SETUP}


def point_key(label, seed, setup):
    return (f"{label} | seed {seed} | {setup['steps']} steps, every {setup['eval_every']} | "
            f"{setup['model']} batch {setup['batch']} seq {setup['seq']}")


def load_points(path):
    """points.json's entries by key; an older file's entries (keyed by label, at the then only
    model, batch and sequence length) converted."""
    if not path.exists():
        return {}
    entries = {}
    for key, entry in json.loads(path.read_text()).items():
        if "label" not in entry:
            entry = dict(entry, label=key, seed=entry.get("seed", 0), model="L4-H256", batch=32,
                         seq=128)
        entries[point_key(entry["label"], entry["seed"], entry)] = entry
    return entries


def curves_at(entries, args):
    """{label: {seed: points}} of the entries at this setup, of the systems in --systems."""
    systems = set(args.systems.split(","))
    curves = {}
    for entry in entries.values():
        if (all(entry[name] == getattr(args, name) for name in SETUP)
                and entry["label"].split(" ")[0] in systems and entry["points"]):
            curves.setdefault(entry["label"], {})[entry["seed"]] = entry["points"]
    return {label: dict(sorted(seeds.items())) for label, seeds in curves.items()}


def save_point(points_file, key, entry):
    """Adds one curve to points.json as it is now (another bench process may have added its
    own since this one started), replacing the file whole."""
    entries = load_points(points_file)
    entries[key] = entry
    partial = points_file.with_name(points_file.name + f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(entries, indent=1))
    os.replace(partial, points_file)


def run_curves(args, runs, heldout, records_cache):
    points_file = args.out_dir / "points.json"
    entries = load_points(points_file)
    setup = setup_of(args)
    skipped = set()
    for seed in args.seeds:
        for run in runs:
            key = point_key(run.label, seed, setup)
            if run.label in skipped:
                continue
            why = available(run)
            if why:
                log(f"{run.label}: skipped, {why}")
                skipped.add(run.label)
                continue
            if args.reuse and key in entries:
                log(f"{run.label} seed {seed}: kept from {points_file}")
                continue
            log(f"{run.label} seed {seed}: {run.steps or args.steps} steps"
                + (f" ({RECIPES[run.recipe]['about']})" if run.recipe else ""))
            points = (curve_ours(args, run, seed, records_cache) if run.system == "ours"
                      else curve_peer(args, run, seed))
            for p in points:
                p["accuracy"] = accuracy(heldout, p.pop("predictions"))
                log(f"  {run.label} seed {seed} step {p['step']}: accuracy {p['accuracy']:.4f} "
                    f"at {p['time']:.0f} s")
            save_point(points_file, key, dict(label=run.label, seed=seed, **setup,
                                              points=points))


# ---- Step times ----

def step_time_run(args, run, steps, records_cache):
    """Wall seconds of a whole training of `run` for `steps` steps (seed 0, evaluations off)."""
    if run.system != "ours":
        venv = harness.HF if run.system == "transformers" else None
        return harness.run_child(harness.child_command(
            __spec__.name, child_spec(args, run, 0, steps, False), venv=venv), run.label,
            env=dict(os.environ, **THREAD_ENV), check=True)["wall_s"]
    records, _ = make_records(args, run.recipe, 0, records_cache)
    output_dir = args.out_dir / "step-time-ours"
    if output_dir.exists():
        shutil.rmtree(output_dir)
    seconds = harness.run_command(train_line(args, run, records, output_dir, steps, steps, 0),
                                  run.label, dict(os.environ, **THREAD_ENV)).seconds
    shutil.rmtree(output_dir)
    return seconds


def measure_step_times(args, runs, records_cache):
    short, long = args.step_time_steps
    by_label = {}
    for run in runs:
        why = available(run)
        if why:
            log(f"{run.label}: skipped, {why}")
            continue
        by_label[run.label] = run
        if run.system == "ours":
            make_records(args, run.recipe, 0, records_cache)

    def measure(label, round_index):
        walls, loads = [], []
        for steps in (short, long):
            before = os.getloadavg()
            walls.append(step_time_run(args, by_label[label], steps, records_cache))
            loads.append({"steps": steps, "before": before, "after": os.getloadavg()})
        per_step = (walls[1] - walls[0]) / (long - short)
        log(f"  {label} round {round_index + 1}: {short} steps {walls[0]:.1f} s, {long} steps "
            f"{walls[1]:.1f} s: {per_step:.3f} s/step (load {loads[0]['before'][0]:.2f} .. "
            f"{loads[1]['after'][0]:.2f})")
        return {"round": round_index + 1, "short_s": walls[0], "long_s": walls[1],
                "s_per_step": per_step, "load_average": loads}

    log(harness.stamp())
    measured = harness.interleave(args.rounds, list(by_label), measure, alternate=True)
    path = args.out_dir / "step_times.json"
    setup = {"model": args.model, "batch": args.batch, "seq": args.seq}
    saved = json.loads(path.read_text()) if path.exists() else {}
    systems = saved.get("systems", {}) if saved.get("setup") == setup else {}
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    for label, rounds in measured.items():
        systems[label] = {"s_per_step": statistics.median(r["s_per_step"] for r in rounds),
                          "date": date, "steps": [short, long], "rounds": rounds}
    path.write_text(json.dumps({"setup": setup, "date": date, "cores": os.cpu_count(),
                                "systems": systems}, indent=1))
    keras = next((systems[label]["s_per_step"] for label in measured
                  if label.startswith("keras_hub")), None)
    rows = [[label, f"{systems[label]['s_per_step']:.3f}",
             " / ".join(f"{r['s_per_step']:.3f}" for r in rounds),
             harness.ratio(systems[label]["s_per_step"], keras),
             harness.ratio(keras, systems[label]["s_per_step"])]
            for label, rounds in measured.items()]
    print(f"\nSeconds per step, {args.model} seq {args.seq} batch {args.batch}, (wall of {long} "
          f"steps - wall of {short}) / {long - short}, median of {args.rounds} interleaved "
          f"rounds ({date}):\n")
    print("\n".join(harness.markdown(["system", "s/step", "rounds", "time vs keras_hub",
                                      "speed vs keras_hub"], rows, align="lrlrr")))
    print(f"\n-> {path}")


def load_step_times(args):
    """({label: s/step}, what they are) from step_times.json at this setup; ({}, why not)."""
    path = args.out_dir / "step_times.json"
    if not path.exists():
        return {}, f"no {path.name}"
    saved = json.loads(path.read_text())
    setup = {"model": args.model, "batch": args.batch, "seq": args.seq}
    if saved.get("setup") != setup:
        return {}, f"{path.name} is of {saved.get('setup')}, not {setup}"
    systems = saved["systems"]
    return ({label: entry["s_per_step"] for label, entry in systems.items()},
            "s/step from " + path.name + " (" + "; ".join(
                f"{label} {entry['date']}, median of {len(entry['rounds'])}, "
                f"{entry['steps'][1]} - {entry['steps'][0]} steps"
                for label, entry in systems.items()) + ")")


# ---- The report ----

def first_reach(points, target):
    for p in points:
        if p["accuracy"] >= target - 1e-12:
            return p
    return None


def summarise(curves, step_times, steps):
    """The report's figures. `curves`: {label: {seed: [{step, accuracy, time}, ...]}}, labels of
    peers not starting with "ours"; `step_times`: {label: s/step}, a label with none matched by
    family() timed by its points' wall `time` (and named in "wall")."""
    per_step = {}
    for label in curves:
        per_step[label] = step_times.get(label) or next(
            (s for other, s in step_times.items() if family(other) == family(label)), None)

    def seconds(label, point):
        return point["time"] if per_step[label] is None else point["step"] * per_step[label]

    own = {}  # peer -> (mean final accuracy, seconds to it along its seed-mean curve)
    for label, seeds in curves.items():
        if label.startswith("ours"):
            continue
        runs = list(seeds.values())
        final = statistics.mean(run[-1]["accuracy"] for run in runs)
        mean_curve = [{"accuracy": statistics.mean(p["accuracy"] for p in column),
                       "seconds": statistics.mean(seconds(label, p) for p in column)}
                      for column in zip(*runs)]
        # Its mean final accuracy is its mean curve's last point, unless a run stopped short.
        own[label] = (final, (first_reach(mean_curve, final) or mean_curve[-1])["seconds"])
    fastest = min(own, key=lambda label: own[label][1]) if own else None
    target, peer_seconds = own[fastest] if fastest else (None, None)
    rows, summary = [], {}
    for label, seeds in curves.items():
        for seed, points in seeds.items():
            hit = first_reach(points, target) if target is not None else None
            row = {"label": label, "seed": seed, "final": points[-1]["accuracy"],
                   "step": hit["step"] if hit else None,
                   "seconds": seconds(label, hit) if hit else None,
                   "stall": sum(1 for p in points
                                if p["step"] > STALL_AFTER * steps
                                and p["accuracy"] < STALL_BELOW)}
            row["ratio"] = (row["seconds"] / peer_seconds
                            if row["seconds"] is not None and peer_seconds else None)
            rows.append(row)
        mine = [row for row in rows if row["label"] == label]
        ratios = [row["ratio"] for row in mine]
        worst = None if None in ratios else max(ratios)
        stalls = sum(row["stall"] for row in mine)
        summary[label] = {
            "seeds": len(mine), "mean_final": statistics.mean(row["final"] for row in mine),
            "worst_ratio": worst, "stalls": stalls,
            "goal": (worst is not None and worst <= 0.5 and not stalls)
            if label.startswith("ours") and target is not None else None}
    return {"target": target, "fastest": fastest, "peer_seconds": peer_seconds, "own": own,
            "per_step": per_step, "wall": sorted(label for label in curves
                                                  if per_step[label] is None),
            "rows": rows, "summary": summary, "seconds": seconds}


def report(args):
    curves = curves_at(load_points(args.out_dir / "points.json"), args)
    if not curves:
        log(f"no curves in {args.out_dir / 'points.json'} at {setup_of(args)}: no report")
        return
    step_times, source = load_step_times(args)
    figures = summarise(curves, step_times, args.steps)
    seconds, target = figures["seconds"], figures["target"]
    wall = set(figures["wall"])

    def time_mark(label):
        return "*" if label in wall else ""

    layers, hidden = MODELS[args.model]
    lines = [(f"BERT {args.model} (L={layers} H={hidden} A={hidden // 64} I={4 * hidden}), "
              f"seq {args.seq}, batch {args.batch}, {args.steps} steps, checkpoints every "
              f"{args.eval_every}. Held-out masked-LM accuracy (WikiText-2 test, "
              f"{args.heldout_positions} fixed masked positions)"
              + (f"; predicting \"the\" everywhere scores {PLATEAU}." if args.seq == 128
                 else ".")), "",
             (f"Time = step x s/step: {source}." if step_times else f"Time: {source}.")
             + (f" Timed by the measured wall times (marked *: ours' since its process start "
                f"plus the records' creation, the peers' without their evaluations): "
                f"{', '.join(sorted(wall))}." if wall else ""), ""]
    if target is not None:
        fastest = figures["fastest"]
        lines += [f"TARGET = {target:.4f}: the mean final accuracy over "
                  f"{len(curves[fastest])} seed(s) of {fastest}, the fastest peer to its own "
                  f"mean final accuracy ({figures['peer_seconds']:.0f} s{time_mark(fastest)} "
                  "along its seed-mean curve: the ratios' denominator). Peers: "
                  + "; ".join(f"{label} {final:.4f} in {s:.0f} s{time_mark(label)}"
                              for label, (final, s) in figures["own"].items()) + ".", ""]
    else:
        lines += ["No peer's curve at this setup: no TARGET.", ""]
    rows = []
    for row in figures["rows"]:
        per_step = figures["per_step"][row["label"]]
        rows.append([row["label"], row["seed"], f"{per_step:.3f}" if per_step else "*",
                     f"{row['final']:.4f}", row["step"] or "never",
                     f"{row['seconds']:.0f}{time_mark(row['label'])}"
                     if row["seconds"] is not None else "-",
                     f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-", row["stall"]])
    lines += harness.markdown(["system", "seed", "s/step", "final accuracy",
                               "reaches TARGET at step", "seconds", "vs fastest peer",
                               f"stall (< {STALL_BELOW} after 10%)"], rows, align="llrrrrrr")
    lines.append("")
    rows = [[label, s["seeds"], f"{s['mean_final']:.4f}",
             f"{s['worst_ratio']:.2f}x" if s["worst_ratio"] is not None else "never",
             s["stalls"], {True: "**yes**", False: "no", None: ""}[s["goal"]]]
            for label, s in figures["summary"].items()]
    lines += harness.markdown(["system", "seeds", "mean final accuracy", "worst-seed ratio",
                               "stalls", "goal: every seed <= 0.5, no stall"], rows,
                              align="lrrrrl")
    lines += ["", "Accuracy at each checkpoint (step: accuracy):", ""]
    for label, seeds in curves.items():
        for seed, points in seeds.items():
            lines.append(f"- {label} seed {seed}: " + ", ".join(
                f"{p['step']}: {p['accuracy']:.3f}" for p in points))
    text = "\n".join(lines) + "\n"
    (args.out_dir / "results.md").write_text(text)
    with open(args.out_dir / "results.tsv", "w") as f:
        f.write("system\tseed\tstep\tseconds\taccuracy\n")
        for label, seeds in curves.items():
            for seed, points in seeds.items():
                for p in points:
                    f.write(f"{label}\t{seed}\t{p['step']}\t{seconds(label, p):.1f}\t"
                            f"{p['accuracy']:.4f}\n")
    print(text)
    plot(args, curves, figures)


def plot(args, curves, figures):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plots (pip install matplotlib)", file=sys.stderr)
        return
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for name, x_label, x_of in [
            ("accuracy_vs_steps.png", "training steps", lambda label, p: p["step"]),
            ("accuracy_vs_time.png", "seconds, 2 threads: step x s/step"
             + (" (*: measured wall time)" if figures["wall"] else ""), figures["seconds"])]:
        fig, ax = plt.subplots(figsize=(9, 5.5))
        for index, (label, seeds) in enumerate(curves.items()):
            for n, points in enumerate(seeds.values()):
                ax.plot([x_of(label, p) for p in points], [p["accuracy"] for p in points],
                        color=colours[index % len(colours)], marker=".", linewidth=1.2,
                        label=(f"{label}{'*' if label in figures['wall'] else ''} "
                               f"({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
                        if n == 0 else None)
        if figures["target"] is not None:
            ax.axhline(figures["target"], color="gray", linestyle="--",
                       label=f"TARGET {figures['target']:.3f}")
        if args.seq == 128:  # the held-out set's at that length
            ax.axhline(PLATEAU, color="gray", linestyle=":", label=f"unigram plateau {PLATEAU}")
        ax.set_xlabel(x_label)
        ax.set_ylabel("held-out masked-LM accuracy")
        ax.set_title(f"BERT {args.model} from scratch, seq {args.seq}, batch {args.batch}, "
                     f"{args.steps} steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out_dir / name, dpi=110)
        plt.close(fig)


# ---- Main ----

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_child(parser)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--eval_every", type=int, default=50)
    parser.add_argument("--systems", default="ours,keras_hub,transformers")
    parser.add_argument("--recipes", default=DEFAULT_RECIPES,
                        help="ours' runs: NAME[:OPTIMIZER[:LR[:STEPS]]],... NAME one of "
                             + ", ".join(RECIPES) + "; OPTIMIZER empty or 'recipe': the "
                             "recipe's (default for efficient*, else adamw); LR default: the "
                             "efficient recipe's for efficient*, else 5e-4; STEPS: ours' own "
                             "schedule's length (default --steps)")
    parser.add_argument("--peer_lr", default="5e-4",
                        help="the peers' rate; comma-separated: one run per rate")
    parser.add_argument("--model", default="L4-H256", choices=list(MODELS))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--seeds", default=None,
                        help="comma-separated (default 0): each system runs once per seed, the "
                             "seed setting its initialisation, input order and masks")
    parser.add_argument("--seed", type=int, default=None, help="one seed (as --seeds=N)")
    parser.add_argument("--out_dir", default=None,
                        help="default: bench/out/pretraining_quality (git-ignored)")
    parser.add_argument("--reuse", action="store_true",
                        help="skip the runs whose curves --out_dir/points.json holds at this "
                             "setup and seed (without it they run again and replace them)")
    parser.add_argument("--step_time", action="store_true",
                        help="measure each system's s/step side by side into step_times.json")
    harness.add_rounds(parser, 3, help="--step_time: interleaved rounds (median over them)")
    parser.add_argument("--step_time_steps", default="30,130",
                        help="--step_time: SHORT,LONG training steps of each measurement")
    parser.add_argument("--report", action="store_true",
                        help="only the report, from points.json and step_times.json")
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        CHILDREN[spec["child"]](spec)
        return
    if args.seed is not None and args.seeds is not None:
        parser.error("--seed and --seeds: give one")
    try:
        args.seeds = ([args.seed] if args.seed is not None
                      else [int(s) for s in (args.seeds or "0").split(",") if s])
        args.step_time_steps = [int(s) for s in args.step_time_steps.split(",")]
    except ValueError as e:
        parser.error(f"--seeds / --step_time_steps: comma-separated integers ({e})")
    if len(args.step_time_steps) != 2 or not 0 < args.step_time_steps[0] < args.step_time_steps[1]:
        parser.error("--step_time_steps: SHORT,LONG with 0 < SHORT < LONG")
    for name in ("steps", "eval_every", "batch", "seq", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: must be at least 1")
    if args.steps % args.eval_every:
        parser.error(f"--steps={args.steps} is not a multiple of --eval_every={args.eval_every}")
    runs = parse_runs(parser, args)
    args.out_dir = pathlib.Path(args.out_dir or PROJECT_ROOT / "bench" / "out"
                                / "pretraining_quality")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.seq == 128 else f"-{args.seq}"
    args.corpus = args.out_dir / "corpus.txt"
    args.heldout = args.out_dir / f"heldout{suffix}.npz"
    args.windows = args.out_dir / f"windows{suffix}.npz"
    if not args.report:
        if not args.corpus.exists():
            documents, size = write_corpus(args.corpus)
            log(f"corpus: {documents} documents, {size / 1e6:.2f} MB -> {args.corpus}")
        if not args.heldout.exists():
            n, positions = write_heldout(args.heldout, args.seq)
            log(f"held-out: {n} windows, {positions} masked positions -> {args.heldout}")
        if not args.windows.exists() and any(run.system != "ours" for run in runs):
            log(f"peer windows: {write_training_windows(args.corpus, args.windows, args.seq)} "
                f"-> {args.windows}")
    import numpy as np
    heldout = dict(np.load(args.heldout)) if args.heldout.exists() else None
    args.heldout_positions = int(heldout["masked_lm_weights"].sum()) if heldout else "?"
    records_cache = {}
    try:
        if args.step_time:
            measure_step_times(args, runs, records_cache)
            return
        if not args.report:
            run_curves(args, runs, heldout, records_cache)
    finally:
        remove_records(records_cache)
    report(args)


if __name__ == "__main__":
    main()
