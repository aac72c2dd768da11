"""runlib: the host-side helpers the tools' Python scripts share, so each exists once.

  Parser, positive, at_least,  argparse with one-line usage errors (exit 2) and the
  csv_list                     argument types of the tools' options
  cache_dir                    the harness cache (${WAKELAB_CACHE:-~/.cache/scx_wakelab})
  git_facts, host_facts        what a result records about the code and the machine
  build_binary, build_peer     scx_wakelab (working tree or a commit) and peer schedulers
  build_c                      a C helper for the guest, compiled here and cached

Users: tools/lab/run, tools/lab/report.py, tools/vm-tests, tools/vm/wakelab-vm (argument
types).
Standard library only.
Errors are Fail (one line, for the caller to print under its own name); progress lines go
to stderr prefixed with TOOL, which the caller sets.
"""
import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TOOL = "lab"   # prefix of progress lines; the calling tool sets its own


class Fail(Exception):
    """A failure the tool reports as one line on stderr."""


def load_script(path, name):
    """A Python script without a .py ending (tools/vm-tests, tools/oracle/run) loaded
    as module `name`, for its tests."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def run_unittests(module):
    """Run a test module's unittest cases, quietly with -q; print a FAIL block per
    failure and the line "N passed, N failed". The exit status: 0 only when some
    test ran and none failed."""
    import io
    import unittest
    result = unittest.TextTestRunner(stream=io.StringIO() if "-q" in sys.argv else sys.stderr, verbosity=1).run(
        unittest.defaultTestLoader.loadTestsFromModule(module))
    failed = len(result.failures) + len(result.errors)
    for t, tb in result.failures + result.errors:
        print(f"FAIL {t.id()}\n{tb}")
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 0 if failed == 0 and result.testsRun else 1


def say(msg):
    print(f"{TOOL}: {msg}", file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, text=True, capture_output=True, **kw)


# --------------------------------------------------------------------------- arguments

class Parser(argparse.ArgumentParser):
    """Usage errors as one line, `NAME: message (see --help)`, exit 2, not the usage block:
    a script's caller (tools/test, CI logs) keeps the reason, not a screenful."""

    def __init__(self, *args, name=None, **kw):
        super().__init__(*args, **kw)
        self.short_name = name or self.prog

    def error(self, message):
        self.exit(2, f"{self.short_name}: {message} (see --help)\n")


def at_least(least, convert=int, what="an integer"):
    """A type: CONVERT(v) >= LEAST, else a one-line error saying which of the two failed
    (WHAT names what CONVERT takes)."""
    def parse(v):
        try:
            n = convert(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {v!r}")
        if n < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}: {v!r}")
        return n
    return parse


positive = at_least(1)   # an integer >= 1


def csv_list(allowed, key=lambda item: item):
    """A type: a comma-separated list, each item's key(item) in ALLOWED, none twice."""
    def parse(v):
        items = [x.strip() for x in v.split(",") if x.strip()]
        bad = [x for x in items if key(x) not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{v!r}: choose from {','.join(allowed)}")
        if len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"{v!r}: listed twice")
        return items
    return parse


# --------------------------------------------------------------------------- facts

def cache_dir():
    """The cache tools/vm/wakelab-vm uses: builds, logs and guest helpers live beside its kernel."""
    return Path(os.environ.get("WAKELAB_CACHE") or Path.home() / ".cache/scx_wakelab")


def git_facts(rev=None):
    """(sha, subject, dirty paths): of REV when given, else of HEAD plus the working tree
    (only the paths that change the binary count as dirty)."""
    sha = sh(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
              f"{rev or 'HEAD'}^{{commit}}"]).stdout.strip()
    if not sha:
        raise Fail(f"--rev {rev}: not a commit in {ROOT}" if rev else f"{ROOT}: no git HEAD")
    subject = sh(["git", "-C", str(ROOT), "log", "-1", "--format=%s", sha]).stdout.strip()
    if rev:
        return sha, subject, []
    dirty = sh(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src", "bpf", "build.rs",
                "Cargo.toml", "Cargo.lock", ".cargo"]).stdout.splitlines()
    return sha, subject, [d[3:] for d in dirty if len(d) > 3]


