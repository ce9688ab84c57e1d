#!/usr/bin/env bash
# Creates the virtual environment of the TF Model Garden peer of
# bench/training/pretraining_throughput.py.
#
#   bash bench/envs/model_garden_env.sh       # venv at $BERT_TF_MODEL_GARDEN_VENV or the default
#
# tf-models-official pins its own TensorFlow (~=2.20) and uses tf_keras (Keras 2), while bert_tf
# runs on TensorFlow 2.21 with Keras 3, so Model Garden gets its own venv outside the repository.
# The versions below are a consistent set from PyPI (CPU wheels only, no CUDA). Idempotent: a venv
# that already imports these versions is left as it is; a half-made one is completed.
set -euo pipefail

VENV="${BERT_TF_MODEL_GARDEN_VENV:-$HOME/.cache/bert_tf/model-garden-venv}"
PYTHON="${PYTHON:-python3}"
PINS=(
  "tensorflow==2.20.0"
  "tf-keras==2.20.1"
  "tensorflow-text==2.20.1"
  "tf-models-official==2.20.0"
)

check() {
  "$VENV/bin/python" - <<'EOF' 2>/dev/null
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from importlib.metadata import version
import tensorflow as tf, tf_keras
from official.nlp.modeling import models, networks
assert tf.__version__ == "2.20.0" and version("tf-models-official") == "2.20.0", tf.__version__
print(f"tensorflow {tf.__version__}, tf_keras {tf_keras.__version__}, "
      f"tf-models-official {version('tf-models-official')}")
EOF
}

source "$(dirname "${BASH_SOURCE[0]}")/make_venv.sh"
make_venv "Model Garden"
