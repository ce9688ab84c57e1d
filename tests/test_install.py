"""How bert_tf installs: the Python and TensorFlow it declares, what it depends on, and
what its wheel holds, checked with pip itself.

Fast: the runtime requirements are exactly the third-party modules bert_tf/, run/ and
data_tools/ import; the TensorFlow range of setup.cfg's extras is the one `import bert_tf`
checks; that check's one-line messages.
Slow (pip and the package index): the built wheel claims no top-level package but `bert_tf`;
pip's resolver makes a complete plan of wheels for Python 3.12 and 3.13 (this suite runs on
3.11), and a current pip refuses 3.10, 3.14 and a TensorFlow outside the range; beside an installed tensorflow-tpu,
neither `bert_tf` nor `bert_tf[tpu]` adds a second TensorFlow; and the wheel in a fresh venv,
run from outside the checkout: without TensorFlow one `error:` line, with `[cpu]` every console
script's --help and the demo at a tiny size, without TensorFlow's start-up banner.
"""
import ast
import concurrent.futures
import configparser
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import PROJECT_ROOT

from bert_tf import _requirements

# Colab's runtimes and TPU VMs: x86_64 Linux with glibc 2.35 (every manylinux tag up to it; pip
# does not widen --platform to older glibc versions itself).
LINUX_PLATFORMS = ["manylinux2014_x86_64"] + [f"manylinux_2_{v}_x86_64" for v in range(17, 36)]
WHEEL_SOURCES = ("setup.cfg", "setup.py", "pyproject.toml", "README.md", "bert_tf", "run",
                 "data_tools")
CONSOLE_SCRIPTS = ("bert_tf_demo", "build_vocab", "create_pretraining_data", "run_pretraining",
                   "run_classifier", "run_glue", "run_ner", "run_squad", "run_multiple_choice",
                   "export_savedmodel", "extract_features", "extend_vocab",
                   "evaluate_pretraining")
# Third-party modules the code imports -> where setup.cfg declares them (None: install_requires).
IMPORTED = {"tensorflow": ("cpu", "gpu", "tpu"), "tensorflow_text": ("cpu", "gpu"),
            "apache_beam": ("beam",), "keras": None, "absl": None, "numpy": None, "numba": None,
            "tokenizers": None, "safetensors": None, "h5py": None,
            "matplotlib": ("plot", "test")}
DISTRIBUTION = {"tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text",
                "apache_beam": "apache-beam", "keras": "keras", "absl": "absl-py",
                "numpy": "numpy", "numba": "numba", "tokenizers": "tokenizers",
                "safetensors": "safetensors", "h5py": "h5py", "matplotlib": "matplotlib"}
TENSORFLOW_DISTRIBUTIONS = {"tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tensorflow-intel",
                            "tf-nightly", "tensorflow-macos"}


def _setup_cfg():
    config = configparser.ConfigParser()
    config.read(PROJECT_ROOT / "setup.cfg")
    return config


