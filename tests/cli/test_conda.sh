#!/usr/bin/env bash
# conda natively (docs/conda.md), the lock: a channel of real packages packed by Debian's
# conda-package-handling (tests/cli/conda_channel.py) served on 127.0.0.1, and `lockstep lock`
# solving `packages.conda` from it:
#   - every package pinned by URL, sha256, md5 and size (checked against the files cph wrote) with
#     its whole record and the reason it is there; the channel's subdirs recorded; the same lock twice;
#   - repodata.json.zst read where served, plain repodata.json where not; re-locking (--update)
#     revalidates the cached index (HTTP 304) instead of downloading it;
#   - conda's rules: .conda over a .tar.bz2 twin, constrains bind only when present, a mutex's build
#     chosen by a build glob, a GPU build only with __cuda, __glibc from the image's libc6;
#   - `stack:` over conda: the framework, pytorch-cuda (where a channel has it) and cuda-version as
#     conda requests, __cuda from the stack, the stack report from what conda solved;
#   - a bad MatchSpec is exit 2 with a caret under the byte; an impossible request is exit 2 with
#     the solver's explanation naming the spec entry; a token in a channel URL is refused; changing
#     packages.conda makes the lock stale.
source "$(dirname "$0")/lib.sh"
need jq python3 cph zstd sha256sum md5sum

cat >channel.json <<'JSON'
{"packages": [
 {"name": "python", "version": "3.11.9", "build": "h1_0_cpython", "files": {"bin/python3.11": "py311"},
  "depends": ["__glibc >=2.17,<3.0.a0", "libzlib >=1.2.13,<2.0a0"], "constrains": ["python_abi 3.11.* *_cp311"]},
 {"name": "python", "version": "3.12.4", "build": "h1_0_cpython", "files": {"bin/python3.12": "py312"},
  "depends": ["__glibc >=2.17,<3.0.a0", "libzlib >=1.3,<2.0a0"]},
 {"name": "python_abi", "version": "3.11", "build": "4_cp311", "files": {}, "constrains": ["python 3.11.* *_cpython"]},
 {"name": "libzlib", "version": "1.3.1", "build": "h4ab18f5_1", "files": {"lib/libz.so.1": "zlib 1.3.1"}},
 {"name": "libzlib", "version": "1.3.1", "build": "h4ab18f5_1", "format": "tar.bz2", "files": {"lib/libz.so.1": "zlib 1.3.1"}},
 {"name": "libzlib", "version": "1.2.13", "build": "h4ab18f5_0", "format": "tar.bz2", "files": {"lib/libz.so.1": "zlib 1.2.13"}},
 {"name": "six", "version": "1.16.0", "build": "pyhd8ed1ab_0", "subdir": "noarch", "noarch": "python",
  "depends": ["python >=3.7"], "files": {"site-packages/six.py": "x = 1\n"}},
 {"name": "_openmp_mutex", "version": "4.5", "build": "2_gnu", "build_number": 16, "files": {}},
 {"name": "_openmp_mutex", "version": "4.5", "build": "1_llvm", "build_number": 1, "files": {}},
 {"name": "torchish", "version": "2.3.1", "build": "cuda121_0", "build_number": 300, "depends": ["__cuda >=12.1", "_openmp_mutex"], "files": {"lib/t.so": "gpu"}},
 {"name": "torchish", "version": "2.3.1", "build": "cpu_0", "build_number": 0, "depends": ["_openmp_mutex"], "files": {"lib/t.so": "cpu"}},
 {"name": "needs-newer-glibc", "version": "1.0", "build": "0", "depends": ["__glibc >=2.39"], "files": {}},
 {"name": "cuda-version", "version": "12.1", "build": "h1d6eff3_3", "files": {}, "constrains": ["__cuda >=12", "cudatoolkit 12.1|12.1.*"]},
 {"name": "cuda-version", "version": "11.8", "build": "h70ddcb2_3", "files": {}, "constrains": ["__cuda >=11", "cudatoolkit 11.8|11.8.*"]},
 {"name": "pytorch-cuda", "version": "12.1", "build": "ha16c6d3_5", "files": {}, "depends": ["cuda-version >=12.1,<12.2"]},
 {"name": "pytorch-cuda", "version": "11.8", "build": "h7e8668a_5", "files": {}, "depends": ["cuda-version >=11.8,<11.9"]},
 {"name": "nccl", "version": "2.21.5.1", "build": "h3a97aeb_0", "files": {"lib/libnccl.so.2": "nccl"}, "depends": ["cuda-version >=12.0,<13"]},
 {"name": "pytorch", "version": "2.3.1", "build": "py3.11_cuda12.1_cudnn8.9.2_0", "files": {"lib/t.so": "gpu121"},
  "depends": ["python >=3.11,<3.12.0a0", "pytorch-cuda >=12.1,<12.2", "nccl >=2.21"]},
 {"name": "pytorch", "version": "2.3.1", "build": "py3.11_cuda11.8_cudnn8.7.0_0", "files": {"lib/t.so": "gpu118"},
  "depends": ["python >=3.11,<3.12.0a0", "pytorch-cuda >=11.8,<11.9"]},
 {"name": "pytorch", "version": "2.3.1", "build": "py3.11_cpu_0", "files": {"lib/t.so": "cpu"}, "depends": ["python >=3.11,<3.12.0a0"]},
 {"name": "pytorch", "version": "2.4.0", "build": "py3.11_cuda12.1_cudnn9.1.0_0", "files": {"lib/t.so": "gpu24"},
  "depends": ["python >=3.11,<3.12.0a0", "pytorch-cuda >=12.1,<12.2"]}
]}
JSON
# A conda-forge-like channel beside it: CUDA builds select their toolkit by cuda-version alone.
cat >cf.json <<'JSON'
{"packages": [
 {"name": "python", "version": "3.11.9", "build": "h2_0_cpython", "files": {"bin/python3.11": "py311"}},
 {"name": "cuda-version", "version": "12.1", "build": "h1d6eff3_3", "files": {}, "constrains": ["__cuda >=12"]},
 {"name": "pytorch", "version": "2.3.1", "build": "cuda120_py311h_300", "build_number": 300, "files": {"lib/t.so": "cf-gpu"},
  "depends": ["python >=3.11,<3.12.0a0", "cuda-version >=12.0,<13", "__cuda"]},
 {"name": "pytorch", "version": "2.3.1", "build": "cpu_generic_py311h_0", "files": {"lib/t.so": "cf-cpu"},
  "depends": ["python >=3.11,<3.12.0a0"]}
]}
JSON
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" channel channel.json --zst
rm channel/noarch/repodata.json.zst # noarch served plain only: both names are tried
python3 "$LOCKSTEP_SOURCE_DIR/tests/cli/conda_channel.py" channel/cf cf.json
start_http_server channel
CHANNEL=$HTTP_URL

