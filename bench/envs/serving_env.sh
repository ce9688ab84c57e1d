#!/usr/bin/env bash
# Creates the virtual environment of the serving peers of bench/serving/latency.py
# (bench/serving/peers.py: ONNX Runtime fp32 and int8, transformers / PyTorch eager).
#
#   bash bench/envs/serving_env.sh  # venv at $BERT_TF_SERVING_VENV or ~/.cache/bert_tf/serving-venv
#
# bert_tf needs none of this: the peers get their own venv outside the repository, so torch and
# onnxruntime never land next to TensorFlow. torch==2.13.0 resolves to the CPU build (2.13.0+cpu,
# a local wheel here) -- an unpinned `torch`, or a newer release, would pull a multi-GB CUDA
# build: do not loosen that pin. transformers is hf_env.sh's pin. torch.onnx.export's default
# (dynamo) exporter needs onnxscript. Idempotent: a venv that already imports these versions is
# left as it is; a half-made one is completed.
set -euo pipefail

VENV="${BERT_TF_SERVING_VENV:-$HOME/.cache/bert_tf/serving-venv}"
PYTHON="${PYTHON:-python3}"
PINS=(
  "torch==2.13.0"
  "transformers==5.17.0"
  "safetensors>=0.4.3"
  "onnx==1.23.2"
  "onnxscript==0.7.2"
  "onnxruntime==1.32.0"
  "numpy"
)

check() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import onnx, onnxruntime, onnxscript, torch, transformers
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert not torch.cuda.is_available() and torch.version.cuda is None, "not the CPU build"
assert transformers.__version__ == "5.17.0", transformers.__version__
assert onnxruntime.__version__ == "1.32.0", onnxruntime.__version__
assert onnx.__version__ == "1.23.2", onnx.__version__
from onnxruntime.quantization import quantize_dynamic
from onnxruntime.transformers.optimizer import optimize_model
from transformers import BertForSequenceClassification, BertTokenizerFast
print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
      f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}")
PY
}

source "$(dirname "${BASH_SOURCE[0]}")/make_venv.sh"
make_venv "serving"
