#!/usr/bin/env python3
"""The dependency rule of docs/ARCHITECTURE.md, checked on every #include of the sources.

Each room (a folder's own files) may include only the rooms listed for it below; an include that
breaks the rule is printed as FILE:LINE: ROOM may not include HEADER (ROOM) and the exit status is 1.
Inside cli/, no command file calls another's functions (docs/ARCHITECTURE.md, "Commands"): a
cli/cmd_*.cpp includes no header of cli/ but cli/cli.hpp, defines no function outside its anonymous
namespace but its register_* entry point, and every function cli/cli.hpp declares is defined in
cli/cli.cpp, or is a register_* entry point of a command file that cli/cli.cpp calls.
Usage: check-includes.py [SOURCE_DIR]  (default: the repository this script is in).
       check-includes.py --self-test   (plants violations in a scratch tree: they must be caught)
"""
import os
import re
import sys

BASE = {"support/base"}
CORE = BASE | {"support/system", "support/codec", "support/store", "support/net"}
SUPPORT = CORE | {"support/solver", "support/supplychain", "support/git", "support/oci", "support/debian",
                  "support/python", "support/conda", "support/registry"}
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
    "support/conda": BASE | {"support/system", "support/codec", "support/solver"},
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
COMMAND = re.compile(r"^cli/cmd_\w+\.cpp$")
# Lines at the start of a file's top-level statement that never begin a function.
NOT_FUNCTION = re.compile(r"^(namespace|struct|class|enum|union|using|typedef|template|constexpr|static_assert|"
                          r"extern|inline constexpr|#)\b")


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
                    if COMMAND.match(rel) and target == "cli" and header != "cli/cli.hpp":
                        errors.append(f"{rel}:{number}: a command file includes only cli/cli.hpp of cli/, not "
                                      f"{header}: commands don't call each other's functions")
                    if header.startswith("support/base/version.hpp") or target == room:
                        continue
                    if not os.path.isfile(os.path.join(root, header)):
                        errors.append(f"{rel}:{number}: {header} is not a header of the source tree")
                    elif target not in RULES[room]:
                        errors.append(f"{rel}:{number}: {room} may not include {header} ({target})")
        errors.extend(cycles_in(room, edges))
    errors.extend(check_commands(root))
    return errors, checked


def function_name(statement):
    """The name of the function a top-level statement declares or defines (the word before its first
    parenthesis outside template brackets), or None when it is no function (a variable, a type)."""
    depth = 0
    for i, c in enumerate(statement):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "=" and depth == 0:
            return None
        elif c == "(" and depth == 0:
            m = re.search(r"(\w+)\s*$", statement[:i])
            return m.group(1) if m else None
    return None


