"""Session fixtures: tiny tokenizers trained on python-docs and tiny random models.

Nothing here touches the network; everything is built in a session temp dir.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest
import torch

import mlmkit.pretraining.plots as pretraining_plots

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Tiny models run faster on one thread than on two contended ones (CI has 2 cores, and
# pytest-xdist runs a test per core): the library's own thread resolver reads this too.
os.environ.setdefault("MLMKIT_THREADS", "1")
torch.set_num_threads(1)

PLOTS_INSTALLED = pretraining_plots.plots_installed  # see _plots_only_where_checked

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# The tokenizer kind each model family is built with (its own family's specials).
FAMILY_TOKENIZER = {
    "bert": "wordpiece", "distilbert": "wordpiece", "electra": "wordpiece",
    "albert": "unigram", "deberta-v2": "unigram", "xlm-roberta": "unigram",
    "roberta": "bpe", "modernbert": "bpe",
    "eurobert": "bpe", "ettin": "bpe", "mmbert": "bpe", "neobert": "bpe",
    "deberta-v3": "unigram",
    "esm2": "protein",  # ESM's amino-acid alphabet, nothing trained
}


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mlmkit-fixtures")


@pytest.fixture(scope="session")
def corpus_sample() -> list[str]:
    """A fixed slice of the python-docs train split: enough to train a 1k vocabulary."""
    from mlmkit.corpus.python_docs import python_docs

    return python_docs("train")[:1500]


def _tokenizer(kind: str, fixture_dir: Path, corpus_sample: list[str], shared: Path):
    """The tokenizer of `kind`, trained once for the whole test run: pytest-xdist's workers
    share `shared`, and the first to need a kind trains it there (a unigram takes seconds)."""
    import shutil

    from filelock import FileLock
    from transformers import AutoTokenizer

    from mlmkit.tokenizer import train_tokenizer

    trained = shared / f"tok-{kind}"
    with FileLock(str(trained) + ".lock"):
        if not (trained / "tokenizer.json").exists():
            train_tokenizer(corpus_sample, trained, kind=kind, vocab_size=1024,
                            show_progress=False)
    own = fixture_dir / f"tok-{kind}"  # tests read and write this worker's copy
    shutil.copytree(trained, own)
    return AutoTokenizer.from_pretrained(str(own))


@pytest.fixture(scope="session")
def tokenizer_factory(fixture_dir, corpus_sample, tmp_path_factory):
    cache = {}
    # Under pytest-xdist the workers' temp dirs share their parent (one per run).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def make(kind: str):
        if kind == "protein" and kind not in cache:
            from mlmkit.protein import protein_tokenizer

            cache[kind] = protein_tokenizer(fixture_dir / "tok-protein")
        if kind not in cache:
            cache[kind] = _tokenizer(kind, fixture_dir, corpus_sample, shared)
        return cache[kind]

    return make


@pytest.fixture(scope="session")
def wordpiece_tokenizer(tokenizer_factory):
    return tokenizer_factory("wordpiece")


@pytest.fixture(scope="session")
def bpe_tokenizer(tokenizer_factory):
    return tokenizer_factory("bpe")


@pytest.fixture(scope="session")
def unigram_tokenizer(tokenizer_factory):
    return tokenizer_factory("unigram")


@pytest.fixture(scope="session")
def tiny_mlm(tokenizer_factory):
    """Factory: `tiny_mlm("roberta")` → an MLM (eval mode) of a tiny random model, cached."""
    from mlmkit.models import LoadedMLM, build_mlm

    cache = {}

    def make(family: str = "bert") -> LoadedMLM:
        if family not in cache:
            tokenizer = tokenizer_factory(FAMILY_TOKENIZER[family])
            model = build_mlm(f"{family}-tiny", tokenizer, max_length=128, seed=0).eval()
            cache[family] = LoadedMLM(model=model, tokenizer=tokenizer, name=f"{family}-tiny")
        return cache[family]

    return make


@pytest.fixture(scope="session")
def saved_tiny_mlm(tiny_mlm, fixture_dir):
    """Factory: the directory of a saved tiny model with its tokenizer (loadable by name)."""
    cache = {}

    def make(family: str = "bert") -> Path:
        if family not in cache:
            mlm = tiny_mlm(family)
            path = fixture_dir / f"model-{family}"
            mlm.model.save_pretrained(path)
            mlm.tokenizer.save_pretrained(path)
            cache[family] = path
        return cache[family]

    return make


@pytest.fixture(scope="session")
def esm_dir(fixture_dir) -> Path:
    """A saved tiny random ESM-2 (`esm2-tiny`, inputs of 66 tokens: 64 residues in a window) with
    ESM's amino-acid tokenizer, built locally (no hub)."""
    from mlmkit.models import build_mlm
    from mlmkit.protein import protein_tokenizer

    path = fixture_dir / "esm2-tiny"
    if not (path / "config.json").exists():
        tokenizer = protein_tokenizer(path)
        build_mlm("esm2-tiny", tokenizer, max_length=66, seed=0).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def esm_mlm(esm_dir):
    """The tiny ESM-2 of `esm_dir`, bound on the CPU (`mlmkit.load`)."""
    import mlmkit

    return mlmkit.load(esm_dir, device="cpu")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the shared data sets are not at {SHARED_DATA} (see ../shared/data/README)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory):
    """The test fork server (tests/forkserver.py), or None with
    MLMKIT_TEST_REAL_PROCESSES=1: every `mlmkit` process a test starts through it (and every
    `python -c` / `python -` of the pages, whose PATH has the shims first) skips the ~3 s of
    torch and transformers imports and is otherwise a real process (its own pid, pipes,
    signals and exit status). Started on first use; one for the README test and the CLI
    tests alike, and under pytest-xdist one for all the workers (the first that needs it
    starts it; it ends with the controller)."""
    import forkserver
    from filelock import FileLock

    if forkserver.disabled():
        yield None
        return
    # Under pytest-xdist the workers' temp dirs share their parent (one per run).
    base = tmp_path_factory.getbasetemp()
    shared = os.environ.get("PYTEST_XDIST_WORKER") is not None
    place = base.parent / "forkserver" if shared else tmp_path_factory.mktemp("forkserver")
    place.mkdir(exist_ok=True)
    shim_dir = place / "bin"
    socket_path = place / "socket"
    # The shim finds the server through the environment its caller gives it.
    os.environ["MLMKIT_FORKSERVER"] = str(socket_path)
    with FileLock(str(place / "lock")):
        if not (shim_dir / "python").exists():
            forkserver.write_shim(shim_dir, str(Path(sys.executable).parent / "mlmkit"))
            forkserver.write_shim(shim_dir, sys.executable, "python")  # -c CODE / - only
        server = forkserver.Server(socket_path, dict(os.environ), shim_dir,
                                   owner=os.getppid() if shared else os.getpid())
    yield server
    if not shared:
        server.stop()
    os.environ.pop("MLMKIT_FORKSERVER", None)


