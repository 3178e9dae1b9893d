#!/usr/bin/env python3
"""The dependency rule of docs/ARCHITECTURE.md, checked on every #include of the sources.

Each room (a folder's own files) may include only the rooms listed for it below; an include that
breaks the rule is printed as FILE:LINE: ROOM may not include HEADER (ROOM) and the exit status is 1.
Usage: check-includes.py [SOURCE_DIR]  (default: the repository this script is in).
       check-includes.py --self-test   (plants violations in a scratch tree: they must be caught)
"""
import os
import re
import sys

BASE = {"support/base"}
CORE = BASE | {"support/system", "support/codec", "support/store", "support/net"}
SUPPORT = CORE | {"support/solver", "support/supplychain", "support/git", "support/oci", "support/debian",
                  "support/python", "support/registry"}
SPEC = {"envspec/settings", "envspec/yaml", "envspec/spec", "envspec/lock", "envspec/stack", "envspec/load", "envspec/documents"}
# room -> the rooms it may include (besides itself).
RULES = {
    "support/base": set(),
    "support/system": BASE,
    "support/codec": BASE | {"support/system"},
    "support/store": BASE | {"support/system", "support/codec"},
    "support/net": BASE | {"support/system", "support/codec", "support/store"},
    "support/solver": BASE,
    "support/supplychain": BASE | {"support/system", "support/codec"},
    "support/git": BASE | {"support/system"},
    "support/oci": CORE | {"support/supplychain"},
    "support/debian": CORE | {"support/supplychain"},
    "support/python": CORE | {"support/supplychain"},
    "support/registry": CORE | {"support/supplychain", "support/oci"},
    "envspec/settings": SUPPORT,
    "envspec/yaml": SUPPORT,
    "envspec/spec": SUPPORT | {"envspec/yaml"},
    "envspec/lock": SUPPORT | {"envspec/yaml", "envspec/spec"},
    "envspec/stack": SUPPORT | {"envspec/yaml", "envspec/spec", "envspec/lock"},
    "envspec/load": SUPPORT | {"envspec/yaml", "envspec/spec", "envspec/lock", "envspec/stack"},
    "envspec/documents": SUPPORT | {"envspec/yaml", "envspec/spec", "envspec/lock", "envspec/stack"},
    "runner/runtime": SUPPORT | SPEC,
    "runner/launch": SUPPORT | SPEC | {"runner/runtime"},
    "runner/audit": SUPPORT | SPEC | {"runner/runtime", "runner/launch"},
    "builder/lock": SUPPORT | SPEC,
    "builder/image": SUPPORT | SPEC | {"builder/lock", "runner/runtime"},
    "cli": SUPPORT | SPEC | {"runner/runtime", "runner/launch", "runner/audit", "builder/lock", "builder/image"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def room_of(path):
    return os.path.dirname(path)


def unit_of(name):
    """A file's unit inside its room: x.cpp and x.hpp are one unit, x."""
    return name.rsplit(".", 1)[0]


def cycles_in(room, edges):
    """Every include cycle among the units of one room, each as 'a -> b -> a' from its first unit by
    name: an arrow that runs back up inside the room (docs/ARCHITECTURE.md, "Inside a room")."""
    found = []
    state = {}

    def visit(unit, stack):
        state[unit] = "open"
        stack.append(unit)
        for nxt in sorted(edges.get(unit, ())):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                found.append(f"{room}: files include each other: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[unit] = "done"

    for unit in sorted(edges):
        if unit not in state:
            visit(unit, [])
    return found


def check(root):
    """The rule's violations under `root`, and how many includes were checked."""
    errors = []
    checked = 0
    for room in sorted(RULES):
        folder = os.path.join(root, room)
        if not os.path.isdir(folder):
            errors.append(f"{room}: the room is missing (docs/ARCHITECTURE.md lists it)")
            continue
        edges = {}
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".cpp", ".hpp")):
                continue
            edges.setdefault(unit_of(name), set())
            rel = f"{room}/{name}"
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    header = m.group(1)
                    checked += 1
                    target = room_of(header)
                    if target == room and unit_of(os.path.basename(header)) != unit_of(name):
                        edges[unit_of(name)].add(unit_of(os.path.basename(header)))
                    if header.startswith("support/base/version.hpp") or target == room:
                        continue
                    if not os.path.isfile(os.path.join(root, header)):
                        errors.append(f"{rel}:{number}: {header} is not a header of the source tree")
                    elif target not in RULES[room]:
                        errors.append(f"{rel}:{number}: {room} may not include {header} ({target})")
        errors.extend(cycles_in(room, edges))
    return errors, checked


def self_test():
    """A scratch tree with every room, one clean include and two that break the rule."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for room in RULES:
            os.makedirs(os.path.join(root, room))
        planted = {
            "runner/runtime/sandbox.hpp": "",
            "envspec/spec/spec.hpp": "",
            "builder/lock/lock.cpp": '#include "runner/runtime/sandbox.hpp"\n',  # lock -> runtime
            "support/system/fs.cpp": '#include "envspec/spec/spec.hpp"\n',  # support -> envspec
            "builder/image/build.cpp": '#include "runner/runtime/sandbox.hpp"\n',  # allowed
            "envspec/load/load.cpp": '#include "envspec/load/merge.hpp"\n',  # allowed: load -> merge
            "envspec/load/merge.hpp": '#include "envspec/load/load.hpp"\n',  # back up: merge -> load
            "envspec/load/load.hpp": "",
        }
        for rel, text in planted.items():
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        errors, _ = check(root)
    expected = ["builder/lock/lock.cpp:1: builder/lock may not include runner/runtime/sandbox.hpp (runner/runtime)",
                "envspec/load: files include each other: load -> merge -> load",
                "support/system/fs.cpp:1: support/system may not include envspec/spec/spec.hpp (envspec/spec)"]
    if errors != expected:
        print("self-test: expected", expected, "got", errors)
        return 1
    print("self-test: the three planted violations were caught, the allowed include was not")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    errors, checked = check(root)
    for e in errors:
        print(e)
    print(f"{checked} includes checked, {len(errors)} breaking the rule")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