def top_level_functions(text):
    """(name, line, defined, public) of each function a file declares or defines at the start of a line
    (clang-format puts namespace-level statements there): defined when its body follows before any
    ';', public when it is outside an anonymous namespace."""
    found = []
    # Raw strings (a command's --help examples) emptied, their lines kept for the line numbers.
    text = re.sub(r'R"([^(\s]*)\((.*?)\)\1"', lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    lines = text.split("\n")
    anonymous = 0
    for number, line in enumerate(lines, 1):
        if re.match(r"^namespace\s*\{", line):
            anonymous += 1
            continue
        if re.match(r"^\}\s*//\s*namespace\s*$", line) and anonymous:
            anonymous -= 1
            continue
        if not line or not (line[0].isalpha() or line[0] == "_") or NOT_FUNCTION.match(line):
            continue
        statement = "\n".join(lines[number - 1:number + 20])
        name = function_name(statement.split(";")[0].split("{")[0])
        if name is None:
            continue
        end = min(i for i in (statement.find(";"), statement.find("{"), len(statement)) if i >= 0)
        found.append((name, number, end < len(statement) and statement[end] == "{", anonymous == 0))
    return found


def check_commands(root):
    """The rule of cli/: what cli/cli.hpp declares is cli/cli.cpp's, or a command's register_* entry
    point that cli/cli.cpp calls; a command file defines nothing else that another could call."""
    folder = os.path.join(root, "cli")
    header = os.path.join(folder, "cli.hpp")
    if not os.path.isfile(header):
        return ["cli/cli.hpp: missing (docs/ARCHITECTURE.md, \"Commands\")"]
    errors = []

    def read(name):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return f.read()

    cli_cpp = read("cli.cpp") if os.path.isfile(os.path.join(folder, "cli.cpp")) else ""
    commands = sorted(n for n in os.listdir(folder) if COMMAND.match(f"cli/{n}"))
    defined_in = {}
    for name in commands:
        for function, number, defined, public in top_level_functions(read(name)):
            if not defined:
                continue
            defined_in.setdefault(function, f"cli/{name}")
            if public and not function.startswith("register_"):
                errors.append(f"cli/{name}:{number}: {function} is defined for other commands to call: a "
                              f"command file defines only its register_* entry point; move {function} below cli")
    here = {f for f, _, defined, public in top_level_functions(cli_cpp) if defined and public}
    for function, number, _, _ in top_level_functions(read("cli.hpp")):
        if function in here:
            continue
        if function.startswith("register_") and function in defined_in:
            if not re.search(r"\b" + function + r"\s*\(", cli_cpp):
                errors.append(f"cli/cli.hpp:{number}: {function} ({defined_in[function]}) is never called by "
                              f"cli/cli.cpp")
            continue
        where = f"in {defined_in[function]}" if function in defined_in else "nowhere"
        errors.append(f"cli/cli.hpp:{number}: {function} is defined {where}, not in cli/cli.cpp: what "
                      f"cli/cli.hpp declares is cli/cli.cpp's, or a command's register_* entry point")
    return errors


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
            # cli.hpp: the commands' entry points, a helper of cli.cpp's, and one a command defines.
            "cli/cli.hpp": "void register_a(App& app);\nvoid register_b(App& app);\nvoid helper();\n"
                           "Result<void> shared(const std::string& text,\n                   bool flag);\n",
            "cli/cli.cpp": "void helper() {}\n\nint run() {\n  register_a(app);\n  register_b(app);\n}\n",
            "cli/cmd_a.hpp": "",
            "cli/cmd_a.cpp": '#include "cli/cli.hpp"\n\nnamespace {\n\nvoid local() {}\n\n} // namespace\n\n'
                             "Result<void> shared(const std::string& text,\n                   bool flag) {\n}\n\n"
                             "void register_a(App& app) {\n  local();\n}\n",
            "cli/cmd_b.cpp": '#include "cli/cmd_a.hpp"\n\nvoid register_b(App& app) {\n  shared("", true);\n}\n',
        }
        for rel, text in planted.items():
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        errors, _ = check(root)
    expected = ["builder/lock/lock.cpp:1: builder/lock may not include runner/runtime/sandbox.hpp (runner/runtime)",
                "cli/cmd_b.cpp:1: a command file includes only cli/cli.hpp of cli/, not cli/cmd_a.hpp: commands "
                "don't call each other's functions",
                "envspec/load: files include each other: load -> merge -> load",
                "support/system/fs.cpp:1: support/system may not include envspec/spec/spec.hpp (envspec/spec)",
                "cli/cmd_a.cpp:9: shared is defined for other commands to call: a command file defines only its "
                "register_* entry point; move shared below cli",
                "cli/cli.hpp:4: shared is defined in cli/cmd_a.cpp, not in cli/cli.cpp: what cli/cli.hpp declares "
                "is cli/cli.cpp's, or a command's register_* entry point"]
    if errors != expected:
        print("self-test: expected", expected, "got", errors)
        return 1
    print("self-test: the five planted violations were caught, the allowed includes and entry points were not")
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
