"""Imports: the dependency graph is visible at the top of each module.

- bert_tf/: an import inside a function is allowed only in the modules of LAZY_IMPORTS, only of
  the modules listed there, for the reason given (each entry must still be needed: an entry
  whose module no longer imports all of them lazily fails too).
- run/ and data_tools/: the command lines import the library (bert_tf, TensorFlow) in the
  functions that use it, after their flags are parsed; nothing else is imported in a function.
- The modules of TENSORFLOW_FREE import no TensorFlow (checked each in a fresh interpreter):
  `--help`, flag errors and the "install TensorFlow" message come without its start-up; so
  does a training command line's refusal of its run flags (CPython's import log).
- bert_tf/ has no import cycle, and a module imports from its own layer of LAYERS or lower ones,
  but for the imports of UPWARD_IMPORTS, for the reason given (at the top or in a function).
"""
import ast
import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT

# module -> (what its functions may import, why not at the top).
LAZY_IMPORTS = {
    "bert_tf.cli": (
        {"tensorflow", "absl"},
        "TensorFlow-free (every command line imports it before parsing its flags); TensorFlow "
        "only for a remote (gs://...) glob; absl's app and logging define flags (--verbosity, "
        "...) when imported, so run_main imports them, not the command line's module"),
    "bert_tf.io_utils": (
        {"tensorflow"},
        "TensorFlow-free (every command line imports it before parsing its flags); TensorFlow "
        "only for remote (gs://...) paths"),
    "bert_tf.data.pretraining.corpus": (
        {"bert_tf.text.fast_tokenization"},
        "TensorFlow-free: create_pretraining_data never imports TensorFlow for local files and "
        "forks its tokenizing processes; FastTokenizer (~0.3 s to import) for --tokenizer=fast"),
    "bert_tf.data.pretraining.writers": (
        {"tensorflow"},
        "TensorFlow-free: create_pretraining_data never imports TensorFlow for local files; "
        "TensorFlow only for remote (gs://...) output files"),
    "bert_tf.data.pretraining.manifest": (
        {"tensorflow"},
        "TensorFlow-free: create_pretraining_data writes it and run_pretraining reads it before "
        "importing TensorFlow; TensorFlow only for remote (gs://...) records"),
    "bert_tf.text.library_route": (
        {"tensorflow", "tensorflow_text"},
        "constructing a FastTokenizer needs no TensorFlow (docs/tokenization.md: Cost); "
        "tensorflow-text is optional (not beside tensorflow-tpu) and slow to import"),
    "bert_tf.model.extended_vocab": (
        {"bert_tf.model", "bert_tf.text.vocab_learning"},
        "extend_vocab checks its arguments, the vocabulary and the checkpoint's folder before "
        "TensorFlow's start-up (seconds)"),
    "bert_tf.training.pretraining_evaluation.report": (
        {"matplotlib", "matplotlib.pyplot"},
        "matplotlib is optional (the `plot` extra): without it, evaluate_pretraining writes its "
        "tables and says why there is no figure"),
}

# module -> why it must import no TensorFlow.
TENSORFLOW_FREE = {
    "bert_tf": "the TensorFlow check of every command line (bert_tf._requirements)",
    "bert_tf._requirements": "says which TensorFlow to install when there is none",
    "bert_tf.errors": "imported by bert_tf.cli",
    "bert_tf.cli": "imported by every command line before its flags are parsed",
    "bert_tf.io_utils": "imported by bert_tf.cli",
    "bert_tf.huge_pages": "imported by bert_tf.cli",
    "bert_tf.cpu_switch": "imported by bert_tf.huge_pages",
    "bert_tf.progress": "create_pretraining_data (no TensorFlow for local files)",
    "bert_tf.tokenization": "create_pretraining_data's default tokenizer",
    "bert_tf.data.pretraining.generate": "create_pretraining_data (no TensorFlow for local files)",
    "bert_tf.data.pretraining.streaming": "create_pretraining_data (no TensorFlow for local files)",
    "bert_tf.data.pretraining.manifest": "written by create_pretraining_data, read by "
                                         "run_pretraining before it imports TensorFlow",
    "bert_tf.data.pretraining.recipes": "create_pretraining_data's --recipe",
    "bert_tf.text.fast_tokenization": "constructing a FastTokenizer needs no TensorFlow",
    "bert_tf.tasks.registry": "export_savedmodel's --task names, before its flags are parsed",
    "bert_tf.training.settings": "run_pretraining's checks before TensorFlow",
    **{f"run.{name}": "a command line: --help and flag errors" for name in (
        "common_flags", "demo", "export_savedmodel", "extract_features", "run_classifier",
        "run_multiple_choice", "run_ner", "run_pretraining", "run_squad")},
    **{f"data_tools.{name}": "a command line: --help and flag errors" for name in (
        "build_vocab", "create_pretraining_data", "demo_corpus")},
}


