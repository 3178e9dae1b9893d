#!/usr/bin/env python3
"""Judges an SBOM lockstep wrote (tests/cli/test_sbom.sh, test_mpi_hello.sh).

    sbom_check.py SBOM LOCK [--subject sha256:HEX] [--root ROOTFS]
    sbom_check.py SBOM --packages LIST [--subject sha256:HEX] [--root ROOTFS]

- CycloneDX JSON is validated with python3-jsonschema against the official CycloneDX 1.6 schema
  (tests/data/cyclonedx). SPDX JSON is checked against the clauses of SPDX 2.3 an SBOM reader
  relies on (the document fields, unique element ids, checksums, relationships that name existing
  elements, every LicenseRef- declared), since no official SPDX 2.3 JSON Schema is packaged where
  this suite installs from; every license expression is parsed by python3-license-expression and
  each identifier must be on the SPDX license list (Debian's node-spdx-license-ids) in its canonical
  case, or a declared LicenseRef-.
- Cross-checked with the lock: every artifact of the lock (and its base image) appears exactly once,
  with its version, sha256 and a package URL that decodes to its name and version; nothing else does.
- --packages LIST (an SBOM of an image without its lock): instead of a lock, the packages the
  image's own databases hold, as the peers list them, one per line: "deb NAME VERSION ARCH" (from
  `dpkg-query --admindir=ROOT/var/lib/dpkg -W`), "pypi NAME VERSION" (from the dist-info
  directories), "conda NAME VERSION BUILD" (from conda-meta); each must appear exactly once, with a
  package URL of that type, name, version and architecture or build, and nothing else may.
- --subject: the digest the SBOM must describe.
- --root: an unpacked image (umoci's rootfs). For each locked deb whose
  /usr/share/doc/NAME/copyright is machine-readable (DEP-5), each license short name in it that is
  an SPDX identifier (MIT, ISC, Zlib, BSD-3-clause, Apache-2.0, ...; GNU names are left out, their
  "+" and versions being DEP-5's own) must appear in the package's declared license; a deb whose
  copyright file is not DEP-5 has none declared.
Prints what is wrong and exits 1; prints a summary and exits 0 when all holds.
"""
import argparse
import json
import os
import re
import sys
import urllib.parse

import jsonschema
from license_expression import get_spdx_licensing

HERE = os.path.dirname(os.path.abspath(__file__))
# The SPDX license list's identifiers, as Debian packages them (node-spdx-license-ids).
with open("/usr/share/nodejs/spdx-license-ids/index.json", encoding="utf-8") as _f:
    SPDX_IDS = {i.lower(): i for i in json.load(_f)}
SCHEMAS = os.path.join(HERE, "..", "data", "cyclonedx")
errors = []


def err(msg):
    errors.append(msg)


def load_schema(name):
    with open(os.path.join(SCHEMAS, name), encoding="utf-8") as f:
        return json.load(f)


def validate_cyclonedx(doc):
    bom = load_schema("bom-1.6.SNAPSHOT.schema.json")
    store = {}
    for name in ("spdx.SNAPSHOT.schema.json", "jsf-0.82.SNAPSHOT.schema.json"):
        store["http://cyclonedx.org/schema/" + name] = load_schema(name)
    resolver = jsonschema.RefResolver.from_schema(bom, store=store)
    validator = jsonschema.Draft7Validator(bom, resolver=resolver, format_checker=jsonschema.FormatChecker())
    for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.path)):
        err(f"CycloneDX schema: {'/'.join(map(str, e.path))}: {e.message[:300]}")


SPDX_ID = re.compile(r"^SPDXRef-[A-Za-z0-9.\-]+$")
CREATED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")
LICENSE_REF = re.compile(r"^LicenseRef-[A-Za-z0-9.\-]+$")


def check_expression(licensing, expr, declared_refs, where):
    if expr in ("NOASSERTION", "NONE"):
        return
    try:
        parsed = licensing.parse(expr, validate=False, strict=True)
    except Exception as e:  # noqa: BLE001 - the library raises several kinds
        err(f"{where}: license expression '{expr}' does not parse: {e}")
        return
    for key in licensing.license_keys(parsed):
        if key.startswith("LicenseRef-"):
            if not LICENSE_REF.match(key) or key not in declared_refs:
                err(f"{where}: {key} is not a declared LicenseRef (hasExtractedLicensingInfos)")
        elif SPDX_IDS.get(key.lower()) != key:
            err(f"{where}: '{key}' is not an identifier of the SPDX license list (in its canonical case)")


