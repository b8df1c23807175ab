"""Memory measured in a fresh process: the resident-set fields of Linux, and running one benchmark
module's child mode in a new interpreter, reading the JSON line it prints last."""

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["rss_bytes", "in_fresh_process"]

ROOT = str(Path(__file__).resolve().parents[1])


def rss_bytes(field):
    """``VmRSS`` or ``VmHWM`` of this process in bytes (Linux's /proc/self/status), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def in_fresh_process(module, args, label, timeout=900, for_memory=True):
    """``python -m module *args`` in a new interpreter: the JSON value of its last line of output, or
    None (reported on stderr under ``label``) when it fails. ``for_memory``: glibc's allocator set so
    that the resident size follows what is alive (False for timings: the allocator as users have it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [ROOT, env.get("PYTHONPATH", "")] if p)
    if for_memory:
        # A fixed threshold: glibc otherwise raises it as blocks are freed, and then keeps freed arrays
        # in its heap, so the resident size would show what was ever allocated rather than what was alive.
        env.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    try:
        out = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env,
                             timeout=timeout, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as e:
        print(f"  {label}: {type(e).__name__}", file=sys.stderr)
        return None