# The layers of bert_tf/, low to high (each entry a module or a package with its modules).
LAYERS = (
    ("bert_tf", "bert_tf._requirements", "bert_tf.errors", "bert_tf.io_utils", "bert_tf.progress",
     "bert_tf.tensorflow_start_up", "bert_tf.cpu_switch", "bert_tf.huge_pages"),
    ("bert_tf.tokenization", "bert_tf.text"),
    ("bert_tf.data",),
    ("bert_tf.model",),
    ("bert_tf.tasks",),
    ("bert_tf.serving",),
    ("bert_tf.training",),
    ("bert_tf.api",),
    ("bert_tf.cli",),
)

# (module, the higher-layer module it imports) -> why.
UPWARD_IMPORTS = {}


def _module_name(path):
    parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _function_imports(folder):
    """{module: {imported module, ...}} of the imports inside functions under `folder`."""
    found = {}
    for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]

        def visit(node, in_function):
            for child in ast.iter_child_nodes(node):
                if in_function and isinstance(child, ast.Import):
                    found.setdefault(module, set()).update(a.name for a in child.names)
                elif in_function and isinstance(child, ast.ImportFrom):
                    base = package.rsplit(".", child.level - 1)[0] if child.level else ""
                    name = ".".join(p for p in (base, child.module) if p)
                    found.setdefault(module, set()).add(name)
                visit(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _library_imports():
    """{module: {bert_tf module it imports, at the top or in a function}} of bert_tf/."""
    paths = {_module_name(path): path for path in sorted((PROJECT_ROOT / "bert_tf").rglob("*.py"))}
    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                prefix = ".".join(p for p in (base, node.module) if p)
                names = [f"{prefix}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                while name and name not in paths:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    imported.add(name)
        graph[module] = imported
    return graph


def _layer(module):
    """The index in LAYERS of `module`'s layer (its longest matching entry)."""
    matches = [(len(entry), index) for index, layer in enumerate(LAYERS) for entry in layer
               if module == entry or (entry != "bert_tf" and module.startswith(entry + "."))]
    assert matches, f"{module} is in no layer of LAYERS: add it to one"
    return max(matches)[1]


def test_library_has_no_import_cycle():
    graph = _library_imports()
    done, path = set(), []

    def cycle_from(module):
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for imported in sorted(graph[module]):
            cycle = cycle_from(imported)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = cycle_from(module)
        assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_library_imports_no_higher_layer_but_where_a_reason_is_listed():
    graph = _library_imports()
    upward = {(module, imported) for module, names in graph.items() for imported in names
              if _layer(imported) > _layer(module)}
    assert not upward - set(UPWARD_IMPORTS), (
        f"imports from a lower layer to a higher one (LAYERS): "
        f"{sorted(upward - set(UPWARD_IMPORTS))}")
    assert not set(UPWARD_IMPORTS) - upward, (
        f"UPWARD_IMPORTS lists imports that are gone: {sorted(set(UPWARD_IMPORTS) - upward)}")


def test_library_imports_at_the_top_but_where_a_reason_is_listed():
    found = _function_imports("bert_tf")
    unexplained = {module: sorted(names) for module, names in found.items()
                   if module not in LAZY_IMPORTS or not names <= LAZY_IMPORTS[module][0]}
    assert not unexplained, ("imports inside functions: move them to the top of the module, or "
                             f"list them in LAZY_IMPORTS with the reason: {unexplained}")
    stale = {module: sorted(allowed - found.get(module, set()))
             for module, (allowed, _) in LAZY_IMPORTS.items()
             if allowed - found.get(module, set())}
    assert not stale, f"LAZY_IMPORTS lists imports these modules no longer make lazily: {stale}"


@pytest.mark.parametrize("folder", ["run", "data_tools"])
def test_command_lines_import_only_the_library_in_functions(folder):
    other = {module: sorted(name for name in names
                            if name.split(".")[0] not in ("bert_tf", "tensorflow"))
             for module, names in _function_imports(folder).items()}
    assert not {module: names for module, names in other.items() if names}


@pytest.mark.parametrize("module", sorted(TENSORFLOW_FREE))
def test_module_imports_without_tensorflow(module):
    heavy = ("tensorflow", "tensorflow_text", "keras", "apache_beam")
    code = (f"import sys\nimport {module}\n"
            f"print(','.join(name for name in {heavy!r} if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", (f"importing {module} imports {result.stdout.strip()} "
                                         f"({TENSORFLOW_FREE[module]})")


@pytest.mark.parametrize("module, flags", [
    ("run.run_classifier", ["--task_name=MRPC", "--data_dir=data"]),
    ("run.run_ner", ["--data_dir=data"]),
    ("run.run_squad", []),
    ("run.run_multiple_choice", ["--task_name=swag", "--data_dir=data"]),
    ("run.run_pretraining", ["--input_file=records"]),
])
def test_a_run_with_nothing_to_do_is_refused_before_tensorflow(module, flags, tmp_path):
    """The run's own flags are checked before the library is imported: CPython's import log
    (-X importtime, every module a process imports) holds no TensorFlow before the error."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, f"--output_dir={tmp_path / 'out'}",
         *flags], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert lines[-1] == ("error: --do_train: at least one of --do_train, --do_eval or "
                         "--do_predict must be set"), lines[-1]
    imported = {line.rsplit("|", 1)[1].strip() for line in lines
                if line.startswith("import time:")}
    assert "bert_tf" in imported and "tensorflow" not in imported
    assert not (tmp_path / "out").exists()
