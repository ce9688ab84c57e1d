#!/usr/bin/env bash
# Creates the virtual environment of the PyTorch / transformers peer of
# bench/finetuning/glue_throughput.py, bench/finetuning/accuracy.py and the other benches and
# tests that run transformers.
#
#   bash bench/envs/hf_env.sh       # venv at $BERT_TF_HF_VENV or ~/.cache/bert_tf/hf-venv
#
# bert_tf needs none of this; the peer gets its own venv outside the repository so torch never
# lands next to TensorFlow. torch==2.13.0 resolves to the CPU build (2.13.0+cpu, a local wheel
# here) -- an unpinned `torch`, or a newer release, would pull a multi-GB CUDA build: do not
# loosen that pin. transformers 5.17.0 needs torch >= 2.5 and Python >= 3.10; Trainer needs
# accelerate; finetuning/accuracy.py's NER comparison scores with seqeval; tests/tasks/encoder/test_embeddings.py
# compares sentence embeddings with sentence-transformers' own. Idempotent: a venv that
# already imports these versions is left as it is; a half-made one is completed.
set -euo pipefail

VENV="${BERT_TF_HF_VENV:-$HOME/.cache/bert_tf/hf-venv}"
PYTHON="${PYTHON:-python3}"
PINS=(
  "torch==2.13.0"
  "transformers==5.17.0"
  "accelerate==1.15.0"
  "safetensors>=0.4.3"
  "numpy"
  "seqeval==1.2.2"
  "sentence-transformers==6.2.0"
)

check() {
  "$VENV/bin/python" - <<'EOF' 2>/dev/null
import torch, transformers, accelerate, seqeval, sentence_transformers
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert not torch.cuda.is_available() and torch.version.cuda is None, "not the CPU build"
assert transformers.__version__ == "5.17.0", transformers.__version__
from transformers import BertForSequenceClassification, DataCollatorWithPadding, Trainer
from transformers import BertForTokenClassification, DataCollatorForTokenClassification
from seqeval.metrics import f1_score
assert sentence_transformers.__version__ == "6.2.0", sentence_transformers.__version__
from sentence_transformers import SentenceTransformer
print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
      f"accelerate {accelerate.__version__}")
EOF
}

source "$(dirname "${BASH_SOURCE[0]}")/make_venv.sh"
make_venv "hf"
