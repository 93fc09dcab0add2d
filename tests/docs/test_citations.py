"""No file in the repository cites a Markdown document that is not in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".ipynb", ".json", ".lua", ".js", ".txt", ".cfg", ""}
# a path or a file name ending in .md, not part of a longer word, URL or hash tag
CITATION = re.compile(r"(?<![\w/.{-])((?:\.\./|[\w.-]+/)*[\w-]+\.md)(?![\w])")


def repo_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / f for f in out if (ROOT / f).is_file() and (ROOT / f).suffix in TEXT]


def test_every_cited_markdown_file_exists() -> None:
    # Given every text file of the repository and every Markdown file in it
    files = repo_files()
    names = {f.name for f in files if f.suffix == ".md"}
    missing = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for m in CITATION.finditer(text):
            ref = m.group(1)
            if "/" not in ref:
                found = ref in names  # a bare name: some file of that name
            else:  # a path: from the repository's root, the citing file's folder, or docs/ (mkdocs.yml's nav)
                found = any((base / ref).is_file() for base in (ROOT, f.parent, ROOT / "docs"))
            if not found:
                line = text.count("\n", 0, m.start()) + 1
                missing.append(f"{f.relative_to(ROOT)}:{line}: {ref}")
    # Then each one is there
    assert not missing, "files cite Markdown documents that are not in the repository:\n" + "\n".join(missing)
