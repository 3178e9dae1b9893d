#!/usr/bin/env python3
"""Builds a conda channel for the conda suites: real packages packed by Debian's
conda-package-handling (`cph create`), each subdir's repodata.json (and repodata.json.zst with
--zst) with every record's sha256, md5 and size, as conda-index writes them.

Usage: conda_channel.py OUT DESCRIPTION.json [--zst]

DESCRIPTION: {"packages": [{"name", "version", "build", "build_number", "subdir" (default
linux-64), "depends", "constrains", "track_features", "noarch" ("python"|"generic"), "format"
("conda" default, or "tar.bz2"), "files": {"bin/tool": "text", ...}, "timestamp", "entry_points"
(noarch python: ["cmd = module:func"], written to info/link.json), "extra_paths" (paths.json entries
added verbatim: hostile packages)}], "removed": []}. A file's value is its text, or an object:
{"text": ..., "mode": 493, "placeholder": "/PLACEHOLDER", "file_mode": "text"|"binary"} (the
placeholder recorded in paths.json) or {"symlink": "target"}.
Every subdir named, and noarch, gets an index. Records are written with sorted keys; the archives
are cph's own, so what lockstep reads is what conda's tools write.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile


def build_package(pkg, out_dir):
    name, version, build = pkg["name"], pkg["version"], pkg["build"]
    fmt = pkg.get("format", "conda")
    fn = f"{name}-{version}-{build}.{fmt}"
    subdir = pkg.get("subdir", "linux-64")
    index = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": pkg.get("build_number", 0),
        "depends": pkg.get("depends", []),
        "subdir": subdir,
        "license": pkg.get("license", "MIT"),
        "timestamp": pkg.get("timestamp", 1700000000000),
    }
    for key in ("constrains", "track_features", "noarch"):
        if key in pkg:
            index[key] = pkg[key]
    with tempfile.TemporaryDirectory() as tree:
        paths = []
        for rel, content in sorted(pkg.get("files", {}).items()):
            spec = content if isinstance(content, dict) else {"text": content}
            path = os.path.join(tree, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if "symlink" in spec:
                os.symlink(spec["symlink"], path)
                paths.append({"_path": rel, "path_type": "softlink",
                              "sha256": hashlib.sha256(spec["symlink"].encode()).hexdigest(),
                              "size_in_bytes": len(spec["symlink"])})
                continue
            data = spec["text"].encode("latin-1") if spec.get("file_mode") == "binary" else spec["text"].encode()
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, spec.get("mode", 0o644))
            entry = {"_path": rel, "path_type": "hardlink", "sha256": hashlib.sha256(data).hexdigest(),
                     "size_in_bytes": len(data)}
            if "placeholder" in spec:
                entry["prefix_placeholder"] = spec["placeholder"]
                entry["file_mode"] = spec.get("file_mode", "text")
            paths.append(entry)
        paths.extend(pkg.get("extra_paths", []))
        os.makedirs(os.path.join(tree, "info"), exist_ok=True)
        if "entry_points" in pkg:
            with open(os.path.join(tree, "info", "link.json"), "w") as f:
                json.dump({"noarch": {"type": "python", "entry_points": pkg["entry_points"]},
                           "package_metadata_version": 1}, f, indent=2, sort_keys=True)
        with open(os.path.join(tree, "info", "index.json"), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
        with open(os.path.join(tree, "info", "paths.json"), "w") as f:
            json.dump({"paths": paths, "paths_version": 1}, f, indent=2, sort_keys=True)
        os.makedirs(out_dir, exist_ok=True)
        subprocess.run(["cph", "create", tree, fn, "--out-folder", out_dir], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out_dir, fn), "rb") as f:
        blob = f.read()
    record = dict(index, md5=hashlib.md5(blob).hexdigest(), sha256=hashlib.sha256(blob).hexdigest(),
                  size=len(blob))
    return subdir, fn, fmt, record


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, description = sys.argv[1], sys.argv[2]
    zst = "--zst" in sys.argv[3:]
    with open(description, encoding="utf-8") as f:
        desc = json.load(f)
    indexes = {"noarch": {}}
    for pkg in desc["packages"]:
        subdir, fn, fmt, record = build_package(pkg, os.path.join(out, pkg.get("subdir", "linux-64")))
        doc = indexes.setdefault(subdir, {})
        doc.setdefault("packages.conda" if fmt == "conda" else "packages", {})[fn] = record
    for subdir, doc in indexes.items():
        full = {"info": {"subdir": subdir}, "packages": doc.get("packages", {}),
                "packages.conda": doc.get("packages.conda", {}), "removed": desc.get("removed", []),
                "repodata_version": 1}
        os.makedirs(os.path.join(out, subdir), exist_ok=True)
        path = os.path.join(out, subdir, "repodata.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(full, f, indent=1, sort_keys=True)
        if zst:
            subprocess.run(["zstd", "-q", "-f", "-19", path, "-o", path + ".zst"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
