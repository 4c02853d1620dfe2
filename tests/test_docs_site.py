"""The documentation site builds: `mkdocs build --strict` with this virtualenv's mkdocs.

mkdocs.yml makes every warning fatal (a page missing from the navigation, a link to a page
or an anchor that does not exist, a docstring the API reference cannot read), so a page
moved or a heading renamed without fixing its links fails here. The pages' code blocks
run in tests/test_readme.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).parent / "mkdocs"


def nav_pages(nav) -> list[str]:
    """The page files a mkdocs `nav` names, in order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = nav_pages(config["nav"])
    pages = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").glob("*.md"))
    assert sorted(listed) == pages
    assert config["strict"] is True


@pytest.mark.skipif(not MKDOCS.exists(), reason=f"mkdocs is not installed at {MKDOCS}: the "
                    "`docs` extra (mkdocs-material, mkdocstrings[python]) brings it")
def test_the_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-6000:]
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    assert 'id="mlmkit.scoring.score"' in reference  # the API reference read the docstrings
    assert (site / "scoring" / "index.html").exists()
    assert (site / "img" / "serve-fill.png").exists()
