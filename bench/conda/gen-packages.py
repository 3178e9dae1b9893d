#!/usr/bin/env python3
"""Makes a conda channel of COUNT packages for bench/conda-install.sh from the files of a real root
filesystem: its /usr tree (regular files only, sorted by path) cut into COUNT runs of about equal
size, each packed by conda-package-handling (`cph create`, .conda) as pNN 1.0 h0_0 with a paths.json
and, so that prefix replacement is exercised, one text file holding the placeholder. Package pNN
depends on p(NN-1). Writes OUT/linux-64/*.conda, OUT/linux-64/repodata.json and an empty
OUT/noarch/repodata.json.

Usage: gen-packages.py ROOTFS OUT [COUNT]   (default 60)
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"


def usr_files(rootfs):
    usr = os.path.join(rootfs, "usr")
    out = []
    for root, dirs, files in os.walk(usr):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                out.append((os.path.relpath(path, usr), os.path.getsize(path)))
    return sorted(out)


def groups(files, count):
    total = sum(size for _, size in files)
    out, current, acc = [], [], 0
    for path, size in files:
        current.append(path)
        acc += size
        if acc >= total * (len(out) + 1) / count and len(out) < count - 1:
            out.append(current)
            current = []
    out.append(current)
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build(rootfs, members, n, out_dir):
    name = f"p{n:02d}"
    fn = f"{name}-1.0-h0_0.conda"
    index = {"name": name, "version": "1.0", "build": "h0_0", "build_number": 0, "subdir": "linux-64",
             "depends": [f"p{n - 1:02d}"] if n > 0 else [], "license": "MIT", "timestamp": 1700000000000}
    with tempfile.TemporaryDirectory() as tree:
        paths = []
        for rel in members:
            dst = os.path.join(tree, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(rootfs, "usr", rel), dst)
            os.chmod(dst, 0o755 if os.stat(dst).st_mode & 0o100 else 0o644)
            paths.append({"_path": rel, "path_type": "hardlink", "sha256": sha256_file(dst),
                          "size_in_bytes": os.path.getsize(dst)})
        config = f"etc/{name}/config.txt"
        os.makedirs(os.path.join(tree, "etc", name))
        with open(os.path.join(tree, config), "w") as f:
            f.write("".join(f"path{i} = {PLACEHOLDER}/lib/{name}\n" for i in range(200)))
        paths.append({"_path": config, "path_type": "hardlink", "sha256": sha256_file(os.path.join(tree, config)),
                      "size_in_bytes": os.path.getsize(os.path.join(tree, config)),
                      "prefix_placeholder": PLACEHOLDER, "file_mode": "text"})
        os.makedirs(os.path.join(tree, "info"))
        with open(os.path.join(tree, "info", "index.json"), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
        with open(os.path.join(tree, "info", "paths.json"), "w") as f:
            json.dump({"paths": sorted(paths, key=lambda p: p["_path"]), "paths_version": 1}, f, indent=2,
                      sort_keys=True)
        subprocess.run(["cph", "create", tree, fn, "--out-folder", out_dir], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    blob_path = os.path.join(out_dir, fn)
    with open(blob_path, "rb") as f:
        blob = f.read()
    return fn, dict(index, md5=hashlib.md5(blob).hexdigest(), sha256=hashlib.sha256(blob).hexdigest(),
                    size=len(blob))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rootfs, out = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    linux = os.path.join(out, "linux-64")
    os.makedirs(linux, exist_ok=True)
    os.makedirs(os.path.join(out, "noarch"), exist_ok=True)
    records = {}
    for n, members in enumerate(groups(usr_files(rootfs), count)):
        fn, record = build(rootfs, members, n, linux)
        records[fn] = record
    for subdir, recs in (("linux-64", records), ("noarch", {})):
        with open(os.path.join(out, subdir, "repodata.json"), "w") as f:
            json.dump({"info": {"subdir": subdir}, "packages": {}, "packages.conda": recs,
                       "repodata_version": 1}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
