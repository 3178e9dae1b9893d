"""Hello and allreduce across MPI ranks: each rank contributes rank + 1; every rank must see n(n+1)/2."""
import sys

from mpi4py import MPI


def say(line):
    # One write per line: Open MPI forwards each rank's output as it is written, so a line written
    # in pieces could be interleaved with another rank's.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
expected = size * (size + 1) // 2
say(f"hello from rank {rank} of {size} on {MPI.Get_processor_name()}: allreduce = {total}")
if total != expected:
    raise SystemExit(f"rank {rank}: allreduce gave {total}, expected {expected}")
comm.Barrier()
if rank == 0:
    say(f"allreduce ok: {size} ranks, sum {total}")