def _requirement_lines(value):
    return [line.strip() for line in value.strip().splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _name(requirement):
    return re.match(r"[A-Za-z0-9_.\-]+", requirement).group().lower().replace("_", "-")


def _imported_modules():
    """Top-level third-party modules imported anywhere in the installed code."""
    names = set()
    for folder in ("bert_tf", "run", "data_tools"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return {name for name in names
            if name not in sys.stdlib_module_names and name not in ("bert_tf", "run", "data_tools")}


def test_runtime_requirements_are_exactly_what_the_code_imports():
    assert _imported_modules() == set(IMPORTED)
    options = _setup_cfg()["options"]
    extras = _setup_cfg()["options.extras_require"]
    hard = {_name(r) for r in _requirement_lines(options["install_requires"])}
    assert hard == {DISTRIBUTION[m] for m, where in IMPORTED.items() if where is None}
    assert not hard & (TENSORFLOW_DISTRIBUTIONS | {"tensorflow-text", "keras-hub", "transformers",
                                                   "onnxruntime"})
    for module, where in IMPORTED.items():
        for extra in where or ():
            names = {_name(r) for r in _requirement_lines(extras[extra])}
            expected = "tensorflow-tpu" if (module, extra) == ("tensorflow", "tpu") else \
                DISTRIBUTION[module]
            assert expected in names, (module, extra)


def test_declared_ranges_agree_with_the_import_check():
    options, extras = _setup_cfg()["options"], _setup_cfg()["options.extras_require"]
    assert options["python_requires"].strip() == ">=3.11,<3.14"
    low, high = _requirements.TENSORFLOW_MIN, _requirements.TENSORFLOW_BELOW
    assert _requirements.TENSORFLOW_RANGE == f">={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    for extra, distribution in (("cpu", "tensorflow"), ("gpu", "tensorflow[and-cuda]"),
                                ("tpu", "tensorflow-tpu")):
        assert f"{distribution}{_requirements.TENSORFLOW_RANGE}" in _requirement_lines(
            extras[extra]), extra
    for extra in ("cpu", "gpu", "test"):
        assert f"tensorflow-text{_requirements.TENSORFLOW_RANGE}" in _requirement_lines(
            extras[extra]), extra


def test_import_check_says_in_one_line_what_to_install(monkeypatch):
    monkeypatch.setattr(_requirements, "installed_tensorflow", lambda: (None, None))
    missing = _requirements.problem()
    assert "\n" not in missing and _requirements.TENSORFLOW_RANGE in missing
    for extra in ("'.[cpu]'", "'.[gpu]'", "'.[tpu]'", "'tensorflow>=2.20,<2.22'"):
        assert extra in missing
    monkeypatch.setattr(_requirements, "installed_tensorflow", lambda: ("tensorflow-tpu", "2.19.0"))
    old = _requirements.problem()
    assert "\n" not in old and "tensorflow-tpu 2.19.0" in old
    monkeypatch.setattr(_requirements, "installed_tensorflow", lambda: ("tensorflow", "2.22.0rc1"))
    assert "2.22.0rc1" in _requirements.problem()
    monkeypatch.setenv(_requirements.SKIP_CHECK_VARIABLE, "1")
    assert _requirements.problem() is None
    monkeypatch.delenv(_requirements.SKIP_CHECK_VARIABLE)
    for version in ("2.20.0", "2.21.0", "2.21.3"):
        monkeypatch.setattr(_requirements, "installed_tensorflow",
                            lambda v=version: ("tensorflow", v))
        assert _requirements.problem() is None, version


# ---- slow: pip, the index, venvs ----------------------------------------------------------------

def _pip(python, *args, timeout=900, cwd=None):
    result = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True,
                            timeout=timeout, cwd=cwd)
    output = "\n".join(line for line in (result.stdout + result.stderr).splitlines()
                       if not line.startswith("WARNING: Location"))  # this machine's config
    return result.returncode, output


def _plan(python, requirements, tmp_path, *options):
    """pip's resolver plan (--dry-run --report) for `requirements`: {name: version}."""
    report = tmp_path / f"report-{abs(hash((requirements, options)))}.json"
    code, output = _pip(python, "install", "--dry-run", "--quiet", "--report", str(report),
                        *options, *requirements)
    assert code == 0, output[-3000:]
    plan = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower().replace("_", "-"): item for item in plan}


def _help_flags(text):
    """The flag names a --help text lists, and its first line (the docstring's)."""
    return text.strip().splitlines()[0], sorted(set(re.findall(r"^ +--(?:\[no\])?(\w+)", text,
                                                           re.MULTILINE)))