def check_spdx(doc, licensing):
    for key, want in (("spdxVersion", "SPDX-2.3"), ("dataLicense", "CC0-1.0"), ("SPDXID", "SPDXRef-DOCUMENT")):
        if doc.get(key) != want:
            err(f"SPDX: {key} is {doc.get(key)!r}, not {want!r}")
    if not doc.get("name"):
        err("SPDX: the document has no name")
    ns = doc.get("documentNamespace", "")
    parsed = urllib.parse.urlparse(ns)
    if not parsed.scheme or "#" in ns:
        err(f"SPDX: documentNamespace {ns!r} is not an absolute URI without '#'")
    info = doc.get("creationInfo", {})
    if not CREATED.match(info.get("created", "")):
        err(f"SPDX: creationInfo.created {info.get('created')!r} is not YYYY-MM-DDThh:mm:ssZ")
    creators = info.get("creators", [])
    if not creators or not all(re.match(r"^(Tool|Organization|Person): .+", c) for c in creators):
        err(f"SPDX: creators {creators!r}")
    refs = set()
    for i in doc.get("hasExtractedLicensingInfos", []):
        if not LICENSE_REF.match(i.get("licenseId", "")) or not i.get("extractedText"):
            err(f"SPDX: hasExtractedLicensingInfos entry {i!r}")
        refs.add(i.get("licenseId"))
    ids = {"SPDXRef-DOCUMENT"}
    for p in doc.get("packages", []):
        pid = p.get("SPDXID", "")
        where = f"SPDX package {pid}"
        if not SPDX_ID.match(pid):
            err(f"{where}: SPDXID is not SPDXRef-[A-Za-z0-9.-]+")
        if pid in ids:
            err(f"{where}: SPDXID used twice")
        ids.add(pid)
        if not p.get("name"):
            err(f"{where}: no name")
        dl = p.get("downloadLocation")
        if dl not in ("NOASSERTION", "NONE") and not urllib.parse.urlparse(dl or "").scheme:
            err(f"{where}: downloadLocation {dl!r}")
        for c in p.get("checksums", []):
            if c.get("algorithm") != "SHA256" or not HEX64.match(c.get("checksumValue", "")):
                err(f"{where}: checksum {c!r}")
        for key in ("licenseConcluded", "licenseDeclared"):
            if key in p:
                check_expression(licensing, p[key], refs, f"{where}: {key}")
        for r in p.get("externalRefs", []):
            if r.get("referenceCategory") != "PACKAGE-MANAGER" or r.get("referenceType") != "purl":
                err(f"{where}: externalRef {r!r}")
    rels = doc.get("relationships", [])
    for r in rels:
        for key in ("spdxElementId", "relatedSpdxElement"):
            if r.get(key) not in ids:
                err(f"SPDX relationship {r!r}: {key} names no element")
    if not any(r.get("spdxElementId") == "SPDXRef-DOCUMENT" and r.get("relationshipType") == "DESCRIBES"
               for r in rels):
        err("SPDX: the document DESCRIBES nothing")


def parse_purl(purl):
    """(type, namespace, name, version, qualifiers) of a package URL, decoded."""
    m = re.match(r"^pkg:([a-z0-9.+\-]+)/(.+?)(?:@([^?#]*))?(?:\?([^#]*))?(?:#(.*))?$", purl)
    if not m:
        return None
    kind, path, version, query, _ = m.groups()
    segments = path.split("/")
    name = urllib.parse.unquote(segments[-1])
    namespace = "/".join(urllib.parse.unquote(s) for s in segments[:-1])
    quals = dict(urllib.parse.parse_qsl(query or "", keep_blank_values=False))
    return kind, namespace, name, urllib.parse.unquote(version or ""), quals


def checked_purl(purl):
    """parse_purl's fields, the errors of a malformed package URL reported (None then)."""
    parsed = parse_purl(purl)
    if parsed is None:
        err(f"'{purl}' is not a package URL")
        return None
    if "+" in purl.split("?")[0]:
        err(f"{purl}: '+' must be percent-encoded in a package URL")
    return parsed


