#!/usr/bin/env bash
# apt packages and the stack over an image base (issue 16), against the signed fixture repository
# served on 127.0.0.1 (tests/fixtures/apt/make-repo.sh): a base image made by lockstep with some
# packages (one of them held, with `dpkg --set-selections` in a run: step) and an apt source list;
# then specs over it:
#   - the base's installed packages count as installed: only what is missing is locked;
#   - a request for an installed package upgrades it to the candidate, and the lock says so;
#   - a held package is never changed: a request for it is refused, naming the hold;
#   - the base's sources the spec lacks are warned about by lock and check, with the entry to add;
#   - the stack uses the base's CUDA, and another stack.cuda is refused at stack.cuda;
#   - builds over the base: the base's packages and the new ones in one dpkg database (holds kept),
#     `dpkg --audit` clean inside, `lockstep verify --lock` passes for base and new packages alike;
#     an upgraded package's dropped file and old maintainer-script files are whited out, its preinst
#     runs as "upgrade OLD" and its postinst as "configure OLD".
source "$(dirname "$0")/lib.sh"
need jq tar gpg gpgconf dpkg-deb python3 xz skopeo

fixture_repo make-repo.sh repo --with-tools --with-mpi-facts >/dev/null 2>&1 ||
  fail "make-repo.sh failed"
start_http_server "$WORK/repo"

# A second, flat repository with ls-old 1.0-1 (files keep and drop, a postinst) and 2.0-1 (keep only,
# a preinst and a postinst that record their arguments).
make_flat_repo() { # DIR
  local dir=$1 stage version
  mkdir -p "$dir"
  for version in 1.0-1 2.0-1; do
    stage=$(mktemp -d "$WORK/stage.XXXXXX")
    mkdir -p "$stage/DEBIAN" "$stage/usr/share/ls-old"
    echo "keep $version" >"$stage/usr/share/ls-old/keep"
    if [ "$version" = 1.0-1 ]; then
      echo "drop" >"$stage/usr/share/ls-old/drop"
    else
      printf '#!/bin/sh\necho "preinst $*" >>/ls-old.log\n' >"$stage/DEBIAN/preinst"
    fi
    printf '#!/bin/sh\necho "postinst %s $*" >>/ls-old.log\n' "$version" >"$stage/DEBIAN/postinst"
    chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/preinst" 2>/dev/null || true
    printf 'Package: ls-old\nVersion: %s\nArchitecture: amd64\nMaintainer: t <t@example.invalid>\nDescription: old\n' \
      "$version" >"$stage/DEBIAN/control"
    find "$stage" -exec touch -h -d @1704067200 {} +
    dpkg-deb --root-owner-group -Zxz --build "$stage" "$dir/ls-old_${version}_amd64.deb" >/dev/null
    rm -rf "$stage"
  done
  sign_flat_repo "$dir" lockstep-over-base-test
}
make_flat_repo "$WORK/repo/old"

# ---- the base: ls-dpkg (a shell and dpkg), ls-lib 1.0-1 held, ls-data, cuda-cudart-12-1 ----------
mkdir -p files
printf 'deb http://archive.example/debian lstest main contrib\n' >files/sources.list
cat >base.yaml <<YAML
lockstep: 1
name: base
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: repo/keyring.gpg}
  - {apt: $HTTP_URL/old, flat: true, keyring: repo/old/keyring.gpg}
packages:
  apt: [ls-dpkg, "ls-lib=1.0-1", ls-data, cuda-cudart-12-1, "libopenmpi3=4.1.4-3+b1", "ls-old=1.0-1"]
copy: [{from: files/sources.list, to: /etc/apt/sources.list}]
run:
  - sh: echo ls-lib hold | /usr/bin/dpkg --set-selections
outputs: {oci: base}
YAML
ls_run build base.yaml
assert_eq 0 "$RC" "the base image: $ERR"

over() { # APT [EXTRA]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: over
base: {oci: base}
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: repo/keyring.gpg}
  - {apt: $HTTP_URL/old, flat: true, keyring: repo/old/keyring.gpg}
packages:
  apt: [$1]
${2:-}
outputs: {oci: out}
YAML
  rm -f lockstep.lock
}

# ---- only what is missing ---------------------------------------------------------------------------
over "ls-app, ls-user"
ls_run lock
assert_eq 0 "$RC" "lock over the base: $ERR"
assert_eq "ls-app ls-prov ls-user" "$(jq -r '[.artifacts[].name] | join(" ")' lockstep.lock)" \
  "ls-lib and ls-data, installed in the base, are not locked again"
assert_eq "$(skopeo inspect --raw oci:base 2>/dev/null | sha256sum | cut -d' ' -f1)" \
  "$(jq -r .base.manifest lockstep.lock | cut -d: -f2)" "the lock pins the base's manifest"
assert_contains "$ERR" "the base image's /etc/apt/sources.list:1 has \`deb http://archive.example/debian lstest main contrib\`, whose component contrib the spec's repos lack" \
  "lock warns about the base's sources the spec lacks"
assert_contains "$ERR" "  - {apt: http://archive.example/debian, suite: lstest, components: [main, contrib], keyring: KEYRING}" \
  "the warning shows the repos entry to add"
ls_run check
assert_eq 0 "$RC" "check: $ERR"
assert_contains "$ERR" "whose component contrib the spec's repos lack" "check warns too, from what lock read"
pass "over a base image, its installed packages count as installed; its extra sources are warned about"