write_spec() { # CONDA-PACKAGES [EXTRA YAML]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: condatest
repos:
  - {conda: $CHANNEL}
packages:
  conda: [$1]
conda: {virtual_packages: {glibc: "2.36"${2:-}}}
YAML
}

# ---- a lock from the channel ---------------------------------------------------------------------
write_spec 'python=3.11, six'
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
assert_eq '[{"kind":"conda","url":"'"$CHANNEL"'","subdirs":["linux-64","noarch"]}]' "$(jq -c .repos lockstep.lock)" \
  "the channel is recorded with the subdirs read"
assert_eq "libzlib python six" "$(jq -r '[.artifacts[] | select(.kind == "conda") | .name] | join(" ")' lockstep.lock)" \
  "python=3.11 and six with python's dependency; python_abi is only a constraint, so it is not pulled in"
py=$(jq -c '.artifacts[] | select(.name == "python")' lockstep.lock)
assert_eq "3.11.9 h1_0_cpython linux-64" "$(jq -r '"\(.version) \(.build) \(.subdir)"' <<<"$py")" "python=3.11 is a prefix match"
f=channel/linux-64/python-3.11.9-h1_0_cpython.conda
assert_eq "$(sha256sum <$f | cut -d' ' -f1) $(md5sum <$f | cut -d' ' -f1) $(stat -c %s $f)" \
  "$(jq -r '"\(.sha256) \(.md5) \(.size)"' <<<"$py")" "python is pinned by the sha256, md5 and size of the file cph wrote"
assert_eq "$CHANNEL/linux-64/python-3.11.9-h1_0_cpython.conda" "$(jq -r .url <<<"$py")" "its URL"
assert_eq '["__glibc >=2.17,<3.0.a0","libzlib >=1.2.13,<2.0a0"] ["python_abi 3.11.* *_cp311"] requested by packages.conda[0]' \
  "$(jq -r '"\(.depends | tojson) \(.constrains | tojson) \(.reason)"' <<<"$py")" "its whole record and why it is there"
zlib=$(jq -c '.artifacts[] | select(.name == "libzlib")' lockstep.lock)
assert_eq "1.3.1 $CHANNEL/linux-64/libzlib-1.3.1-h4ab18f5_1.conda" "$(jq -r '"\(.version) \(.url)"' <<<"$zlib")" \
  "the highest libzlib, the .conda twin over the .tar.bz2"
assert_contains "$(jq -r .reason <<<"$zlib")" "needed by python 3.11.9" "libzlib says who needs it"
six=$(jq -c '.artifacts[] | select(.name == "six")' lockstep.lock)
assert_eq "noarch python $CHANNEL/noarch/six-1.16.0-pyhd8ed1ab_0.conda" "$(jq -r '"\(.subdir) \(.noarch) \(.url)"' <<<"$six")" \
  "six comes from noarch"