@pytest.fixture(scope="session")
def mlmkit_command(fork_server) -> list[str]:
    """The argv prefix that runs `mlmkit` in a new process: the fork server's shim, or
    `python -m mlmkit` when the server is off. Tests of the interpreter's own start-up
    (imports, `python -m`) use sys.executable instead."""
    if fork_server is None:
        return [sys.executable, "-m", "mlmkit"]
    return [str(fork_server.shim_dir / "mlmkit")]


@pytest.fixture(scope="session", autouse=True)
def _one_click_command_per_app():
    """typer's CliRunner builds the app's whole click command tree on every `invoke` (about
    15 ms for mlmkit's, and the CLI tests invoke it well over a thousand times); a real
    `mlmkit` process builds it once. Here each app's tree is built once and reused, and built
    again if commands are registered on the app later."""
    import typer.main
    import typer.testing

    build = typer.testing._get_command
    built = {}

    def registrations(app) -> tuple:
        return (len(app.registered_commands), len(app.registered_groups),
                *(registrations(group.typer_instance) for group in app.registered_groups))

    def get_command(app):
        key = registrations(app)
        if id(app) not in built or built[id(app)][0] != key:
            built[id(app)] = key, build(app), app  # the app is kept: its id stays its own
        return built[id(app)][1]

    typer.testing._get_command = get_command
    yield
    typer.testing._get_command = build