@pytest.mark.parametrize("module", ["run.run_classifier", "data_tools.build_vocab", "run.demo"])
def test_console_script_help_is_the_command_lines_help(module):
    """A console script (pip's wrapper imports the command line's module and calls
    its console_main) shows the same docstring and flags as `python -m`; it showed only
    `USAGE: .../run_classifier [flags]` and "Try --helpfull"."""
    as_module = subprocess.run([sys.executable, "-m", module, "--help"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=120)
    wrapper = (f"import sys; sys.argv[0] = {module.split('.')[-1]!r}; "
               f"from {module} import console_main; sys.exit(console_main())")
    as_script = subprocess.run([sys.executable, "-c", wrapper, "--help"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=120)
    assert as_module.returncode == 0 and as_script.returncode == 0, as_script.stderr[-2000:]
    first_line, names = _help_flags(as_module.stdout)
    assert len(names) >= 5, as_module.stdout
    assert _help_flags(as_script.stdout) == (first_line, names), as_script.stdout[:2000]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built from a copy of the sources (nothing written into the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    source.mkdir()
    for name in WHEEL_SOURCES:
        path = PROJECT_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, source / name)
    code, output = _pip(sys.executable, "wheel", "--quiet", "--no-deps", "-w", str(root / "dist"),
                        str(source))
    assert code == 0, output[-3000:]
    (built,) = (root / "dist").glob("bert_tf-*.whl")
    return built


@pytest.mark.slow
@pytest.mark.install
def test_wheel_claims_only_bert_tf(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top = {name.split("/")[0] for name in names}
        metadata = email.parser.Parser().parsestr(
            archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
        entry_points = archive.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert {name for name in top if not name.endswith(".dist-info")} == {"bert_tf"}
    assert "bert_tf/run/run_classifier.py" in names
    assert "bert_tf/data_tools/build_vocab.py" in names
    assert metadata["Requires-Python"] in (">=3.11,<3.14", "<3.14,>=3.11")
    unconditional = {_name(r) for r in metadata.get_all("Requires-Dist") if "extra ==" not in r}
    assert not unconditional & (TENSORFLOW_DISTRIBUTIONS | {"tensorflow-text", "keras-hub"})
    for script in CONSOLE_SCRIPTS:
        assert re.search(rf"^{script} = bert_tf\.(run|data_tools)\.", entry_points, re.M), script


def _target_options(tmp_path, python_version):
    platforms = [option for platform in LINUX_PLATFORMS for option in ("--platform", platform)]
    # (pip 23 accepts --python-version / --platform with --target only; --dry-run writes nothing)
    return ["--ignore-installed", "--target", str(tmp_path / "unused-target"), "--python-version",
            python_version, "--only-binary=:all:", *platforms]


@pytest.mark.slow
@pytest.mark.install
def test_resolver_plans_complete_installs_on_python_312_and_313(wheel, tmp_path):
    """A plan of wheels only, for CPU and TPU (and GPU on 3.12), on each Python of Colab's
    runtimes: no missing wheel anywhere in the tree (the plans run side by side: each takes
    one to three minutes of index look-ups)."""
    jobs = [(version, extra) for version in ("3.12", "3.13") for extra in ("cpu", "tpu")]
    jobs.append(("3.12", "gpu"))
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        plans = dict(zip(jobs, pool.map(lambda job: _plan(
            sys.executable, (f"{wheel}[{job[1]}]",), tmp_path,
            *_target_options(tmp_path / "-".join(job), job[0])), jobs)))
    for (version, extra), plan in plans.items():
        assert "bert-tf" in plan, (version, extra)
        tensorflow = "tensorflow-tpu" if extra == "tpu" else "tensorflow"
        assert tensorflow in plan, (version, extra, sorted(plan))
        major_minor = tuple(int(x) for x in plan[tensorflow]["metadata"]["version"].split(".")[:2])
        assert _requirements.TENSORFLOW_MIN <= major_minor < _requirements.TENSORFLOW_BELOW
        assert len(set(plan) & TENSORFLOW_DISTRIBUTIONS) == 1, (version, extra, sorted(plan))
        for name in ("keras", "numba", "numpy", "tokenizers", "safetensors", "absl-py"):
            assert name in plan, (version, extra, name)
        if extra != "tpu":
            assert "tensorflow-text" in plan
        if extra == "gpu":
            assert any(name.startswith("nvidia-cudnn") for name in plan)
        assert all(item["download_info"]["url"].endswith(".whl") or item["metadata"]["name"] ==
                   "bert_tf" for item in plan.values())


@pytest.mark.slow
@pytest.mark.install
def test_pip_refuses_an_unsupported_python_or_tensorflow(wheel, tmp_path):
    # Python: a current pip (in a venv of its own: pip 23.2 does not test a local wheel's
    # Requires-Python against --python-version) refuses 3.10 and 3.14 with the declared range.
    directory = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
    python = directory / "bin" / "python"
    code, output = _pip(python, "install", "--quiet", "--upgrade", "pip>=25")
    assert code == 0, output[-3000:]
    for version, refused in (("3.10", True), ("3.12", False), ("3.13", False), ("3.14", True)):
        code, output = _pip(python, "install", "--dry-run", "--no-deps", "--only-binary=:all:",
                            "--target", str(tmp_path / "unused-target"), "--python-version",
                            version, str(wheel))
        if refused:
            assert code != 0 and re.search(
                rf"requires a different Python: {version}(\.0)? not in '(<3\.14,>=3\.11|"
                rf">=3\.11,<3\.14)'", output), (version, output[-3000:])
        else:
            assert code == 0 and re.search(r"Would install bert[-_]tf", output), (version, output[-3000:])
    code, output = _pip(sys.executable, "install", "--dry-run", "--ignore-installed",
                        f"{wheel}[cpu]", "tensorflow==2.19.0")  # (--quiet hides the reason)
    assert code != 0 and re.search(r"depends on tensorflow<2\.22(,| and )>=2\.20", output), \
        output[-3000:]


@pytest.fixture(scope="module")
def tpu_venv(tmp_path_factory):
    """A venv where tensorflow-tpu (PyPI's, 2.20.0 today: 263 MB) is installed, as on a TPU VM
    (--no-deps: only its presence matters to the resolver)."""
    directory = tmp_path_factory.mktemp("tpu-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
    python = directory / "bin" / "python"
    code, output = _pip(python, "install", "--quiet", "--no-deps", "tensorflow-tpu>=2.20,<2.22")
    assert code == 0, output[-3000:]
    return python


@pytest.mark.slow
@pytest.mark.install
def test_beside_tensorflow_tpu_no_second_tensorflow_is_planned(wheel, tpu_venv, tmp_path):
    for requirement in (str(wheel), f"{wheel}[tpu]"):
        plan = _plan(tpu_venv, (requirement,), tmp_path)
        assert "bert-tf" in plan
        assert not set(plan) & TENSORFLOW_DISTRIBUTIONS, (requirement, sorted(plan))
        assert "tensorflow-text" not in plan
    # An unsupported TensorFlow pinned beside it is refused with the declared range.
    code, output = _pip(tpu_venv, "install", "--dry-run", f"{wheel}[tpu]",
                        "tensorflow-tpu==2.19.1")
    assert code != 0 and re.search(r"depends on tensorflow-tpu<2\.22(,| and )>=2\.20", output), \
        output[-3000:]


@pytest.mark.slow
@pytest.mark.install
def test_wheel_in_a_fresh_venv_runs_outside_the_checkout(wheel, tmp_path):
    directory = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
    python, bin_dir = directory / "bin" / "python", directory / "bin"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}

    def run(*line, timeout=120):
        return subprocess.run([str(a) for a in line], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=timeout)

    # Without TensorFlow: one line saying what to install.
    code, output = _pip(python, "install", "--quiet", str(wheel))
    assert code == 0, output[-3000:]
    result = run(bin_dir / "run_classifier", "--help")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: bert_tf needs TensorFlow >=2.20,<2.22")
    assert "'.[tpu]'" in result.stderr
    result = run(python, "-c", "import bert_tf")
    assert "ImportError: bert_tf needs TensorFlow" in result.stderr.strip().splitlines()[-1]

    code, output = _pip(python, "install", "--quiet", f"{wheel}[cpu]")
    assert code == 0, output[-3000:]
    result = run(python, "-c", "import bert_tf, bert_tf.run.demo; print(bert_tf.__file__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(directory)), result.stdout
    assert run(python, "-c", "import run").returncode != 0  # no top-level `run` installed
    for script in CONSOLE_SCRIPTS:
        result = run(bin_dir / script, "--help")
        assert result.returncode == 0 and "--" in result.stdout, (script, result.stderr[-2000:])
    installed = run(bin_dir / "run_classifier", "--help")
    module = run(python, "-m", "bert_tf.run.run_classifier", "--help")
    assert module.returncode == 0, module.stderr[-2000:]
    assert _help_flags(installed.stdout) == _help_flags(module.stdout), installed.stdout

    out = tmp_path / "demo"
    # Small, but past the demo's own checks (masked-LM accuracy over 10x chance, entity F1 of
    # at least 0.5), which exit 1 after the summary: measured on these settings, accuracy 0.100
    # (10x chance: 0.025) and F1 0.962; with 20 steps and 0.2 epochs, F1 0.000.
    result = run(bin_dir / "bert_tf_demo", f"--output_dir={out}", "--num_documents=120",
                 "--vocab_size=400", "--num_train_steps=100", "--max_seq_length=32",
                 timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "=== summary" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    assert "$ python -m bert_tf.run.run_pretraining" in result.stdout
    # TensorFlow's start-up banner: at most once per process (here, not at all).
    for noise in ("oneDNN custom operations", "All log messages before absl::InitializeLog",
                  "Could not find cuda drivers", "failed call to cuInit"):
        assert noise not in result.stdout + result.stderr, noise
