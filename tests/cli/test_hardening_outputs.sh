#!/usr/bin/env bash
# Hardening (issue 13, finding 6c): a build leaves nothing of itself under a temporary name. Each
# output kind (OCI layout, oci-archive, docker-archive, SIF) is built cold (empty store), then
# cached twice (a cached SIF is re-exported as a hard link of the same inode, where rename(2)
# is a no-op), and after each build the output directory holds exactly the output's name, and
# nothing named .lockstep-* exists anywhere (outputs, store, unpacked roots). The same after builds
# that fail: a failing run: step (over fresh and over existing outputs) and a SIF whose publish
# fails (its path is a directory), cold and cached. As root and as an unprivileged user.
source "$(dirname "$0")/lib.sh"
need busybox find

cleanup() {
  local rc=$?
  set +e
  cd /
  remove_test_user
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
add_test_user lsout

# Runs `lockstep ARGS` as $AS (root or the test user) with the store $CACHE; sets OUT, ERR, RC.
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

# The names in DIR (with dot files), sorted, space-separated.
names_in() { (cd "$1" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//'); }

# Fails when anything below ROOT is named .lockstep-* (a temporary file, a staged or set-aside
# directory) or an unpacked-root build directory is left in the store.
no_leftovers() { # ROOT WHAT
  local left
  left=$(find "$1" -name '.lockstep-*' -printf '%P\n' 2>/dev/null | LC_ALL=C sort)
  [ -z "$left" ] || fail "$2: left behind under temporary names: $left"
  if [ -d "$CACHE/roots/tmp" ]; then
    left=$(names_in "$CACHE/roots/tmp")
    [ -z "$left" ] || fail "$2: an unpacked root's build directory is left in the store: $left"
  fi
}

# Checks the output directory DIR after a build of KIND named NAME.
check_output() { # KIND DIR NAME WHAT
  local kind=$1 dir=$2 name=$3 what=$4 odd
  assert_eq "$name" "$(names_in "$dir")" "$what: the output directory holds only the output"
  if [ "$kind" = oci ]; then
    assert_eq "blobs index.json oci-layout" "$(names_in "$dir/$name")" "$what: the layout's top level"
    assert_eq "sha256" "$(names_in "$dir/$name/blobs")" "$what: the layout's blobs/"
    odd=$(find "$dir/$name/blobs/sha256" -mindepth 1 -printf '%P\n' | grep -Ev '^[0-9a-f]{64}$' || true)
    [ -z "$odd" ] || fail "$what: blobs/sha256 holds names that are not digests: $odd"
  else
    if [ ! -f "$dir/$name" ] || [ ! -s "$dir/$name" ]; then
      fail "$what: $dir/$name is not a non-empty file"
    fi
  fi
}

for AS in "${WHO[@]}"; do
  base="$WORK/$AS"
  mkdir -p "$base"
  cd "$base"
  make_busybox_root rootfs
  cat >ok.yaml <<'YAML'
lockstep: 1
name: outputs
copy: [{from: ./rootfs, to: /, mode: preserve}]
run:
  - echo built > /etc/built
YAML
  cat >fail.yaml <<'YAML'
lockstep: 1
name: outputs
copy: [{from: ./rootfs, to: /, mode: preserve}]
run:
  - echo the step fails on purpose; false
YAML
  [ "$AS" = root ] || chown -R "$AS" "$base"

  # --- every output kind: cold, cached, cached again ------------------------------------------
  for kind in oci oci-archive docker-archive sif; do
    case $kind in
      oci) name=image ;;
      oci-archive) name=image.oci.tar ;;
      docker-archive) name=image.docker.tar ;;
      sif) name=image.sif ;;
    esac
    CACHE="$base/cache-$kind"
    digest=""
    for round in cold cached "cached again"; do
      lx build ok.yaml --no-vcs "--$kind" "out-$kind/$name"
      assert_eq 0 "$RC" "$AS: $kind $round build ($ERR)"
      [ -z "$digest" ] || assert_eq "$digest" "$(last_line "$OUT")" "$AS: $kind $round digest"
      digest=$(last_line "$OUT")
      check_output "$kind" "out-$kind" "$name" "$AS: $kind $round"
      no_leftovers "$base" "$AS: $kind $round"
    done
    pass "$AS: $kind built cold, cached and cached again leaves only $name"
  done

  # --- a build that fails in a run: step ------------------------------------------------------
  CACHE="$base/cache-sif"
  all_kinds=(--oci out-fail/image --oci-archive out-fail/image.oci.tar
    --docker-archive out-fail/image.docker.tar --sif out-fail/image.sif)
  lx build fail.yaml --no-vcs "${all_kinds[@]}"
  assert_eq 1 "$RC" "$AS: a failing step fails the build ($ERR)"
  assert_contains "$ERR" "the step fails on purpose" "$AS: the failing step ran"
  [ ! -e out-fail ] || assert_eq "" "$(names_in out-fail)" "$AS: a failed build wrote no output"
  no_leftovers "$base" "$AS: failed build"
  before=$(cd out-sif && sha256sum image.sif)
  lx build fail.yaml --no-vcs --oci out-oci/image --oci-archive out-oci-archive/image.oci.tar \
    --docker-archive out-docker-archive/image.docker.tar --sif out-sif/image.sif
  assert_eq 1 "$RC" "$AS: a failing step over existing outputs ($ERR)"
  check_output oci out-oci image "$AS: failed build over a layout"
  check_output oci-archive out-oci-archive image.oci.tar "$AS: failed build over an oci-archive"
  check_output docker-archive out-docker-archive image.docker.tar "$AS: failed build over a docker-archive"
  check_output sif out-sif image.sif "$AS: failed build over a SIF"
  assert_eq "$before" "$(cd out-sif && sha256sum image.sif)" "$AS: the earlier SIF is untouched"
  no_leftovers "$base" "$AS: failed build over existing outputs"
  pass "$AS: a build whose run: step fails leaves no output and no temporary name, and earlier outputs as they were"

  # --- a SIF whose publish fails (its path is a directory): from the cache, then built cold -----
  mkdir -p out-blocked/image.sif
  [ "$AS" = root ] || chown -R "$AS" out-blocked
  for round in cached cold; do
    [ "$round" = cached ] || CACHE="$base/cache-blocked"
    lx build ok.yaml --no-vcs --sif out-blocked/image.sif
    [ "$RC" != 0 ] || fail "$AS: a SIF over a directory ($round) succeeded"
    assert_eq "image.sif" "$(names_in out-blocked)" "$AS: a failed SIF publish ($round) leaves only what was there"
    assert_eq "" "$(names_in out-blocked/image.sif)" "$AS: the directory in the way ($round) is untouched"
    no_leftovers "$base" "$AS: failed SIF publish ($round)"
  done
  pass "$AS: a SIF whose publish fails, from the cache or built cold, leaves no temporary name"
  cd "$WORK"
done

done_testing
