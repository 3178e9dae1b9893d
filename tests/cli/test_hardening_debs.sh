#!/usr/bin/env bash
# Hardening (issue 13, finding 6b): every image lockstep builds from .debs, it can also run. Images
# are built from the fixture repository (tests/fixtures/apt/make-repo.sh) plus packages made here
# by hand, hostile ones included: a package shipping a symbolic link `usr/foo -> /opt/elsewhere`
# (or `-> /tmp`) and files below `usr/foo/`. For each build: either it is refused (exit 2, naming
# the package and the path) or `lockstep exec IMAGE true` succeeds. A package whose link leads to
# a directory of its own layer builds, and its files are where the link leads. As root and as an
# unprivileged user.
source "$(dirname "$0")/lib.sh"
need jq tar gpg dpkg-deb python3 xz busybox

cleanup() {
  local rc=$?
  set +e
  stop_http_server
  cd /
  remove_test_user
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
add_test_user lsdeb

# make_deb FILE NAME MEMBER...: a .deb written member by member, in the order given (dpkg-deb builds
# from a directory tree, which can't hold files below a symbolic link). MEMBER: d:PATH, f:PATH:TEXT,
# l:PATH:TARGET.
make_deb() {
  python3 - "$@" <<'PY'
import io, sys, tarfile
out, name, members = sys.argv[1], sys.argv[2], sys.argv[3:]
EPOCH = 1704067200
def tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for kind, path, arg in entries:
            ti = tarfile.TarInfo(path)
            ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = EPOCH, 0, 0, "root", "root"
            if kind == "d":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            elif kind == "l":
                ti.type, ti.mode, ti.linkname = tarfile.SYMTYPE, 0o777, arg
                t.addfile(ti)
            else:
                data = arg.encode()
                ti.mode, ti.size = 0o644, len(data)
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()
control = (f"Package: {name}\nVersion: 1.0-1\nArchitecture: all\n"
           "Maintainer: lockstep tests <tests@example.invalid>\nPriority: optional\n"
           f"Description: hand-made test package {name}\n")
entries = [("d", "./", "")]
for m in members:
    kind, rest = m.split(":", 1)
    path, _, arg = rest.partition(":")
    entries.append((kind, path, arg))
parts = [("debian-binary", b"2.0\n"), ("control.tar", tar([("f", "./control", control)])),
         ("data.tar", tar(entries))]
with open(out, "wb") as f:
    f.write(b"!<arch>\n")
    for member, data in parts:
        f.write(f"{member:<16}{EPOCH:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode())
        f.write(data + (b"\n" if len(data) % 2 else b""))
PY
}

# The hand-made packages go into the fixture repository's pool before it is indexed and signed.
pool="$WORK/repo/pool/main/l"
mkdir -p "$pool/ls-evil-abs" "$pool/ls-evil-tmp" "$pool/ls-linked"
make_deb "$pool/ls-evil-abs/ls-evil-abs_1.0-1_all.deb" ls-evil-abs \
  d:./usr/ l:./usr/foo:/opt/elsewhere f:./usr/foo/bar:escaped
make_deb "$pool/ls-evil-tmp/ls-evil-tmp_1.0-1_all.deb" ls-evil-tmp \
  d:./usr/ l:./usr/foo:/tmp f:./usr/foo/bar:escaped
make_deb "$pool/ls-linked/ls-linked_1.0-1_all.deb" ls-linked \
  d:./usr/ d:./usr/share/ d:./usr/share/ls-linked/ f:./usr/share/ls-linked/a:a \
  l:./usr/zz-linked:share/ls-linked f:./usr/zz-linked/b:linked-b f:./usr/zz-linked/sub/c:linked-c
dpkg-deb -c "$pool/ls-evil-abs/ls-evil-abs_1.0-1_all.deb" | grep -q './usr/foo/bar' ||
  fail "dpkg-deb does not list the hostile package's file below its symlink"
"$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-repo.sh" "$WORK/repo" --with-tools >/dev/null 2>&1 ||
  fail "make-repo.sh failed"
start_http_server "$WORK/repo"
trap cleanup EXIT # start_http_server chained its own; cleanup stops the server

# Runs `lockstep ARGS` in the current directory as $AS with the store $CACHE; sets OUT, ERR, RC.
lx() {
  set +e
  if [ "$AS" = root ]; then
    OUT=$(env LOCKSTEP_CACHE="$CACHE" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  else
    OUT=$(runuser -u "$AS" -- env LOCKSTEP_CACHE="$CACHE" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  fi
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# Builds an image of PACKAGES into ./out; sets BUILT to 1 when the build succeeded, 0 when it was
# refused as invalid input. Any image it builds must run `true`.
build_and_run() { # PACKAGES
  cat >lockstep.yaml <<YAML
lockstep: 1
name: debs
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: keyring.gpg}
packages:
  apt: [$1]
outputs: {oci: out}
YAML
  [ "$AS" = root ] || chown "$AS" lockstep.yaml
  rm -rf out lockstep.lock
  lx build --no-vcs
  if [ "$RC" = 0 ]; then
    BUILT=1
    lx exec oci:out true
    assert_eq 0 "$RC" "$AS: [$1]: lockstep built the image, so it must run it ($ERR)"
  else
    BUILT=0
    assert_eq 2 "$RC" "$AS: [$1]: a build that fails is refused as invalid input ($ERR)"
    [ ! -e out ] || fail "$AS: [$1]: a refused build wrote output"
  fi
}

for AS in "${WHO[@]}"; do
  base="$WORK/$AS"
  mkdir -p "$base"
  [ "$AS" = root ] || chown "$AS" "$base"
  cd "$base"
  cp "$WORK/repo/keyring.gpg" . # a keyring lies in the spec's directory (docs/spec.md, "Paths")
  CACHE="$base/cache"

  for set in "ls-dpkg" "ls-dpkg, ls-app, ls-app2, ls-user, ls-tools, ls-essential" "ls-dpkg, ls-scripted"; do
    build_and_run "$set"
    assert_eq 1 "$BUILT" "$AS: the fixture packages [$set] build ($ERR)"
  done
  pass "$AS: images of the fixture repository's packages build and run"

  for evil in ls-evil-abs ls-evil-tmp; do
    build_and_run "ls-dpkg, $evil"
    assert_eq 0 "$BUILT" "$AS: a package with files below its link out of the layer ($evil) is refused"
    assert_contains "$ERR" "$evil 1.0-1 ($HTTP_URL/pool/main/l/$evil/${evil}_1.0-1_all.deb): /usr/foo/bar would go below /usr/foo, a symbolic link to" \
      "$AS: the refusal names the package and the path"
  done
  pass "$AS: packages with files below their own symlink to /opt/elsewhere or /tmp are refused at build (exit 2)"

  build_and_run "ls-dpkg, ls-linked"
  assert_eq 1 "$BUILT" "$AS: a package whose link leads to its own directory builds ($ERR)"
  lx exec oci:out cat /usr/zz-linked/b /usr/share/ls-linked/sub/c
  assert_eq 0 "$RC" "$AS: exec cat ($ERR)"
  assert_eq "linked-blinked-c" "$OUT" "$AS: the files below the link are where it leads"
  pass "$AS: a package's files below its own link to a directory of its layer land there, and the image runs"
  cd "$WORK"
done

done_testing
