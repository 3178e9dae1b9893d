#!/usr/bin/env python3
"""clang-tidy over lockstep's sources, with the checks .clang-tidy configures, warnings as errors.

  scripts/tidy.py              the .cpp files changed since the base (below), and the uncommitted ones
  scripts/tidy.py --all        every .cpp file of the product folders (an hour of CPU: run it with -j)
  scripts/tidy.py FILE...      those files (a header is checked through one file that includes it)

Options: -j N parallel clang-tidy runs (default: every core); --build DIR the build tree whose
compile_commands.json to use (default build/dev, which scripts/test.sh configures).

The base: $LOCKSTEP_TIDY_BASE when set; else the merge-base of HEAD and origin/main, when HEAD is
ahead of it; else HEAD~1 (on main: what the last commit changed); else HEAD (a clone with one commit
or a shallow one: only uncommitted changes). Checked are the product folders (support, envspec,
builder, runner, cli); tests/ is not. A changed header is checked through its own .cpp, or, for a
header without one, the first .cpp that includes it: its warnings show in any file that includes it.

A function over readability-function-size's 120 lines fails unless tests/arch/function-size-exceptions.txt
lists it (`path:function  reason`, matched on the function's name so that an entry survives a move;
--all also checks the paths and fails on an entry that no longer matches: remove it once the function
is cut). Every other warning fails: fix it, or, where the check is wrong about the code, say why in a
NOLINT comment on the line, or turn the check off in .clang-tidy with a comment that says why.
docs/testing.md has more.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ("support", "envspec", "builder", "runner", "cli")
EXCEPTIONS = "tests/arch/function-size-exceptions.txt"

DIAG = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<kind>warning|error): "
                  r"(?P<text>.*?)(?: \[(?P<checks>[^\]]+)\])?$")
NOISE = re.compile(r"^(\d+ (warnings?|errors?)( and \d+ errors?)? generated\.|Error while processing .*\.)$")
FUNCTION_SIZE = re.compile(r"^function '(?P<name>.+)' exceeds recommended size/complexity thresholds$")
SIZE_NOTE = re.compile(r"note: (\d+) lines including whitespace and comments")


def git(*args, check=True):
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"tidy: git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout if r.returncode == 0 else None


def is_product(path):
    return path.split("/", 1)[0] in PRODUCT


def resolve_base():
    """The commit the changed files are measured from, and how it was chosen."""
    if os.environ.get("LOCKSTEP_TIDY_BASE"):
        base = os.environ["LOCKSTEP_TIDY_BASE"]
        return git("rev-parse", "--verify", base + "^{commit}").strip(), f"$LOCKSTEP_TIDY_BASE ({base})"
    head = git("rev-parse", "HEAD").strip()
    if git("rev-parse", "--verify", "-q", "origin/main^{commit}", check=False):
        mb = git("merge-base", "HEAD", "origin/main", check=False)
        if mb and mb.strip() != head:
            return mb.strip(), "the merge-base with origin/main"
    parent = git("rev-parse", "--verify", "-q", "HEAD~1^{commit}", check=False)
    if parent:
        return parent.strip(), "HEAD~1"
    return head, "HEAD (no parent commit here: uncommitted changes only)"


def changed_files(base):
    out = git("diff", "--name-only", "--diff-filter=d", "--no-renames", base, "--")
    out += git("ls-files", "--others", "--exclude-standard")
    return sorted({p for p in out.splitlines() if p})


def includers(header, sources):
    """The .cpp files among SOURCES that #include HEADER (a path from the root, as lockstep writes them)."""
    needle = f'#include "{header}"'
    found = []
    for src in sources:
        with open(os.path.join(ROOT, src), encoding="utf-8", errors="replace") as f:
            if needle in f.read():
                found.append(src)
    return found


def units_for(paths, sources):
    """The translation units that check PATHS: a .cpp itself; a header through its own .cpp or one includer."""
    units = set()
    for p in paths:
        if not is_product(p):
            continue
        if p.endswith(".cpp") and p in sources:
            units.add(p)
        elif p.endswith(".hpp") and os.path.exists(os.path.join(ROOT, p)):
            own = p[:-4] + ".cpp"
            if own in sources:
                units.add(own)
            else:
                users = includers(p, sorted(sources))
                if users:
                    units.add(users[0])
    return sorted(units)


def compiled_sources(build):
    """The product .cpp files the compilation database knows, relative to the root."""
    import json
    db = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db):
        sys.exit(f"tidy: {os.path.relpath(db, ROOT)} is missing: configure the build first "
                 "(scripts/test.sh does; CMAKE_EXPORT_COMPILE_COMMANDS is on)")
    with open(db) as f:
        entries = json.load(f)
    out = set()
    for e in entries:
        path = os.path.normpath(os.path.join(e.get("directory", ""), e["file"]))
        rel = os.path.relpath(path, ROOT)
        if not rel.startswith("..") and is_product(rel):
            out.add(rel)
    return out


