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

SUPPORT = {"support", "support/oci", "support/debian", "support/python", "support/registry"}
# room -> the rooms it may include (besides itself).
RULES = {
    "support": set(),
    "support/oci": {"support"},
    "support/debian": {"support"},
    "support/python": {"support"},
    "support/registry": {"support", "support/oci"},
    "envspec": SUPPORT,
    "runner/runtime": SUPPORT | {"envspec"},
    "runner/launch": SUPPORT | {"envspec", "runner/runtime"},
    "runner/audit": SUPPORT | {"envspec", "runner/runtime", "runner/launch"},
    "builder/lock": SUPPORT | {"envspec"},
    "builder/image": SUPPORT | {"envspec", "builder/lock", "runner/runtime"},
    "cli": SUPPORT | {"envspec", "runner/runtime", "runner/launch", "runner/audit", "builder/lock",
                      "builder/image"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def room_of(path):
    return os.path.dirname(path)


def check(root):
    """The rule's violations under `root`, and how many includes were checked."""
    errors = []
    checked = 0
    for room in sorted(RULES):
        folder = os.path.join(root, room)
        if not os.path.isdir(folder):
            errors.append(f"{room}: the room is missing (docs/ARCHITECTURE.md lists it)")
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".cpp", ".hpp")):
                continue
            rel = f"{room}/{name}"
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    header = m.group(1)
                    checked += 1
                    target = room_of(header)
                    if header.startswith("support/version.hpp") or target == room:
                        continue
                    if not os.path.isfile(os.path.join(root, header)):
                        errors.append(f"{rel}:{number}: {header} is not a header of the source tree")
                    elif target not in RULES[room]:
                        errors.append(f"{rel}:{number}: {room} may not include {header} ({target})")
    return errors, checked


def self_test():
    """A scratch tree with every room, one clean include and two that break the rule."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for room in RULES:
            os.makedirs(os.path.join(root, room))
        planted = {
            "runner/runtime/sandbox.hpp": "",
            "envspec/spec.hpp": "",
            "builder/lock/lock.cpp": '#include "runner/runtime/sandbox.hpp"\n',  # lock -> runtime
            "support/fs.cpp": '#include "envspec/spec.hpp"\n',  # support -> envspec
            "builder/image/build.cpp": '#include "runner/runtime/sandbox.hpp"\n',  # allowed
        }
        for rel, text in planted.items():
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        errors, _ = check(root)
    expected = ["builder/lock/lock.cpp:1: builder/lock may not include runner/runtime/sandbox.hpp (runner/runtime)",
                "support/fs.cpp:1: support may not include envspec/spec.hpp (envspec)"]
    if errors != expected:
        print("self-test: expected", expected, "got", errors)
        return 1
    print("self-test: both planted violations were caught, the allowed include was not")
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
