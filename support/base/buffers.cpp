#include "support/base/buffers.hpp"

#include <sys/mman.h>

namespace lockstep {

namespace {
constexpr std::size_t k_huge_page = 2U << 20;
} // namespace

BigBuffer big_buffer(std::size_t size) {
  if (size < k_huge_page) {
    return BigBuffer(static_cast<std::uint8_t*>(std::malloc(size))); // NOLINT(*-no-malloc,*-owning-memory)
  }
  const std::size_t rounded = (size + k_huge_page - 1) / k_huge_page * k_huge_page;
  void* p = std::aligned_alloc(k_huge_page, rounded); // NOLINT(*-no-malloc,*-owning-memory)
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  ::madvise(p, rounded, MADV_HUGEPAGE); // a hint: without transparent huge pages, 4 KiB pages
  return BigBuffer(static_cast<std::uint8_t*>(p));
}

} // namespace lockstep