rm -rf out
ls_run build --locked
assert_eq 0 "$RC" "build over the base: $ERR"
ls_run exec oci:out -- /usr/bin/dpkg --audit
assert_eq "0:" "$RC:$OUT" "dpkg --audit inside the image is clean: $ERR"
ls_run exec oci:out -- /usr/bin/dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n'
assert_eq "ii  cuda-cudart-12-1 12.1.105-1
ii  libfabric1 1:1.17.0-3
ii  libopenmpi3 4.1.4-3+b1
ii  libpmix2 4.2.2-1+deb12u1
ii  libucx0 1.13.1-1
ii  ls-app 1.0-1
ii  ls-data 1.0-1
ii  ls-dpkg 1.0-1
hi  ls-lib 1.0-1
ii  ls-old 1.0-1
ii  ls-prov 1.0-1
ii  ls-user 1.0-1" "$(sed 's/ *$//' <<<"$OUT" | sort -k2)" "dpkg knows the base's packages (the hold kept) and the new ones"
ls_run verify oci:out --lock lockstep.lock
assert_eq 0 "$RC" "verify --lock over the base: $OUT $ERR"
assert_contains "$OUT" "against lockstep.lock: ok" "verify --lock passes for base and new packages alike"
pass "the image over the base: one dpkg database, dpkg --audit clean, verify --lock passes"

# ---- upgrades ------------------------------------------------------------------------------------------
over "libopenmpi3"
ls_run lock
assert_eq 0 "$RC" "lock an upgrade of a base package: $ERR"
assert_eq "libopenmpi3 4.1.5-1: upgrades base's libopenmpi3 4.1.4-3+b1 -> 4.1.5-1, requested by packages.apt[0]" \
  "$(jq -r '.artifacts[] | "\(.name) \(.version): \(.reason)"' lockstep.lock)" "the lock records the upgrade"
assert_contains "$ERR" "upgrades base's libopenmpi3 4.1.4-3+b1 -> 4.1.5-1" "lock prints it"
pass "a request for an installed package moves it to the candidate; the lock says so"

over "ls-old"
ls_run lock
assert_eq 0 "$RC" "lock the upgrade of ls-old: $ERR"
rm -rf out
ls_run build --locked
assert_eq 0 "$RC" "build the upgrade over the base: $ERR"
ls_run exec oci:out -- /bin/sh -c 'cat /ls-old.log; ls /usr/share/ls-old; ls /var/lib/dpkg/info | grep ls-old; /usr/bin/dpkg --audit'
assert_eq 0 "$RC" "inspect the upgrade: $ERR"
assert_eq "postinst 1.0-1 configure
preinst upgrade 1.0-1
postinst 2.0-1 configure 1.0-1
keep
ls-old.list
ls-old.md5sums
ls-old.postinst
ls-old.preinst" "$(sed 's/ *$//' <<<"$OUT")" "preinst upgrade OLD, postinst configure OLD; the dropped file is gone; dpkg --audit is clean"
ls_run verify oci:out --lock lockstep.lock
assert_eq 0 "$RC" "verify --lock after an upgrade: $OUT $ERR"
pass "an upgrade over the base runs preinst upgrade and postinst configure with the old version and drops what the new version doesn't ship"

# ---- holds --------------------------------------------------------------------------------------------
over "ls-lib"
ls_run lock
assert_eq 2 "$RC" "a request for a held package with a newer version"
assert_contains "$ERR" "packages.apt[0] asks for ls-lib, which the base image holds at 1.0-1 (apt-mark hold); apt would move it to 2.0-1, and lockstep never changes a held package: ask for ls-lib=1.0-1 or drop the request" \
  "the refusal names the hold and what to do"
[ ! -e lockstep.lock ] || fail "a refused lock was written"
over '"ls-lib=1.0-1"'
ls_run lock
assert_eq 0 "$RC" "pinning the held version: $ERR"
assert_eq 0 "$(jq '.artifacts | length' lockstep.lock)" "the held version is the base's: nothing to lock"
pass "a held package is never changed; a request that would change it is refused with what to do"

# ---- the stack over the base's CUDA --------------------------------------------------------------------
over "ls-data" 'stack: {cuda: "12.1"}'
ls_run lock
assert_eq 0 "$RC" "stack cuda 12.1 over a base with cuda-cudart-12-1: $ERR"
assert_eq 0 "$(jq '[.artifacts[] | select(.name == "cuda-cudart-12-1")] | length' lockstep.lock)" \
  "the base's CUDA runtime is used, not locked again"
assert_contains "$(jq -r '.stack.choices[] | select(.component == "cuda") | .facts | join("\n")' lockstep.lock)" \
  "the base image oci:base has CUDA 12.1 (cuda-cudart-12-1 12.1.105-1 installed)" "the lock records the base's CUDA"
sed -i 's/cuda: "12.1"/cuda: "12.4"/' lockstep.yaml
ls_run lock
assert_eq 2 "$RC" "stack cuda 12.4 over a base with CUDA 12.1"
assert_contains "$ERR" "error: stack.cuda: the base image oci:base has CUDA 12.1 (cuda-cudart-12-1 12.1.105-1 installed), and a stack over it uses that CUDA; ask for cuda: \"12.1\", or build on a base with CUDA 12.4" \
  "lock refuses at stack.cuda, naming the base"
ls_run check
assert_eq 2 "$RC" "check refuses the same stack offline"
assert_contains "$ERR" "error: stack.cuda: the base image oci:base has CUDA 12.1" "check names the base's CUDA"
pass "the stack uses the base's CUDA; another stack.cuda is refused, naming the base"

done_testing
