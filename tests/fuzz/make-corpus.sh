#!/usr/bin/env bash
# Regenerates the seed corpus of the unpack fuzzer (tests/fuzz/corpus/unpack/*.tar): small layer tars,
# benign and hostile, one per case the unpacker must handle. The output is committed; the bytes are
# deterministic (fixed times, owners and order). Needs python3 (its tarfile module writes the odd
# names and types that tar(1) refuses to). "../outside/canary" is the canary the fuzz target plants
# beside the root.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/corpus/unpack"
mkdir -p "$out"
rm -f "$out"/*.tar
python3 - "$out" <<'PY'
import io, sys, tarfile

out = sys.argv[1]

def member(name, kind="file", data=b"", target="", mode=None, uid=0, gid=0, mtime=1000, size=None, xattrs=None):
    info = tarfile.TarInfo(name)
    info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                 "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE,
                 "fifo": tarfile.FIFOTYPE}[kind]
    info.mode = mode if mode is not None else (0o755 if kind == "dir" else 0o777 if kind == "symlink" else 0o644)
    info.uid, info.gid, info.mtime = uid, gid, mtime
    info.uname = info.gname = ""
    info.linkname = target
    if kind in ("chr", "blk"):
        info.devmajor, info.devminor = 1, 3
    if xattrs:
        info.pax_headers = {"SCHILY.xattr." + k: v for k, v in xattrs.items()}
    info.size = len(data) if size is None else size
    return info, data

def write(name, members, fmt=tarfile.PAX_FORMAT, cut=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    data = buf.getvalue()
    # tarfile pads to 10240-byte records; keep the two end blocks only, as layer producers do.
    end = len(data)
    while end >= 1024 and data[end - 512:end] == bytes(512) and data[end - 1024:end - 512] == bytes(512):
        end -= 512
    data = data[:end + 512]
    if cut is not None:
        data = data[:cut]
    with open(f"{out}/{name}.tar", "wb") as f:
        f.write(data)

write("01-plain", [member("./", "dir"), member("bin/", "dir"), member("bin/sh", data=b"#!sh\n", mode=0o755),
                   member("bin/ash", "hardlink", target="bin/sh"), member("etc/", "dir"),
                   member("etc/hostname", data=b"box\n"), member("etc/sh", "symlink", target="/bin/sh")])
write("02-whiteouts", [member("a/", "dir"), member("a/.wh..wh..opq"), member("a/new", data=b"n"),
                       member(".wh.gone"), member("b/.wh.x"), member(".wh..wh.plnk/", "dir")])
write("03-dotdot", [member("../x", data=b"evil"), member("a/../../y", data=b"evil")])
write("04-absolute", [member("/", "dir"), member("/etc/passwd", data=b"evil")])
write("05-symlink-through", [member("etc/", "dir"), member("a", "symlink", target="/etc"),
                             member("a/passwd", data=b"root"), member("b", "symlink", target="../outside"),
                             member("b/canary", data=b"evil")])
write("06-symlink-climb", [member("up", "symlink", target="../.."), member("up/passwd", data=b"x"),
                           member("c", "symlink", target="../outside/canary"), member("c", data=b"over")])
write("07-hardlink-out", [member("x", "hardlink", target="../outside/canary"),
                          member("s", "symlink", target="../outside"), member("y", "hardlink", target="s/canary")])
write("08-hardlink-bad", [member("d/", "dir"), member("x", "hardlink", target="d"),
                          member("y", "hardlink", target="missing"), member("z", "hardlink", target="z")])
write("09-whiteout-names", [member(".wh.."), member("a/.wh..."), member("a/.wh."), member(".wh.a/b")])
write("10-root-symlink", [member(".", "symlink", target="../outside"), member("canary", data=b"evil")])
write("11-devices", [member("dev/null", "chr"), member("dev/sda", "blk"), member("run/fifo", "fifo")])
write("12-truncated", [member("big", data=b"q" * 4096), member("after", data=b"a")], cut=512 + 1000)
write("13-pax-long-xattrs", [member("d" * 120 + "/", "dir"), member("d" * 120 + "/" + "f" * 150, data=b"long"),
                             member("cap", data=b"bin", mode=0o4755, uid=1234, gid=5678,
                                    xattrs={"security.capability": "\x01\x00\x00\x02",
                                            "user.note": "dropped"})])
write("14-replace", [member("d/", "dir"), member("d/x", data=b"x"), member("d", data=b"file now"),
                     member("f", data=b"one"), member("f", data=b"two"), member("f/", "dir"),
                     member("f/y", data=b"y")])
write("15-symlink-loop", [member("l1", "symlink", target="l2"), member("l2", "symlink", target="l1"),
                          member("l1/x", data=b"x"), member("m", "symlink", target="m"), member("m/y", data=b"y")])
write("16-modes", [member("ro/", "dir", mode=0o555), member("ro/f", data=b"r", mode=0o444),
                   member("tmp/", "dir", mode=0o1777), member("s", data=b"s", mode=0o6755, uid=7, gid=8),
                   member("none", data=b"", mode=0o000)], fmt=tarfile.GNU_FORMAT)
write("17-dangling-parent", [member("p", "symlink", target="/nowhere/deep"), member("p/x", data=b"x")])
PY
ls -l "$out"
