"""The README and the documentation pages run: their ```bash and ```python blocks, in
order, as a new user would run them.

The pages are README.md and every docs/*.md (the site that mkdocs.yml builds). Each `##`
section of a page is one example group: its blocks run in order in a fresh temporary
directory and a fresh process (two sections at a time), the Python blocks of a section in
one shared namespace, the bash blocks through `bash -e -o pipefail` with this virtualenv's
`bin` first on PATH.
Markers in a page (an HTML comment on the lines right before a block; see
docs/DEVELOPING.md, "The README and the pages are tested"):

    <!-- test: skip REASON -->        the block is not run (REASON says why, e.g. a download)
    <!-- test: replace OLD => NEW --> run the block with OLD replaced by NEW (tiny sizes, few
                                      steps); OLD must occur in the block

Every page is written from the repository's root: the paths `../shared/data` and
`tests/data/` are the repository's, so they are made absolute.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 80  # one screen: the README is a quickstart; the reference lives in docs/
SHARED = REPO.parent / "shared" / "data"
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*test:\s*(.*?)\s*-->\s*$")
RUN = {"bash", "python"}


@dataclass
class Block:
    language: str
    code: str
    line: int  # of the opening fence
    page: str  # the page's path from the repository root
    skip: str | None = None
    replace: list[tuple[str, str]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def source(self) -> str:
        code = self.code
        for old, new in self.replace:
            assert old in code, f"{self.where}: 'replace {old} => {new}' matches nothing"
            code = code.replace(old, new)
        code = code.replace("../shared/data", str(SHARED))
        return re.sub(r"(?<![\w/.])tests/data/", str(REPO / "tests" / "data") + "/", code)


def parse(text: str, page: str = "README.md") -> dict[str, list[Block]]:
    """The runnable blocks of each `##` section of one page, in order, with their markers."""
    sections: dict[str, list[Block]] = {}
    section, markers, block = "(top)", [], None
    for number, line in enumerate(text.splitlines(), 1):
        if block is not None:
            if line.startswith("```"):
                if block.language in RUN:
                    sections.setdefault(section, []).append(block)
                block = None
            else:
                block.code += line + "\n"
            continue
        fence, marker = FENCE.match(line), MARKER.match(line)
        if fence:
            block = Block(fence.group(1), "", number, page)
            for kind, _, rest in (m.partition(" ") for m in markers):
                if kind == "skip":
                    block.skip = rest or "no reason given"
                elif kind == "replace" and " => " in rest:
                    block.replace.append(tuple(rest.split(" => ", 1)))
                else:
                    raise AssertionError(f"{page}:{number}: unknown marker 'test: {kind} "
                                         f"{rest}' (skip REASON | replace OLD => NEW)")
            markers = []
        elif marker:
            markers.append(marker.group(1))
        else:
            if markers and line.strip():
                raise AssertionError(f"{page}:{number}: a test marker must come right "
                                     "before a code block")
            if line.startswith("## "):
                section = line[3:].strip()
    return sections


def parse_pages(pages: list[Path]) -> dict[str, list[Block]]:
    """Every page's sections, keyed `PAGE: SECTION` (README's first, then docs/ by name)."""
    sections = {}
    for path in pages:
        page = path.relative_to(REPO).as_posix()
        for name, blocks in parse(path.read_text(encoding="utf-8"), page).items():
            sections[f"{page}: {name}"] = blocks
    return sections


SECTIONS = parse_pages(PAGES)


def _environment(shim_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if shim_dir is not None:  # the sections' own processes keep it for their bash blocks
        env["MLMKIT_TEST_SHIM_DIR"] = str(shim_dir)
    # The fork server's `mlmkit` shim (if any) first, then this virtualenv's bin.
    path = [env.get("MLMKIT_TEST_SHIM_DIR", ""), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([p for p in path if p] + [env.get("PATH", "")])
    env.update(MLMKIT_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", COLUMNS="100", PYTHONUNBUFFERED="1")
    return env


def _run_bash(block: Block, cwd: Path) -> None:
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.source()], cwd=cwd,
                          env=_environment(), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{block.where} (bash) exited {done.returncode}\n"
                         f"--- stdout\n{done.stdout[-3000:]}\n"
                         f"--- stderr\n{done.stderr[-3000:]}")


def _run_python(block: Block, namespace: dict) -> None:
    code = compile(block.source(), block.where, "exec")
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, namespace)  # noqa: S102 - the pages' own examples


def run_section(section: str, workdir: Path) -> None:
    """Run one section's blocks in order in `workdir` (called in a fresh process)."""
    os.chdir(workdir)
    os.environ.update({k: v for k, v in _environment().items() if k != "PATH"})
    namespace: dict = {"__name__": "__readme__"}
    for block in SECTIONS[section]:
        if block.skip:
            continue
        if block.language == "bash":
            _run_bash(block, workdir)
        else:
            try:
                _run_python(block, namespace)
            except Exception:
                raise SystemExit(f"{block.where} (python) failed\n"
                                 + traceback.format_exc(limit=-6)) from None