def pytest_configure(config):
    config.addinivalue_line("markers", "plots: the test checks what a pretraining run draws "
                                       "(plots/, tensorboard/): its runs draw them")


@pytest.fixture(autouse=True)
def _plots_only_where_checked(request, monkeypatch):
    """A tiny pretraining run spends about a fifth of its time drawing plots/*.png and
    writing TensorBoard events. The runs of a test draw them only when the test is marked
    `plots` (it checks them) or inside `drawing_plots()`; elsewhere a run goes on as without
    the `plots` extra, minus the warning. The pages' runs and the `mlmkit` processes of the
    CLI tests draw them as always."""
    marked = request.node.get_closest_marker("plots") is not None
    _use_plots(monkeypatch, PLOTS_INSTALLED if marked else _no_plots)


@pytest.fixture(scope="session")
def drawing_plots():
    """A context manager: the pretraining runs inside it draw their plots (a shared fixture's
    run, which a `plots` test checks, whichever test builds it first)."""

    @contextlib.contextmanager
    def drawing():
        with pytest.MonkeyPatch.context() as patch:
            _use_plots(patch, PLOTS_INSTALLED)
            yield

    return drawing


def _use_plots(patch: pytest.MonkeyPatch, chosen) -> None:
    patch.setattr(pretraining_plots, "plots_installed", chosen)
    # run.py holds its own reference (bound when it is first imported, maybe in a test)
    run = sys.modules.get("mlmkit.pretraining.run")
    if run is not None:
        patch.setattr(run, "plots_installed", chosen)


def _no_plots() -> bool:
    return False


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _threads():
    """A test that asks for a thread count by name does not pass it on to the next test
    (a count asked for by name holds for the rest of a process: core/devices.py)."""
    import mlmkit.core.devices as devices

    yield
    devices._asked_threads = None
    torch.set_num_threads(1)


# Test files that run whole on one pytest-xdist worker (`make test`): their module fixtures
# are multi-process or long training runs, built once instead of once per worker that gets
# one of their tests. (xdist's own `xdist_group` marker does nothing under pytest 9: the
# group suffix it writes into `item._nodeid` is no longer part of the node id.)
WHOLE_FILES = frozenset({"tests/training/test_ddp.py", "tests/training/test_fsdp.py",
                         "tests/training/test_electra.py", "tests/serve/test_serve_browser.py",
                         "tests/scoring/test_score_shards.py"})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` with every file of WHOLE_FILES as one unit of work."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class WholeFiles(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in WHOLE_FILES else super()._split_scope(nodeid)

    return WholeFiles(config, log)


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` first: pytest-xdist hands tests out in collection order, so the
    longest ones start early instead of leaving one worker busy at the end (`make test`)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _cpu_seconds() -> float:
    import resource

    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                           resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With MLMKIT_TEST_CPU_LOG=FILE, append each test's CPU seconds (set-up, call and
    teardown; this process and the child processes it waited for) to FILE: where the suite's
    CPU goes, which wall-clock durations on a loaded machine do not show."""
    path = os.environ.get("MLMKIT_TEST_CPU_LOG")
    if not path:
        return (yield)
    started = _cpu_seconds()
    try:
        return (yield)
    finally:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{_cpu_seconds() - started:8.2f} {item.nodeid}\n")

