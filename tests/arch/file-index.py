#!/usr/bin/env python3
"""docs/ARCHITECTURE.md names every source file: the section between the file-index markers lists
each unit of the product folders (x.hpp and x.cpp count as one unit x) with the first sentence of
its leading comment, the header's where there is one. This script writes that section (--write) or
checks that it is current (the default; ctest "arch: every file named").

Usage: file-index.py [--write] [SOURCE_DIR]
"""
import re
import subprocess
import sys
from pathlib import Path

PRODUCT = ["support", "envspec", "runner", "builder", "cli"]
SUFFIXES = (".hpp", ".cpp", ".hpp.in", ".inc")
BEGIN = "<!-- file-index:begin (tests/arch/file-index.py --write) -->"
END = "<!-- file-index:end -->"


def source_files(root: Path):
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "--", *PRODUCT], check=True,
                             capture_output=True, text=True).stdout.split("\n")
        files = [root / f for f in out if f]
    except (OSError, subprocess.CalledProcessError):
        files = [p for d in PRODUCT for p in (root / d).rglob("*") if p.is_file()]
    return sorted(f for f in files if f.name.endswith(SUFFIXES) and f.exists())


def unit_of(path: Path) -> str:
    name = path.name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def leading_comment(path: Path) -> str:
    """The first sentence of the comment block a file opens with (after #pragma once)."""
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        s = line.strip()
        if not lines and (s.startswith("#pragma") or s == ""):
            continue
        if s.startswith("///"):
            lines.append(s[3:].strip())
        elif s.startswith("//"):
            lines.append(s[2:].strip())
        else:
            break
    text = " ".join(x for x in lines if x)
    m = re.match(r"(.+?\.)(\s|$)", text)
    sentence = m.group(1) if m else text
    if len(sentence) > 240:
        sentence = sentence[:237].rsplit(" ", 1)[0] + " …"
    return sentence


def generate(root: Path) -> str:
    units = {}
    for f in source_files(root):
        rel = f.relative_to(root)
        key = (str(rel.parent), unit_of(f))
        units.setdefault(key, []).append(f)
    out = [BEGIN, ""]
    folder = None
    for (parent, unit), files in sorted(units.items()):
        if parent != folder:
            if folder is not None:
                out.append("")
            folder = parent
            out.append(f"**`{parent}/`**")
            out.append("")
        files.sort(key=lambda p: (not p.name.endswith((".hpp", ".hpp.in")), p.name))
        names = " ".join(f"`{p.name}`" for p in files)
        described = next((leading_comment(p) for p in files if leading_comment(p)), "")
        if not described:
            described = "(no leading comment)"
        out.append(f"- {names}: {described}")
    out += ["", END]
    return "\n".join(out) + "\n"


def main(argv):
    write = "--write" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[2]
    doc = root / "docs" / "ARCHITECTURE.md"
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{doc}: the file-index markers are missing", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END + "\n", 1) if END + "\n" in rest else rest.split(END, 1)
    want = head + generate(root) + tail
    if write:
        if want != text:
            doc.write_text(want, encoding="utf-8")
        print(f"{doc}: file index written")
        return 0
    undescribed = [line for line in generate(root).splitlines() if line.endswith("(no leading comment)")]
    if undescribed:
        print("files without a leading comment saying what they are for:", file=sys.stderr)
        for line in undescribed:
            print("  " + line, file=sys.stderr)
        return 1
    if want != text:
        print(f"{doc}: the file index is stale (a file was added, moved or its leading comment "
              "changed); run: python3 tests/arch/file-index.py --write", file=sys.stderr)
        return 1
    print(f"{doc}: every file named")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
