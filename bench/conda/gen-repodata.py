#!/usr/bin/env python3
"""Writes a repodata.json shaped like conda-forge's linux-64 (bench/conda-repodata.sh).

Usage: gen-repodata.py RECORDS OUT [--subdir linux-64] [--seed N]

Deterministic for a given seed. About one in ten names has ~30 versions, the rest a few; every
record has conda-forge's fields (build, build_number, depends with version ranges, constrains on
some, license, md5, sha256, size, subdir, timestamp in ms); about 60% sit in "packages.conda", the
rest in "packages" (.tar.bz2), and a tenth of the .conda stems also have a .tar.bz2 twin, as
conda-forge's older builds do.
"""
import argparse
import hashlib
import json
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records", type=int)
    ap.add_argument("out")
    ap.add_argument("--subdir", default="linux-64")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    names = []
    n_names = max(1, a.records // 10)
    for i in range(n_names):
        stem = rng.choice(["lib", "py", "r-", "ros-", "", "", "perl-", "xorg-"])
        names.append(f"{stem}pkg{i:05d}" + rng.choice(["", "-core", "-base", "-devel", ""]))
    pythons = ["3.9", "3.10", "3.11", "3.12"]
    licenses = ["MIT", "BSD-3-Clause", "Apache-2.0", "GPL-3.0-or-later", "LGPL-2.1-only", "MPL-2.0"]
    packages, packages_conda = {}, {}
    made = 0
    while made < a.records:
        name = rng.choice(names)
        major, minor, patch = rng.randint(0, 30), rng.randint(0, 40), rng.randint(0, 20)
        version = rng.choice([f"{major}.{minor}.{patch}", f"{major}.{minor}", f"{major}.{minor}.{patch}.post1",
                              f"{2000 + major}.{minor:02d}.{patch:02d}", f"{major}.{minor}.{patch}rc1"])
        py = rng.choice(pythons)
        h = hashlib.sha1(f"{name}{version}{made}".encode()).hexdigest()[:8]
        build_number = rng.randint(0, 5)
        build = rng.choice([f"py{py.replace('.', '')}h{h}_{build_number}", f"h{h}_{build_number}",
                            f"pyhd8ed1ab_{build_number}", f"cuda120py{py.replace('.', '')}h{h}_{build_number}"])
        deps = []
        for _ in range(rng.randint(1, 12)):
            d = rng.choice(names)
            deps.append(rng.choice([f"{d} >={rng.randint(0, 9)}.{rng.randint(0, 9)},<{rng.randint(10, 20)}.0a0",
                                    d, f"{d} {rng.randint(0, 9)}.*", f"{d} >={rng.randint(0, 9)}.{rng.randint(0, 20)}"]))
        if build.startswith("py"):
            deps += [f"python >={py},<{py[:2]}{int(py[2:]) + 1}.0a0", f"python_abi {py}.* *_cp{py.replace('.', '')}"]
        deps += ["libgcc-ng >=12", "__glibc >=2.17,<3.0.a0"] if rng.random() < 0.5 else []
        rec = {
            "build": build,
            "build_number": build_number,
            "depends": sorted(deps),
            "license": rng.choice(licenses),
            "license_family": "BSD",
            "md5": hashlib.md5(f"{name}{version}{build}".encode()).hexdigest(),
            "name": name,
            "sha256": hashlib.sha256(f"{name}{version}{build}".encode()).hexdigest(),
            "size": rng.randint(2000, 80_000_000),
            "subdir": a.subdir,
            "timestamp": 1_600_000_000_000 + rng.randint(0, 200_000_000_000),
            "version": version,
        }
        if rng.random() < 0.2:
            rec["constrains"] = [f"{rng.choice(names)} >={rng.randint(0, 9)}"]
        if rng.random() < 0.02:
            rec["track_features"] = "pypy"
        stem = f"{name}-{version}-{build}"
        if rng.random() < 0.6:
            if stem + ".conda" in packages_conda:
                continue
            packages_conda[stem + ".conda"] = rec
            made += 1
            if rng.random() < 0.1 and made < a.records:
                packages[stem + ".tar.bz2"] = dict(rec, md5=hashlib.md5(stem.encode()).hexdigest())
                made += 1
        else:
            if stem + ".tar.bz2" in packages:
                continue
            packages[stem + ".tar.bz2"] = rec
            made += 1
    doc = {"info": {"subdir": a.subdir}, "packages": packages, "packages.conda": packages_conda,
           "removed": [], "repodata_version": 1}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