@pytest.fixture(scope="session")
def launcher(fork_server):
    """Runs a section in its own process. Through the test fork server (conftest's
    `fork_server`) the section's process and each `mlmkit` it starts skip the ~3 s of torch
    and transformers imports (forked from a process that made them); otherwise (with
    MLMKIT_TEST_REAL_PROCESSES=1) each is a freshly started interpreter."""
    if fork_server is None:
        def launch(section: str, workdir: Path) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, __file__, section, str(workdir)],
                                  env=_environment(), capture_output=True, text=True,
                                  timeout=900)

        return launch
    env = _environment(shim_dir=fork_server.shim_dir)

    def launch(section: str, workdir: Path) -> subprocess.CompletedProcess:
        return fork_server.run("python", [__file__, section, str(workdir)], workdir, env,
                               timeout=900)

    return launch


@pytest.fixture(scope="module")
def section_runs(request, tmp_path_factory, launcher):
    """A function giving a section's finished run. Alone, pytest starts the selected sections
    in page order, two at a time (one per core of a 2-core CI machine; each section is
    mostly one-threaded). Under pytest-xdist (`make test`), every worker collects every
    test, so each section runs when its own test does and the workers give the parallelism.
    """
    futures = {}
    pool = None
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        selected = {item.callspec.params["section"] for item in request.session.items
                    if item.originalname == "test_page_section_runs"}
        pool = ThreadPoolExecutor(max_workers=2)
        for section in SECTIONS:
            if section in selected and runnable(section):
                futures[section] = pool.submit(launcher, section,
                                               tmp_path_factory.mktemp("readme"))

    def result(section: str) -> subprocess.CompletedProcess:
        if section in futures:
            return futures[section].result()
        return launcher(section, tmp_path_factory.mktemp("readme"))

    yield result
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def runnable(section: str) -> bool:
    """Whether a section has blocks to run here (not all skipped, its data present)."""
    blocks = SECTIONS[section]
    if all(b.skip for b in blocks):
        return False
    return not (any("../shared/data" in b.code for b in blocks if not b.skip)
                and not SHARED.is_dir())


def test_the_pages_have_runnable_blocks_and_markers_parse():
    blocks = [b for section in SECTIONS.values() for b in section]
    assert len(blocks) >= 25
    assert all(b.skip for b in SECTIONS.get("README.md: Set-up", [])), \
        "make demo/test must not run here"
    pages = {b.page for b in blocks}
    assert "README.md" in pages and "docs/scoring.md" in pages, sorted(pages)


def test_the_readme_is_a_quickstart():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines; keep it a one-screen "
                                       "quickstart and put reference material in docs/")
    runnable = [b for name, blocks in SECTIONS.items() if name.startswith("README.md:")
                for b in blocks if not b.skip]
    assert len(runnable) >= 4, "the README's quickstart (score, fill, pretrain) must run"


def test_the_readmes_links_name_pages_that_exist():
    """mkdocs checks the pages' links, not the README's (it is not on the site)."""
    text = README.read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)
               if "://" not in t]
    assert "docs/benchmarks.md" in targets and "docs/install.md" in targets
    missing = [t for t in targets if t and not (REPO / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_parse_names_the_page_and_line_of_a_bad_marker():
    page = "## A\n\n<!-- test: frobnicate x -->\n```bash\necho\n```\n"
    with pytest.raises(AssertionError, match=r"docs/x\.md:4: unknown marker"):
        parse(page, "docs/x.md")
    sections = parse("## A\n\n```bash\necho a\n```\n\n## B\n\n```text\nno\n```\n", "docs/x.md")
    assert list(sections) == ["A"] and sections["A"][0].where == "docs/x.md:3"


@pytest.mark.slow
@pytest.mark.parametrize("section", list(SECTIONS))
def test_page_section_runs(section, section_runs):
    blocks = SECTIONS[section]
    if all(b.skip for b in blocks):
        pytest.skip("every block is marked skip: " + "; ".join(sorted({b.skip for b in blocks})))
    if not runnable(section):
        pytest.skip(f"the shared data sets are not at {SHARED}")
    done = section_runs(section)
    assert done.returncode == 0, done.stderr[-6000:]


if __name__ == "__main__":  # one section, in its own process: test_readme.py SECTION WORKDIR
    run_section(sys.argv[1], Path(sys.argv[2]))
