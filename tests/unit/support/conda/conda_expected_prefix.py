#!/usr/bin/env python3
"""The tests' own reading of conda's install rules (../shared/reference/conda.md §7), independent of
support/conda/link.cpp: given a package extracted by cph, print the prefix conda would make of it as
JSON {"paths": {PATH: {"kind", "sha256", "target", "exec"}}}.

Rules applied: paths.json entries only; text placeholders replaced everywhere (UTF-8), a first line
holding "#!PLACEHOLDER" getting the prefix with escaped spaces, and a first-line shebang over 127
bytes or with an escaped space in its directory becoming "#!/usr/bin/env NAME OPTIONS"; binary
placeholders replaced inside their NUL-terminated string and padded with NULs; noarch: python
relocated (site-packages/ -> SP/, python-scripts/ -> bin/) with link.json's entry points as bin/CMD.

Usage: conda_expected_prefix.py EXTRACTED_DIR PREFIX [--python X.Y] [--site-packages SP]
"""
import argparse
import hashlib
import json
import os
import re
import sys


def text_replace(data, placeholder, prefix):
    newline = data.find(b"\n")
    if newline >= 0:
        first, rest = data[:newline], data[newline:]
        marker = b"#!" + placeholder
        if marker in first:
            data = first.replace(marker, b"#!" + prefix.replace(b" ", b"\\ ")) + rest
    data = data.replace(placeholder, prefix)
    shebang = re.match(rb"^(#!(?: *)(/(?:\\ |[^ \n\r\t])*)(.*))$", data, re.MULTILINE)
    if shebang:
        whole, executable, options = shebang.groups()
        directory, name = executable.rsplit(b"/", 1)
        if len(whole) > 127 or b"\\ " in directory:
            data = data.replace(whole, b"#!/usr/bin/env " + name + options, 1)
    return data


def binary_replace(data, placeholder, prefix):
    def one(match):
        found = match.group()
        count = found.count(placeholder)
        padding = (len(placeholder) - len(prefix)) * count
        if padding < 0:
            raise SystemExit("prefix longer than the placeholder")
        return found.replace(placeholder, prefix) + b"\0" * padding

    out = re.sub(re.escape(placeholder) + rb"([^\0]*?)\0", one, data)
    assert len(out) == len(data)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("extracted")
    ap.add_argument("prefix")
    ap.add_argument("--python", default="")
    ap.add_argument("--site-packages", default="")
    args = ap.parse_args()
    info = os.path.join(args.extracted, "info")
    with open(os.path.join(info, "index.json")) as f:
        index = json.load(f)
    with open(os.path.join(info, "paths.json")) as f:
        entries = json.load(f)["paths"]
    noarch_python = index.get("noarch") == "python"
    site_packages = args.site_packages or f"lib/python{args.python}/site-packages"
    prefix = args.prefix.encode()
    out = {}
    for entry in entries:
        source = entry["_path"]
        target = source
        if noarch_python and source.startswith("site-packages/"):
            target = site_packages + source[len("site-packages"):]
        elif noarch_python and source.startswith("python-scripts/"):
            target = "bin" + source[len("python-scripts"):]
        full = os.path.join(args.extracted, source)
        kind = entry.get("path_type", "hardlink")
        if kind == "softlink":
            out[target] = {"kind": "symlink", "target": os.readlink(full)}
            continue
        if kind == "directory":
            out[target] = {"kind": "directory"}
            continue
        with open(full, "rb") as f:
            data = f.read()
        placeholder = entry.get("prefix_placeholder")
        if placeholder:
            if entry.get("file_mode", "text") == "binary":
                data = binary_replace(data, placeholder.encode(), prefix)
            else:
                data = text_replace(data, placeholder.encode(), prefix)
        out[target] = {"kind": "file", "sha256": hashlib.sha256(data).hexdigest(),
                       "exec": bool(os.stat(full).st_mode & 0o111)}
    link = os.path.join(info, "link.json")
    if noarch_python and os.path.exists(link):
        with open(link) as f:
            for ep in json.load(f).get("noarch", {}).get("entry_points", []):
                out["bin/" + ep.split("=")[0].strip()] = {"kind": "entry_point", "exec": True}
    json.dump({"paths": out}, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
