"""The library names its own arguments; the command lines name them as flags.

A Python caller of bert_tf sees `bert_config_file: required ...`; the same error through a
command line reads `error: --bert_config_file: ...` (`bert_tf.cli.run_main` has the library
name its arguments as the flags of the same names). Inside `bert_tf/`, no module but the
command-line plumbing calls `flag_error`, imports `bert_tf.cli`, or writes `--name` in an
error message."""
import ast
import pathlib

import pytest

from conftest import PROJECT_ROOT, assert_one_line_error
from bert_tf import errors
from bert_tf.errors import InputError, arg, argument_error, name_arguments_as_flags

LIBRARY = pathlib.Path(PROJECT_ROOT) / "bert_tf"
COMMAND_LINE_PLUMBING = {"cli.py", "errors.py"}


def test_argument_errors_name_the_argument_and_flags_only_in_a_command_line():
    error = argument_error("vocab_size", f"too small; raise {arg('vocab_size')}")
    assert str(error) == "vocab_size: too small; raise vocab_size"
    assert isinstance(error, InputError) and error.argument == "vocab_size"
    with name_arguments_as_flags():
        assert str(argument_error("vocab_size", f"raise {arg('vocab_size')}")) == (
            "--vocab_size: raise --vocab_size")
    assert arg("vocab_size") == "vocab_size"  # restored after the block
    flag = errors.flag_error("input_file", "no file matches 'x*'")
    assert str(flag) == "--input_file: no file matches 'x*'" and flag.argument == "input_file"


def test_a_python_caller_sees_argument_names(tmp_path):
    from bert_tf import api
    from bert_tf.training.settings import RunSettings

    with pytest.raises(InputError) as info:
        api.resolve_model_files(None)
    assert str(info.value) == (
        "bert_config_file: required (unless init_checkpoint is a model directory: a Hugging "
        "Face directory, or a checkpoint with bert_config.json beside it)")
    assert info.value.argument == "bert_config_file"
    with pytest.raises(InputError) as info:
        RunSettings(output_dir=str(tmp_path), do_train=True, train_batch_size=0).validate()
    assert str(info.value) == "train_batch_size: must be positive"
    with pytest.raises(InputError) as info:
        RunSettings(output_dir=str(tmp_path)).validate()
    assert str(info.value) == (
        "do_train: at least one of do_train, do_eval or do_predict must be set")
    with pytest.raises(InputError) as info:
        RunSettings(output_dir=str(tmp_path), do_train=True, train_batch_size=6,
                    num_train_steps=10, gradient_accumulation_steps=4).validate()
    assert str(info.value) == "gradient_accumulation_steps: must divide train_batch_size=6"


def test_the_same_error_through_a_command_line_names_the_flag(tmp_path):
    (tmp_path / "model.ckpt-1.index").write_bytes(b"")  # a checkpoint, as far as paths go
    last = assert_one_line_error(
        "run.export_savedmodel", {"init_checkpoint": tmp_path / "model.ckpt-1",
                                  "export_dir": tmp_path / "export", "task": "classifier"},
        "error: --bert_config_file: ")
    assert last == ("error: --bert_config_file: required (unless --init_checkpoint is a model "
                    "directory: a Hugging Face directory, or a checkpoint with bert_config.json "
                    "beside it)")


def _library_modules():
    for path in sorted(LIBRARY.rglob("*.py")):
        if path.name not in COMMAND_LINE_PLUMBING or path.parent != LIBRARY:
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _called_name(node):
    function = node.func
    return getattr(function, "id", None) or getattr(function, "attr", None)


def test_the_library_speaks_no_command_line():
    found = []
    for path, tree in _library_modules():
        where = path.relative_to(PROJECT_ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node) == "flag_error":
                found.append(f"{where}:{node.lineno}: flag_error")
            if isinstance(node, ast.ImportFrom) and (
                    node.module == "bert_tf.cli"
                    or node.module == "bert_tf" and any(a.name == "cli" for a in node.names)):
                found.append(f"{where}:{node.lineno}: imports bert_tf.cli")
            if isinstance(node, ast.Import) and any(a.name == "bert_tf.cli" for a in node.names):
                found.append(f"{where}:{node.lineno}: imports bert_tf.cli")
            # Error messages: what InputError, argument_error and file_error are given.
            if isinstance(node, ast.Call) and _called_name(node) in (
                    "InputError", "argument_error", "file_error"):
                for part in ast.walk(node):
                    if (isinstance(part, ast.Constant) and isinstance(part.value, str)
                            and "--" in part.value):
                        found.append(f"{where}:{part.lineno}: --name in {part.value!r}")
    assert not found, "\n".join(found)