assert_contains "$(cat "$HTTP_LOG")" "GET /linux-64/repodata.json.zst" "the .zst index is read where served"
assert_contains "$(cat "$HTTP_LOG")" "GET /noarch/repodata.json HTTP" "the plain index where the .zst is not"
pass "lock pins every conda package by URL, sha256, md5 and size with its record and reason; .zst indexes read"
cp lockstep.lock first.lock
: >"$HTTP_LOG"
ls_run lock --update
assert_eq 0 "$RC" "second lock: $ERR"
cmp -s first.lock lockstep.lock || fail "the same spec and channel give the same lock"
assert_contains "$(cat "$HTTP_LOG")" '"GET /linux-64/repodata.json.zst HTTP/1.1" 304' \
  "a second lock revalidates the cached index instead of downloading it"
pass "the same spec and channel give the same lock; a re-lock revalidates the cached indexes (HTTP 304)"

# ---- conda's rules -------------------------------------------------------------------------------
write_spec 'python 3.11.9' ', cuda: ""'
ls_run lock
assert_eq 0 "$RC" "lock python 3.11.9: $ERR"
write_spec 'torchish'
ls_run lock
assert_eq 0 "$RC" "lock torchish: $ERR"
assert_eq "cpu_0 2_gnu" "$(jq -r '[(.artifacts[] | select(.name == "torchish") | .build), (.artifacts[] | select(.name == "_openmp_mutex") | .build)] | join(" ")' lockstep.lock)" \
  "without __cuda the CPU build; the mutex's highest build_number"
write_spec 'torchish, "_openmp_mutex=*=*_llvm"' ', cuda: "12.4"'
ls_run lock
assert_eq 0 "$RC" "lock torchish with cuda: $ERR"
assert_eq "cuda121_0 1_llvm" "$(jq -r '[(.artifacts[] | select(.name == "torchish") | .build), (.artifacts[] | select(.name == "_openmp_mutex") | .build)] | join(" ")' lockstep.lock)" \
  "with __cuda 12.4 the GPU build; the mutex chosen by a build glob"
assert_contains "$ERR" "__cuda 12.4" "the solve says which virtual packages it had"
pass "conda's rules: exact and prefix versions, mutex builds by glob, GPU builds only with __cuda"

# ---- errors --------------------------------------------------------------------------------------
write_spec '"numpy>=1.26,<<2"'
ls_run lock
assert_eq 2 "$RC" "a bad MatchSpec is exit 2"
assert_contains "$ERR" "packages.conda[0]: invalid conda package 'numpy>=1.26,<<2'" "the error names the entry"
assert_contains "$ERR" "lockstep.yaml:6:24: error" "and its line and column, the caret under the operator"
write_spec 'python=3.13'
ls_run lock
assert_eq 2 "$RC" "an impossible request is exit 2: $ERR"
assert_contains "$ERR" "the conda packages can't be installed together" "the solver explains"
assert_contains "$ERR" "packages.conda[0] python=3.13 (lockstep.yaml:6)" "naming the spec entry it rests on"
write_spec 'needs-newer-glibc'
ls_run lock
assert_eq 2 "$RC" "a package that needs a newer glibc than the image's: $ERR"
assert_contains "$ERR" "__glibc" "the explanation names __glibc"
sed -i "s|{conda: $CHANNEL}|{conda: https://conda.example/t/tk-123/conda-forge}|" lockstep.yaml
ls_run lock
assert_eq 2 "$RC" "a token in a channel URL is refused"
assert_contains "$ERR" "a channel URL with a token or a user in it" "and says why"
pass "bad MatchSpecs, impossible requests, a glibc too old and tokens in URLs are located exit-2 errors"

# ---- the lock builds (the image itself is test_conda_build.sh's) ---------------------------------
write_spec 'python=3.11'
printf 'outputs: {oci: out}\n' >>lockstep.yaml
ls_run lock
assert_eq 0 "$RC" "lock with outputs: $ERR"
ls_run build --locked
assert_eq 0 "$RC" "a lock with conda packages builds: $ERR"
assert_contains "$ERR" "conda environment: 2 packages into /opt/conda" "as one layer"
pass "a lock with conda packages builds into an image (test_conda_build.sh checks what it holds)"

# ---- the stack over conda ------------------------------------------------------------------------
write_spec 'python=3.11'
printf 'stack: {framework: pytorch@2.3.1, cuda: "12.1"}\n' >>lockstep.yaml
ls_run check
assert_eq 0 "$RC" "check of a stack over conda: $ERR"
assert_contains "$OUT" "framework  pytorch 2.3.1 (cuda)   conda   pytorch 2.3.1.* *cuda* pytorch-cuda 12.1.*" \
  "check shows the stack's conda requests, offline (no pypi repository needed)"
