#include "support/base/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace lockstep {

void for_each_index(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < count; i = next++) {
      task(i);
    }
  };
  const std::size_t n = std::min(std::max<std::size_t>(threads, 1), count);
  std::vector<std::jthread> pool;
  for (std::size_t t = 1; t < n; ++t) {
    pool.emplace_back(worker);
  }
  worker();
}

} // namespace lockstep