def entries(doc):
    """(purl, sha256 hex, version) of each described package but the root."""
    out = []
    if doc.get("spdxVersion"):
        for p in doc.get("packages", []):
            if p.get("SPDXID") == "SPDXRef-image":
                continue
            purls = [r["referenceLocator"] for r in p.get("externalRefs", []) if r.get("referenceType") == "purl"]
            sums = [c["checksumValue"] for c in p.get("checksums", []) if c.get("algorithm") == "SHA256"]
            out.append((purls[0] if purls else "", sums[0] if sums else "", p.get("versionInfo", ""),
                        p.get("licenseDeclared", "NOASSERTION")))
    else:
        for c in doc.get("components", []):
            sums = [h["content"] for h in c.get("hashes", []) if h.get("alg") == "SHA-256"]
            lic = c.get("licenses", [{}])[0].get("expression", "NOASSERTION") if c.get("licenses") else "NOASSERTION"
            out.append((c.get("purl", ""), sums[0] if sums else "", c.get("version", ""), lic))
    return out


def subject_of(doc):
    if doc.get("spdxVersion"):
        for p in doc.get("packages", []):
            if p.get("SPDXID") == "SPDXRef-image":
                return "sha256:" + p["checksums"][0]["checksumValue"]
        return None
    return "sha256:" + doc["metadata"]["component"]["hashes"][0]["content"]


def dep5_names(text):
    """The first-line license names of the Files paragraphs of a DEP-5 copyright file, or None."""
    paragraphs = re.split(r"\n\s*\n", text)
    if not paragraphs or not re.search(r"^Format:.*copyright-format/1\.0", paragraphs[0], re.M | re.I):
        return None
    names = []
    for p in paragraphs:
        if re.search(r"^Files:", p, re.M):
            m = re.search(r"^License:[ \t]*(.*)$", p, re.M)
            if m and m.group(1).strip():
                names.append(m.group(1).strip())
    return names


def check_against_lock(doc, lock, root, licensing):
    want = {}
    for a in lock.get("artifacts", []):
        want.setdefault((a["kind"], a["sha256"]), []).append(a)
    base = lock.get("base")
    got = entries(doc)
    seen = {}
    for purl, sha, version, lic in got:
        parsed = checked_purl(purl)
        if parsed is None:
            continue
        kind, namespace, name, pversion, quals = parsed
        lock_kind = {"deb": "deb", "pypi": "wheel", "conda": "conda", "generic": "git", "oci": "image"}.get(kind)
        if lock_kind == "image":
            if not base or "sha256:" + sha != base.get("manifest"):
                err(f"{purl}: not the lock's base image")
            seen[("image", sha)] = seen.get(("image", sha), 0) + 1
            continue
        matches = want.get((lock_kind, sha), [])
        if not matches:
            err(f"{purl} (sha256 {sha[:12]}) is not in the lock")
            continue
        a = matches[0]
        seen[(lock_kind, sha)] = seen.get((lock_kind, sha), 0) + 1
        if version != a["version"] or pversion != a["version"]:
            err(f"{purl}: version {version!r}/{pversion!r}, the lock has {a['version']!r}")
        if kind == "deb":
            if name != a["name"] or quals.get("arch") != a["arch"] or namespace not in ("debian", "ubuntu"):
                err(f"{purl}: not {a['name']} for {a['arch']}")
            repos = lock.get("repos", [])
            suite = repos[a["repo"]].get("suite", "") if 0 <= a.get("repo", -1) < len(repos) else ""
            if suite in ("bookworm", "bullseye", "jammy", "noble") and not quals.get("distro"):
                err(f"{purl}: no distro qualifier, though its repository is {suite}")
        elif kind == "pypi":
            if name != re.sub(r"[-_.]+", "-", a["name"]).lower():
                err(f"{purl}: not the wheel {a['name']}")
        elif kind == "conda":
            fmt = "tar.bz2" if a["url"].endswith(".tar.bz2") else "conda"
            if (name != a["name"] or quals.get("build") != a.get("build") or quals.get("subdir") != a.get("subdir")
                    or quals.get("type") != fmt or not quals.get("channel")):
                err(f"{purl}: not the conda package {a['name']} {a.get('build')} ({a.get('subdir')}, .{fmt})")
        elif kind == "generic" and quals.get("vcs_url", "").split("@")[-1] != a["version"]:
            err(f"{purl}: vcs_url does not name commit {a['version']}")
        if root and kind == "deb":
            check_deb_license(root, a["name"], lic, licensing, purl)
    for (kind, sha), arts in want.items():
        if seen.get((kind, sha), 0) != 1:
            err(f"{arts[0]['kind']} {arts[0]['name']} {arts[0]['version']} appears {seen.get((kind, sha), 0)} times")
    if base and seen.get(("image", base["manifest"].split(":")[1]), 0) != 1:
        err("the base image does not appear exactly once")
    extra = len(got) - len(want) - (1 if base else 0)
    if extra:
        err(f"{extra} more entries than the lock has artifacts")
    return len(got)


