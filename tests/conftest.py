"""Shared test fixtures: the real data in ../shared/data and the reference release.

Tests that need `../shared/data` (or the reference release in `../shared/reference`) skip with a
message naming the path when it is absent, and fail instead when CI=true, so that CI can never
pass by skipping its oracles.
"""
import os
import pathlib
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("BERT_TF_SHARED", PROJECT_ROOT.parent / "shared"))
SHARED_DATA = SHARED / "data"
REFERENCE_DIR = SHARED / "reference"
UNCASED_VOCAB = SHARED_DATA / "vocab" / "bert-base-uncased-vocab.txt"


def require_path(path):
    """Returns `path` if it exists; otherwise skips (or fails under CI=true) naming it."""
    path = pathlib.Path(path)
    if not path.exists():
        message = f"needs {path} (the shared test data), which is absent"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " under CI=true")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def shared_data():
    """The directory ../shared/data (see its README for what is there)."""
    return require_path(SHARED_DATA)


@pytest.fixture(scope="session")
def uncased_vocab():
    """Path of the uncased BERT-Base WordPiece vocabulary (30,522 tokens)."""
    return require_path(UNCASED_VOCAB)


@pytest.fixture(scope="session")
def refbert():
    """The reference release (bert-tensorflow==1.0.4) as the `refbert` module of ../shared."""
    require_path(REFERENCE_DIR / "refbert.py")
    if str(REFERENCE_DIR) not in sys.path:
        sys.path.insert(0, str(REFERENCE_DIR))
    import refbert as module
    return module
