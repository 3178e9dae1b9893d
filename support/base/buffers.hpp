#pragma once
// Byte buffers for streaming work: vectors whose new bytes are left uninitialised (a reader
// overwrites them; zeroing first costs a memset and a page fault per 4 KiB), and a process-wide
// recycler of large fixed-size buffers, so that a pipeline that hands buffers between threads
// does not fault fresh pages in for every block it reads.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace lockstep {

/// An allocator that leaves new elements uninitialised (value-initialisation becomes default-).
template <typename T> struct UninitAllocator : std::allocator<T> {
  // NOLINTNEXTLINE(readability-identifier-naming): the name the allocator requirements give it
  template <typename U> struct rebind { using other = UninitAllocator<U>; };
  UninitAllocator() = default;
  template <typename U> explicit UninitAllocator(const UninitAllocator<U>& /*other*/) noexcept {}
  template <typename U> void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args> void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// A growable byte buffer whose new bytes are not zeroed.
template <typename Byte> using UninitBuffer = std::vector<Byte, UninitAllocator<Byte>>;

struct FreeDeleter {
  void operator()(std::uint8_t* p) const { std::free(p); } // NOLINT(*-no-malloc,*-owning-memory)
};
/// A large buffer from big_buffer().
using BigBuffer = std::unique_ptr<std::uint8_t[], FreeDeleter>;

/// `size` bytes, unspecified contents, in memory the kernel may back with 2 MiB pages: a buffer
/// of several MiB then costs a few page faults instead of one per 4 KiB (each a few microseconds).
BigBuffer big_buffer(std::size_t size);

/// Buffers of one size, kept for reuse once given back (at most `keep` of them).
class BufferRecycler {
public:
  BufferRecycler(std::size_t size, std::size_t keep) : m_size(size), m_keep(keep) {}
  [[nodiscard]] std::size_t size() const { return m_size; }

  /// A buffer of size() bytes with unspecified contents.
  BigBuffer take() {
    {
      std::lock_guard lock(m_mutex);
      if (!m_free.empty()) {
        auto b = std::move(m_free.back());
        m_free.pop_back();
        return b;
      }
    }
    return big_buffer(m_size);
  }

  /// Gives a buffer from take() back (null is ignored).
  void give(BigBuffer b) {
    if (!b) {
      return;
    }
    std::lock_guard lock(m_mutex);
    if (m_free.size() < m_keep) {
      m_free.push_back(std::move(b));
    }
  }

private:
  const std::size_t m_size;
  const std::size_t m_keep;
  std::mutex m_mutex;
  std::vector<BigBuffer> m_free;
};

} // namespace lockstep
