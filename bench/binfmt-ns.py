#!/usr/bin/env python3
# bench/arm64-build.sh: runs ARGV as root of a new user namespace (ids 0-65535 mapped to
# themselves) with mount and pid namespaces and a binfmt_misc of its own in which qemu-aarch64 is
# registered (flags F, P, O):
# foreign programs run under qemu-user there, and the host's binfmt_misc is untouched.
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID = 0x10000000, 0x00020000, 0x20000000
line = next(l for l in open('/usr/lib/binfmt.d/qemu-aarch64.conf').read().splitlines() if l and not l.startswith('#'))
line = line.rsplit(':', 1)[0] + ':POF'
r, w = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) != 0:
        sys.exit('unshare: ' + os.strerror(ctypes.get_errno()))
    os.write(w, b'x'); os.read(r2, 1)
    # A pid namespace of its own (its first child is pid 1), so that the chroot's /proc can be mounted.
    child = os.fork()
    if child:
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xff)
    libc.mount(b'none', b'/', None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
    if libc.mount(b'binfmt_misc', b'/proc/sys/fs/binfmt_misc', b'binfmt_misc', 0, None) != 0:
        sys.exit('mount binfmt_misc: ' + os.strerror(ctypes.get_errno()))
    with open('/proc/sys/fs/binfmt_misc/register', 'w') as f:
        f.write(line)
    os.execvp(sys.argv[1], sys.argv[1:])
os.read(r, 1)
for m in ('uid_map', 'gid_map'):
    with open(f'/proc/{pid}/{m}', 'w') as f:
        f.write('0 0 65536\n')
os.write(w2, b'k')
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
