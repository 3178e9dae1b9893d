#pragma once
// Independent tasks on a few threads: each worker takes the next index until none is left.
#include <cstddef>
#include <functional>

namespace lockstep {

/// Runs task(0) .. task(count - 1), on up to `threads` threads (the caller's among them); returns
/// when all are done. Tasks report their own results (one slot per index) and must not throw.
void for_each_index(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& task);

} // namespace lockstep
