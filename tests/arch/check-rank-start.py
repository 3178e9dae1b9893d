#!/usr/bin/env python3
"""The rank program's start has no static initialisers (cli/main.cpp, docs/launch.md "Rank start-up").

`lockstep _rank` runs from a constructor of priority 101, before the other constructors of the
program: whatever rank_main may touch must need none of them. This check takes every source file
that runner/launch/rank.cpp reaches through its project includes (each header's .cpp beside it),
finds its object file in the build tree and fails when the object has a dynamic initialiser
(a `_GLOBAL__sub_I_` function, which the compiler emits for a namespace-scope object with a
constructor). Function-local statics are fine: they are built on first use.

Usage: check-rank-start.py SOURCE_DIR BUILD_DIR | --self-test
"""
import os
import re
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
ENTRY = "runner/launch/rank.cpp"


def reached_sources(root):
    """The project .cpp files reachable from ENTRY through quoted includes (x.hpp brings x.cpp)."""
    seen, sources, todo = set(), set(), [ENTRY]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = os.path.join(root, name)
        if not os.path.exists(path):
            continue  # a generated or system header
        if name.endswith(".cpp"):
            sources.add(name)
        with open(path, encoding="utf-8") as f:
            todo.extend(INCLUDE.findall(f.read()))
        if name.endswith(".hpp"):
            todo.append(name[: -len(".hpp")] + ".cpp")
    return sorted(sources)


def object_files(build):
    """source path (relative to the checkout) -> object file, for every object in the build tree."""
    found = {}
    for dirpath, _, files in os.walk(build):
        for f in files:
            if f.endswith(".cpp.o"):
                rel = os.path.relpath(os.path.join(dirpath, f), build)
                # CMakeFiles/<target>.dir/<source path>.o
                parts = rel.split(os.sep)
                if len(parts) > 2 and parts[0] == "CMakeFiles" and parts[1].endswith(".dir"):
                    found.setdefault("/".join(parts[2:])[: -len(".o")], os.path.join(dirpath, f))
    return found


# g++ and clang++ name a file's dynamic initialiser _GLOBAL__sub_I_<file>, and one of a given priority
# _GLOBAL__sub_I.<5-digit priority>_<file> (g++) or _GLOBAL__sub_I_<priority>_<n>_<file>; priorities up to 100 are the implementation's (a
# sanitizer's registration) and run before the rank's constructor (101), so they don't count.
INITIALISER = re.compile(r"\b_GLOBAL__sub_I(?:\.(\d{5})_|_(\d{5})_\d+_|_)")


def has_initialiser(obj):
    symbols = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    return any(int(m.group(1) or m.group(2) or 65535) > 100 for m in INITIALISER.finditer(symbols))


def self_test():
    """The symbol this check looks for is the one g++ emits: a planted global with a constructor is
    caught, constant-initialised globals and function-local statics are not."""
    cases = {
        "std::string planted = std::string(8, 'x');": True,
        "std::vector<int> planted{1, 2, 3};": True,
        "constexpr std::string_view fine = \"x\"; std::atomic<int> also_fine{0};": False,
        "const std::string& fine() { static const std::string s(8, 'x'); return s; }": False,
        "__attribute__((init_priority(2000))) std::string planted(8, 'x');": True,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for i, (code, expected) in enumerate(cases.items()):
            src, obj = os.path.join(tmp, f"c{i}.cpp"), os.path.join(tmp, f"c{i}.o")
            with open(src, "w", encoding="utf-8") as f:
                f.write("#include <atomic>\n#include <string>\n#include <string_view>\n#include <vector>\n" + code + "\n")
            subprocess.run(["g++", "-std=c++20", "-O2", "-fPIE", "-c", src, "-o", obj], check=True)
            if has_initialiser(obj) != expected:
                print(f"rank start self-test: {code!r}: expected initialiser={expected}", file=sys.stderr)
                return 1
    print(f"rank start self-test: {len(cases)} planted cases judged as expected")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root, build = sys.argv[1], sys.argv[2]
    sources = reached_sources(root)
    objects = object_files(build)
    failures, checked = [], 0
    for source in sources:
        obj = objects.get(source)
        if obj is None:
            failures.append(f"{source}: no object file under {build} (build lockstep first)")
            continue
        checked += 1
        if has_initialiser(obj):
            failures.append(f"{source}: has a static initialiser (a namespace-scope object with a constructor); "
                            "the rank program runs before it (cli/main.cpp): make it constexpr or a "
                            "function-local static")
    for failure in failures:
        print(f"rank start: {failure}", file=sys.stderr)
    if failures:
        return 1
    print(f"rank start: {checked} source files reached from {ENTRY}, none with a static initialiser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