checked_licenses = [0]


def check_deb_license(root, name, declared, licensing, purl):
    path = os.path.join(root, "usr/share/doc", name, "copyright")
    if os.path.islink(os.path.join(root, "usr/share/doc", name)) or not os.path.isfile(path):
        return  # the doc directory is another package's: nothing the deb itself declares
    with open(path, encoding="utf-8", errors="replace") as f:
        names = dep5_names(f.read())
    if names is None:
        if declared not in ("NOASSERTION", ""):
            err(f"{purl}: its copyright file is not DEP-5, yet '{declared}' is declared")
        return
    if declared in ("NOASSERTION", ""):
        err(f"{purl}: its DEP-5 copyright names {names}, the SBOM declares none")
        return
    declared_keys = {k.lower() for k in licensing.license_keys(licensing.parse(declared, validate=False))}
    for n in names:
        # only plain names the SPDX list has, as they are: the mapping of the others is lockstep's choice
        if n.lower() in SPDX_IDS and not n.lower().startswith(("gpl", "lgpl", "agpl", "gfdl")):
            checked_licenses[0] += 1
            if n.lower() not in declared_keys:
                err(f"{purl}: its copyright names '{n}', missing from '{declared}'")


def check_against_packages(doc, path, root, licensing):
    want = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if words:
                want[tuple(words)] = 0
    got = entries(doc)
    for purl, _sha, version, lic in got:
        parsed = checked_purl(purl)
        if parsed is None:
            continue
        kind, namespace, name, pversion, quals = parsed
        if version != pversion:
            err(f"{purl}: version {version!r} differs from the package URL's {pversion!r}")
        if kind == "deb":
            key = ("deb", name, pversion, quals.get("arch", ""))
            if not namespace:
                err(f"{purl}: no vendor")
        elif kind == "pypi":
            key = ("pypi", name, pversion)
        elif kind == "conda":
            key = ("conda", name, pversion, quals.get("build", ""))
        else:
            err(f"{purl}: an image's packages are debs, Python or conda packages")
            continue
        if key not in want:
            err(f"{purl}: {' '.join(key)} is not in the image's package databases")
            continue
        want[key] += 1
        if root and kind == "deb":
            check_deb_license(root, name, lic, licensing, purl)
    for key, n in sorted(want.items()):
        if n != 1:
            err(f"{' '.join(key)} appears {n} times")
    return len(got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sbom")
    ap.add_argument("lock", nargs="?")
    ap.add_argument("--packages")
    ap.add_argument("--subject")
    ap.add_argument("--root")
    args = ap.parse_args()
    if (args.lock is None) == (args.packages is None):
        ap.error("give a LOCK or --packages LIST")
    with open(args.sbom, encoding="utf-8") as f:
        doc = json.load(f)
    lock = None
    if args.lock:
        with open(args.lock, encoding="utf-8") as f:
            lock = json.load(f)
    licensing = get_spdx_licensing()
    if doc.get("bomFormat") == "CycloneDX":
        validate_cyclonedx(doc)
        refs = _all_refs(doc)
        for c in doc.get("components", []):
            for lic in c.get("licenses", []):
                check_expression(licensing, lic.get("expression", ""), refs, c.get("purl"))
    elif doc.get("spdxVersion"):
        check_spdx(doc, licensing)
    else:
        err("neither CycloneDX nor SPDX")
    if args.subject and subject_of(doc) != args.subject:
        err(f"the SBOM describes {subject_of(doc)}, not {args.subject}")
    if lock is not None:
        count = check_against_lock(doc, lock, args.root, licensing)
    else:
        count = check_against_packages(doc, args.packages, args.root, licensing)
    if errors:
        for e in errors[:60]:
            print("sbom_check:", e, file=sys.stderr)
        print(f"sbom_check: {len(errors)} problems", file=sys.stderr)
        return 1
    print(f"ok: {count} packages, {checked_licenses[0]} license names checked")
    return 0


def _all_refs(doc):
    """CycloneDX has no declaration list: any well-formed LicenseRef- is accepted."""
    refs = set()
    for c in doc.get("components", []):
        for lic in c.get("licenses", []):
            refs.update(re.findall(r"LicenseRef-[A-Za-z0-9.\-]+", lic.get("expression", "")))
    return refs


if __name__ == "__main__":
    sys.exit(main())
