#pragma once
// The rank program of `lockstep run` (rank.cpp has what it does): lockstep called as
// `lockstep _rank ARGS` or through a link named lockstep-rank. cli/main.cpp dispatches to it
// before anything else starts.

namespace lockstep::runner {

/// Runs one rank; `argv` holds the arguments after `_rank` (or after the lockstep-rank name):
/// --report DIR [--gate SECONDS] -- LOCKSTEP exec [OPTIONS] IMAGE -- CMD... Returns the exit status.
int rank_main(int argc, char** argv);

} // namespace lockstep::runner
