"""No tracked file keeps a merge's conflict markers (one did: a docs page showed both sides of a merge)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)


def test_no_tracked_text_file_has_conflict_markers():
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    found = []
    for name in listed.stdout.splitlines():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".cfg", ".txt", ".yml", ".yaml", ".sh", ".rst", ""} \
                or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in MARKER.finditer(text)]
    assert not found, f"merge conflict markers left in: {', '.join(found)}"