ls_run lock
assert_eq 0 "$RC" "lock a stack over conda: $ERR"
assert_eq "cuda-version libzlib nccl python pytorch pytorch-cuda" \
  "$(jq -r '[.artifacts[] | .name] | join(" ")' lockstep.lock)" "conda packages only: no torch wheel, no CUDA debs"
pt=$(jq -c '.artifacts[] | select(.name == "pytorch")' lockstep.lock)
assert_eq "2.3.1 py3.11_cuda12.1_cudnn8.9.2_0 requested by stack.framework (pytorch 2.3.1.* *cuda*)" \
  "$(jq -r '"\(.version) \(.build) \(.reason)"' <<<"$pt")" "pytorch 2.3.1's CUDA 12.1 build, asked for by the stack"
assert_eq "requested by stack.cuda (cuda-version 12.1.*)" \
  "$(jq -r '.artifacts[] | select(.name == "cuda-version") | .reason' lockstep.lock)" "cuda-version from stack.cuda"
assert_contains "$ERR" "__cuda 12.1" "the solve had the stack's CUDA as __cuda, on a machine without a GPU"
assert_eq "python 3.11.9 conda|cuda 12.1 conda|nccl 2.21.5.1 conda|framework 2.3.1 conda" \
  "$(jq -r '[.stack.choices[] | "\(.component) \(.version) \(.via)"] | join("|")' lockstep.lock)" \
  "the stack report: every part from conda, NCCL and Python included"
assert_contains "$(jq -r '.stack.choices[] | select(.component == "nccl") | .facts[0]' lockstep.lock)" \
  "conda solved nccl 2.21.5.1 h3a97aeb_0 from $CHANNEL/linux-64 (needed by pytorch 2.3.1" "NCCL says where it came from"
assert_contains "$(jq -r '.stack."nvidia-require-cuda"' lockstep.lock)" "cuda>=12.1,driver>=" "NVIDIA_REQUIRE_CUDA from the stack's CUDA"
write_spec 'python=3.11'
printf 'stack: {framework: pytorch@2.3}\n' >>lockstep.yaml
ls_run lock
assert_eq 0 "$RC" "lock a stack over conda without a CUDA: $ERR"
cuda=$(jq -r '.stack.choices[] | select(.component == "cuda") | .version' lockstep.lock)
assert_contains "$(jq -r '.artifacts[] | select(.name == "pytorch") | .build' lockstep.lock)" "_cuda${cuda}_" \
  "without stack.cuda the recipes' CUDA ($cuda) is the conda build's"
sed -i "s|{conda: $CHANNEL}|{conda: $CHANNEL/cf}|; s|stack: .*|stack: {framework: pytorch@2.3.1, cuda: \"12.1\"}|" lockstep.yaml
ls_run lock
assert_eq 0 "$RC" "lock a stack over a conda-forge-like channel: $ERR"
assert_eq "cuda-version python pytorch" "$(jq -r '[.artifacts[] | .name] | join(" ")' lockstep.lock)" \
  "where no channel has pytorch-cuda it is left out"
assert_eq "cuda120_py311h_300" "$(jq -r '.artifacts[] | select(.name == "pytorch") | .build' lockstep.lock)" \
  "and cuda-version with __cuda picks the CUDA build"
assert_contains "$ERR" "no channel has pytorch-cuda" "it says so"
pass "stack over conda: pytorch, pytorch-cuda, cuda-version and NCCL as conda packages; the report says where each came from"

# Without a stack, the environment's own cuda-version is the image's CUDA: doctor and run check the
# driver for it.
write_spec 'python=3.11, cuda-version=12.1' ', cuda: "12.4"'
ls_run lock
assert_eq 0 "$RC" "lock cuda-version: $ERR"
ls_run doctor lockstep.lock --json
assert_eq 1 "$RC" "doctor: no driver on this machine for the environment's CUDA: $ERR"
assert_eq "12.1 530.30.02" "$(jq -r '.target.facts | "\(.cuda) \(.cuda_driver_floor)"' <<<"$OUT")" \
  "the lock's CUDA is the conda environment's cuda-version, with its driver floor"
pass "a conda environment's cuda-version is the image's CUDA fact: doctor checks the driver for it"

# ---- staleness -----------------------------------------------------------------------------------
write_spec 'python=3.11, six'
ls_run lock
assert_eq 0 "$RC" "relock: $ERR"
write_spec 'python=3.11'
ls_run lock --check
assert_eq 1 "$RC" "changing packages.conda makes the lock stale"
assert_contains "$ERR" "packages.conda: removed six" "naming what changed"
pass "changing packages.conda makes the lock stale, naming the change"

done_testing