def host_facts():
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        qemu = sh(["qemu-system-x86_64", "--version"]).stdout.splitlines()
    except OSError:
        qemu = []
    return {"kernel": platform.release(), "cpu": model, "ncpu": os.cpu_count(),
            "qemu": qemu[0] if qemu else "unknown", "load": " ".join(open("/proc/loadavg").read().split()[:3])}


# --------------------------------------------------------------------------- builds

def build_binary(binary, rev_sha):
    """The scx_wakelab binary: BINARY as given; with REV_SHA, that commit built from a
    `git archive` export under the cache (own target dir, seeded from the repo's
    target/release so only our crate recompiles); else the working tree's release build."""
    if binary:
        if not Path(binary).is_file():
            raise Fail(f"--binary {binary}: no such file")
        if Path(binary).name != "scx_wakelab":
            raise Fail(f"--binary {binary}: must be named scx_wakelab (the guest runs it by that name)")
        return Path(binary).resolve()
    if not rev_sha:
        say("cargo build --release")
        r = subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT)
        if r.returncode != 0:
            raise Fail(f"cargo build --release failed (status {r.returncode})")
        return ROOT / "target/release/scx_wakelab"
    src = cache_dir() / "bench-src" / rev_sha[:12]
    if not (src / "Cargo.toml").is_file():
        src.parent.mkdir(parents=True, exist_ok=True)
        # Exported beside its final place and renamed: an interrupted export never
        # looks like a complete tree to the next run.
        tmp = Path(tempfile.mkdtemp(prefix=f".{rev_sha[:12]}.", dir=src.parent))
        arch = subprocess.Popen(["git", "-C", str(ROOT), "archive", rev_sha], stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", str(tmp)], stdin=arch.stdout)
        arch.stdout.close()
        if arch.wait() != 0 or untar.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise Fail(f"git archive {rev_sha[:12]} failed")
        shutil.rmtree(src, ignore_errors=True)
        tmp.rename(src)
    target = cache_dir() / "bench-target"
    if not (target / "release").is_dir() and (ROOT / "target/release/deps").is_dir():
        say(f"seeding {target} from target/release")
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(ROOT / "target/release"), str(target / "release")], check=False)
    say(f"cargo build --release of {rev_sha[:12]} in {src}")
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    r = subprocess.run(["cargo", "build", "--release", "--quiet", "--locked"], cwd=src, env=env)
    if r.returncode != 0:
        raise Fail(f"cargo build --release of {rev_sha[:12]} failed (status {r.returncode})")
    return target / "release/scx_wakelab"


def build_peer(name="scx_rustland"):
    """A peer scheduler, by tools/peers/build-peers (which prints 'NAME PATH')."""
    say(f"tools/peers/build-peers {name}")
    r = subprocess.run([str(ROOT / "tools/peers/build-peers"), name], cwd=ROOT,
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise Fail(f"tools/peers/build-peers {name} failed (status {r.returncode})")
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name and Path(parts[1]).is_file():
            return Path(parts[1])
    raise Fail(f"tools/peers/build-peers printed no '{name} PATH' line")


COMPILERS = ("cc", "gcc", "clang-19")


def build_c(src, out, flags=("-O2", "-Wall")):
    """SRC (a C file) -> OUT with the host compiler, for the guest, which has none: the
    host's binary runs there because wakelab-vm copies its shared libraries along.
    Rebuilt only when SRC is newer than OUT. Fail names the reason in one line."""
    src, out = Path(src), Path(out)
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    cc = next((shutil.which(c) for c in COMPILERS if shutil.which(c)), None)
    if not cc:
        raise Fail(f"no C compiler ({', '.join(COMPILERS)}) for {src.name}: run tools/install-deps")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Compiled to a temporary name and renamed: a failed or interrupted build leaves
    # no binary whose mtime would pass for an up-to-date one.
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    r = subprocess.run([cc, *flags, "-o", str(tmp), str(src)], capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = r.stderr.strip().splitlines()
        raise Fail(f"building {src.name} with {Path(cc).name} failed: "
                   + (lines[-1] if lines else f"status {r.returncode}"))
    tmp.rename(out)
    return out