def clang_tidy_binary():
    for name in (os.environ.get("LOCKSTEP_CLANG_TIDY"), "clang-tidy", "clang-tidy-14"):
        if name and shutil.which(name):
            return name
    sys.exit("tidy: clang-tidy not found (scripts/install-deps.sh test installs it)")


def run_one(tool, build, unit):
    """clang-tidy on one file: (unit, exit status, its diagnostics, seconds)."""
    start = time.monotonic()
    r = subprocess.run([tool, "-p", build, "--quiet", unit], cwd=ROOT, capture_output=True, text=True)
    diags = []
    for line in (r.stdout + r.stderr).splitlines():
        m = DIAG.match(line)
        if m:
            path = os.path.relpath(os.path.normpath(os.path.join(ROOT, m["path"])), ROOT)
            diags.append({"path": path, "line": int(m["line"]), "col": int(m["col"]), "kind": m["kind"],
                          "text": m["text"], "checks": (m["checks"] or "").split(",")[0], "more": []})
        elif diags and not NOISE.match(line):
            diags[-1]["more"].append(line.replace(ROOT + "/", ""))
    return unit, r.returncode, diags, r.stdout + r.stderr, time.monotonic() - start


def load_exceptions():
    """EXCEPTIONS as {function name: (path, reason, line number)}."""
    out = {}
    with open(os.path.join(ROOT, EXCEPTIONS), encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, _, reason = line.partition(" ")
            path, sep, name = key.partition(":")
            if not sep or not name or not reason.strip():
                sys.exit(f"tidy: {EXCEPTIONS}:{n}: expected `path:function  reason`")
            if name in out:
                sys.exit(f"tidy: {EXCEPTIONS}:{n}: '{name}' is listed twice (line {out[name][2]})")
            out[name] = (path, reason.strip(), n)
    return out


def render(d):
    return "\n".join([f"{d['path']}:{d['line']}:{d['col']}: {d['kind']}: {d['text']} [{d['checks']}]", *d["more"]])


def main():
    ap = argparse.ArgumentParser(description="clang-tidy over lockstep's sources (see the file's head)")
    ap.add_argument("--all", action="store_true", help="every product .cpp file")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "dev"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    sources = compiled_sources(build)

    if args.all:
        units, what = sorted(sources), "every product file"
    elif args.files:
        paths = [os.path.relpath(os.path.abspath(p), ROOT) for p in args.files]
        units, what = units_for(paths, sources), "the files named"
    else:
        base, how = resolve_base()
        changed = changed_files(base)
        units = units_for(changed, sources)
        what = f"changed since {git('rev-parse', '--short', base).strip()}, {how}"
        if ".clang-tidy" in changed or EXCEPTIONS in changed:
            what += "; .clang-tidy or the exception list changed too: `--all` checks them"
    print(f"tidy: {len(units)} file(s), {what}", flush=True)
    if not units:
        return 0

    tool = clang_tidy_binary()
    exceptions = load_exceptions()
    start = time.monotonic()
    seen, failures, excused, broken = set(), [], {}, []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for unit, rc, diags, raw, _ in pool.map(lambda u: run_one(tool, build, u), units):
            if rc != 0 and not diags:
                broken.append((unit, raw))
            for d in diags:
                if not is_product(d["path"]) and d["checks"] not in ("", "clang-diagnostic-error"):
                    continue  # a check's finding in a library's header: not ours to fix
                key = (d["path"], d["line"], d["col"], d["text"])
                if key in seen:
                    continue
                seen.add(key)
                m = FUNCTION_SIZE.match(d["text"]) if d["checks"] == "readability-function-size" else None
                if m and m["name"] in exceptions:
                    excused.setdefault(m["name"], []).append(d)
                    continue
                failures.append(d)

    problems = 0
    for unit, raw in broken:
        print(f"tidy: clang-tidy failed on {unit}:\n{raw}", file=sys.stderr)
        problems += 1
    for d in sorted(failures, key=lambda d: (d["path"], d["line"], d["col"])):
        print(render(d), file=sys.stderr)
        if d["checks"] == "readability-function-size":
            size = next((m.group(1) for m in map(SIZE_NOTE.search, d["more"]) if m), "?")
            print(f"  ({size} lines: cut it into named steps, or list it with a reason in {EXCEPTIONS})",
                  file=sys.stderr)
        problems += 1
    if args.all:
        # Over the whole tree the list must be exact: every entry matches one function, at its path.
        for name, (path, _, n) in sorted(exceptions.items(), key=lambda kv: kv[1][2]):
            found = sorted({d["path"] for d in excused.get(name, [])})
            if not found:
                print(f"{EXCEPTIONS}:{n}: {path}:{name} is not over the limit (any more): remove the entry",
                      file=sys.stderr)
                problems += 1
            elif found != [path]:
                print(f"{EXCEPTIONS}:{n}: {name} is in {', '.join(found)}, not {path}: correct the entry",
                      file=sys.stderr)
                problems += 1
    secs = time.monotonic() - start
    print(f"tidy: {len(units)} file(s) in {secs:.0f} s: {problems} problem(s), "
          f"{sum(map(len, excused.values()))} listed long function(s)", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
