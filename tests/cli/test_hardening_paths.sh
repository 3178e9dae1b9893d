#!/usr/bin/env bash
# Hardening (issue 13, findings 2 and 3): a spec or a lock reaches no host file outside the project.
#   - `extends` of a file outside the spec's directory (absolute, ../, through a symlink, a FIFO) is
#     refused before it is read (exit 2), and the file's text never appears; with --allow-outside a
#     file that is not a spec is reported by its location only;
#   - a lock whose artifact URL is file:///OUTSIDE, /OUTSIDE or ../../OUTSIDE is refused before the
#     file is read: exit 2 naming the entry, neither the secret nor its sha256 nor its size in the
#     output, nothing added to the store;
#   - `copy: [{git: /OUTSIDE}]` and a requirements file outside are refused without --allow-outside;
#   - an in-project local apt repository still locks and builds.
# The secret files are world-readable, so each refusal is lockstep's, not the file system's. As root
# and as an unprivileged user.
source "$(dirname "$0")/lib.sh"
need jq gpg dpkg-deb git sha256sum timeout

cleanup() {
  local rc=$?
  set +e
  cd /
  remove_test_user
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
add_test_user lspath

# The secrets, outside every project, readable by everyone.
MARK="LSSECRET-$$-7f3a"
mkdir -p "$WORK/outside"
SECRET="$WORK/outside/shadow"
# shellcheck disable=SC2016 # a literal password hash, not an expansion
printf 'root:$6$%s$hash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n' "$MARK" >"$SECRET"
DOCKER="$WORK/outside/config.json"
printf '{"auths": {"registry.example.org": {"auth": "%s"}}}\n' "$MARK" >"$DOCKER"
printf 'env: {TEAM: ml}\n' >"$WORK/outside/base.yaml"
printf '%s==1.0\n' "$MARK" >"$WORK/outside/requirements.txt"
mkfifo "$WORK/outside/fifo"
git init -q "$WORK/outside/repo"
git -C "$WORK/outside/repo" -c user.email=t@e -c user.name=t commit -q --allow-empty -m "$MARK"
git -C "$WORK/outside/repo" tag v1
git -C "$WORK/outside/repo" gc -q # a pack and packed-refs, for the symlinked bare repository below
chmod -R a+rX "$WORK/outside"
chmod a+rw "$WORK/outside/fifo"
SECRET_SHA=$(sha256sum "$SECRET" | cut -d' ' -f1)
SECRET_SIZE=$(stat -c %s "$SECRET")

fixture_repo make-repo.sh "$WORK/repo-src" >/dev/null 2>&1 || fail "make-repo.sh failed"

# Runs `lockstep ARGS` in the current directory as $AS with the store $CACHE; sets OUT, ERR, RC.
# A run that hangs (a FIFO opened) ends after 30 s with RC 124.
lx() {
  set +e
  if [ "$AS" = root ]; then
    OUT=$(timeout 30 env LOCKSTEP_CACHE="$CACHE" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  else
    OUT=$(timeout 30 runuser -u "$AS" -- env LOCKSTEP_CACHE="$CACHE" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  fi
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# The last run showed nothing of the secrets: no marker, no sha256 or size of the shadow file.
assert_no_secret() { # WHAT
  case "$OUT$ERR" in
    *"$MARK"* | *"$SECRET_SHA"* | *"daemon:*"*) fail "$1: the output shows the secret: $OUT $ERR" ;;
  esac
  case "$ERR" in
    *"has $SECRET_SIZE bytes"*) fail "$1: the output tells the secret's size: $ERR" ;;
  esac
}

# The store holds nothing of the secret.
assert_store_clean() { # WHAT
  [ ! -e "$CACHE/blobs/sha256/$SECRET_SHA" ] || fail "$1: the secret was copied into the store"
  if [ -d "$CACHE" ] && grep -rqa -- "$MARK" "$CACHE"; then
    fail "$1: the store holds the secret's text"
  fi
}

spec() { # EXTRA-YAML
  printf 'lockstep: 1\nname: paths\n%s\n' "$1" >lockstep.yaml
}

for AS in "${WHO[@]}"; do
  base="$WORK/$AS"
  mkdir -p "$base/proj"
  cp -r "$WORK/repo-src" "$base/proj/repo"
  [ "$AS" = root ] || chown -R "$AS" "$base"
  cd "$base/proj"
  CACHE="$base/cache"

  # ---- extends ---------------------------------------------------------------------------------
  for target in "$SECRET" "../../outside/shadow" "$DOCKER" "../../outside/fifo"; do
    spec "extends: [$target]"
    lx check
    assert_eq 2 "$RC" "$AS: extends $target is refused ($ERR)"
    assert_contains "$ERR" "extends[0]: $target is outside the spec's directory $base/proj" "$AS: the refusal is located"
    assert_contains "$ERR" "use --allow-outside to allow it" "$AS: the refusal says what to do"
    assert_no_secret "$AS: extends $target"
  done
  pass "$AS: extends of a file outside the spec's directory (absolute, ../, a FIFO) is refused unread (exit 2)"

  ln -sf "$SECRET" team.yaml
  spec "extends: team.yaml"
  lx check
  assert_eq 2 "$RC" "$AS: extends through a symlink that leads outside ($ERR)"
  assert_contains "$ERR" "extends: team.yaml leads outside $base/proj through a symlink (to $SECRET)" \
    "$AS: the symlink is named"
  assert_no_secret "$AS: extends through a symlink"
  rm team.yaml
  pass "$AS: extends through a symlink that leads outside is refused unread"

  spec "extends: [$WORK/outside/base.yaml]"
  lx check --allow-outside
  assert_eq 0 "$RC" "$AS: extends outside with --allow-outside ($ERR)"
  for target in "$SECRET" "$DOCKER"; do
    spec "extends: [$target]"
    lx check --allow-outside
    assert_eq 2 "$RC" "$AS: --allow-outside extends of a file that is not a spec ($ERR)"
    assert_contains "$ERR" "$target:1:1: error: not a spec: " "$AS: the error names the file's location"
    assert_no_secret "$AS: --allow-outside extends $target"
    case "$ERR" in *" | "*) fail "$AS: a source line of $target is shown: $ERR" ;; esac
  done
  pass "$AS: --allow-outside lets extends leave the directory; a file that is not a spec shows its location only"

  # ---- paths in the spec ------------------------------------------------------------------------
  spec "copy: [{git: $WORK/outside/repo, rev: v1, to: /src}]"
  for cmd in check lock; do
    lx "$cmd"
    assert_eq 2 "$RC" "$AS: $cmd with copy.git outside ($ERR)"
    assert_contains "$ERR" "copy[0].git: $WORK/outside/repo is outside the spec's directory $base/proj" \
      "$AS: $cmd names the git source"
    assert_no_secret "$AS: $cmd copy.git outside"
  done
  [ ! -e "$CACHE/git" ] || [ -z "$(ls -A "$CACHE/git")" ] || fail "$AS: the outside repository was fetched"
  spec "copy: [{git: \"file://$WORK/outside/repo\", rev: v1, to: /src}]"
  lx check
  assert_eq 2 "$RC" "$AS: copy.git file:// outside ($ERR)"
  spec "copy: [{git: $WORK/outside/repo, rev: v1, to: /src}]"
  lx check --allow-outside
  assert_eq 0 "$RC" "$AS: copy.git outside with --allow-outside ($ERR)"
  pass "$AS: copy.git of a repository outside is refused without --allow-outside, and nothing is fetched"

  # A bare repository inside whose objects/pack, refs/heads and packed-refs are symlinks into the
  # outside repository's (git stores symlinks: a commit can ship this).
  rm -rf inner.git
  git init -q --bare inner.git
  rm -rf inner.git/objects/pack inner.git/refs/heads
  for p in objects/pack refs/heads packed-refs; do
    ln -s "$WORK/outside/repo/.git/$p" "inner.git/$p"
  done
  [ "$AS" = root ] || chown -R "$AS" inner.git
  spec "copy: [{git: ./inner.git, rev: v1, to: /src}]"
  for cmd in check lock; do
    lx "$cmd"
    assert_eq 2 "$RC" "$AS: $cmd with a bare repository symlinked outside ($ERR)"
    assert_contains "$ERR" "(a symlink) makes git read $WORK/outside/repo/.git/" "$AS: $cmd names the symlink"
    assert_contains "$ERR" "outside $base/proj; use --allow-outside" "$AS: $cmd says what to do"
  done
  [ ! -e "$CACHE/git" ] || [ -z "$(ls -A "$CACHE/git")" ] || fail "$AS: the symlinked repository was fetched"
  rm -rf inner.git
  # The same through an alternates object directory inside (outside the git directory's own walk):
  # its pack directory is a symlink outside.
  git init -q --bare inner.git
  mkdir -p alt-objects/info
  ln -s "$WORK/outside/repo/.git/objects/pack" alt-objects/pack
  echo "$base/proj/alt-objects" >inner.git/objects/info/alternates
  [ "$AS" = root ] || chown -R "$AS" inner.git alt-objects
  lx check
  assert_eq 2 "$RC" "$AS: check with alternates whose pack is a symlink outside ($ERR)"
  assert_contains "$ERR" "its pack (a symlink) makes git read $WORK/outside/repo/.git/" "$AS: the alternates' symlink is named"
  rm -rf inner.git alt-objects
  pass "$AS: a bare repository inside whose packs and refs (or an alternate's pack) are symlinks outside is refused, nothing fetched"

  spec "repos: [{pypi: https://pypi.example.org/simple}]
packages: {pip: [{requirements: ../../outside/requirements.txt}]}"
  lx check
  assert_eq 2 "$RC" "$AS: a requirements file outside ($ERR)"
  assert_contains "$ERR" "requirements: ../../outside/requirements.txt is outside the spec's directory" \
    "$AS: the requirements file is named"
  assert_no_secret "$AS: requirements outside"
  pass "$AS: a requirements file outside the spec's directory is refused unread"

  # ---- the lock's local files -------------------------------------------------------------------
  spec "repos:
  - {apt: repo, suite: lstest, components: [main], keyring: repo/keyring.gpg}
packages: {apt: [ls-data]}
outputs: {oci: out}"
  lx lock
  assert_eq 0 "$RC" "$AS: lock from an in-project local repository ($ERR)"
  url=$(jq -r '.artifacts[] | select(.name == "ls-data") | .url' lockstep.lock)
  assert_eq "repo/pool/main/l/ls-data/ls-data_1.0-1_all.deb" "$url" "$AS: the lock records the local file relative to the spec"
  lx build --locked --no-vcs
  assert_eq 0 "$RC" "$AS: build from an in-project local repository ($ERR)"
  pass "$AS: a local apt repository inside the project locks and builds"
  cp lockstep.lock good.lock

  for bad in "file://$SECRET" "$SECRET" "../../outside/shadow"; do
    sed "s|\"$url\"|\"$bad\"|" good.lock >lockstep.lock
    grep -qF "\"$bad\"" lockstep.lock || fail "$AS: the lock edit did not apply"
    rm -rf out "$CACHE"
    lx build --locked --no-vcs
    assert_eq 2 "$RC" "$AS: a lock naming $bad is refused ($ERR)"
    assert_contains "$ERR" "the lock names local files outside the spec's directory $base/proj" "$AS: $bad: the refusal"
    assert_contains "$ERR" "deb ls-data 1.0-1 (url $bad) leads to $SECRET" "$AS: $bad: the lock entry is named"
    assert_contains "$ERR" "lock again with \`lockstep lock\`" "$AS: $bad: what to do"
    assert_no_secret "$AS: lock url $bad"
    assert_store_clean "$AS: lock url $bad"
    [ ! -e out ] || fail "$AS: $bad: a refused build wrote output"
  done
  cp good.lock lockstep.lock
  pass "$AS: lock URLs file:///OUTSIDE, /OUTSIDE and ../../OUTSIDE are refused before reading; nothing is stored"
  cd "$WORK"
done

done_testing
