#include "os/shrink_watch.hpp"

#include "os/memory.hpp"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

namespace ooc::os {
namespace {

// The handler may run on any thread at any moment, so the table it reads is a fixed
// array of lock-free atomics: a slot is claimed by setting `used` from false, and its
// range is published before `active` is set.
struct Watched {
  std::atomic<bool> used{false};
  std::atomic<bool> active{false};
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  std::atomic<bool> writable{false};
  std::atomic<bool> shrank{false};
};
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free);

constexpr int kSlots = 1024;  // mappings watched at once; more go unwatched
Watched g_watched[kSlots];
struct sigaction g_previous {};

// Maps zeros over the rest of the watched mapping holding `address` and flags it; false
// when no watched mapping holds it.
bool claim(std::uintptr_t address) {
  for (Watched& w : g_watched) {
    if (!w.active.load(std::memory_order_acquire)) continue;
    const std::uintptr_t begin = w.begin.load(std::memory_order_relaxed);
    const std::uintptr_t end = w.end.load(std::memory_order_relaxed);
    if (address < begin || address >= end) continue;
    // mmap is a plain system call on Linux, safe here although POSIX does not list it.
    const std::uintptr_t page = page_size();
    const std::uintptr_t first = address / page * page;
    const std::uintptr_t last = (end + page - 1) / page * page;
    const int protection = w.writable.load(std::memory_order_relaxed) ? PROT_READ | PROT_WRITE : PROT_READ;
    void* zeros = ::mmap(reinterpret_cast<void*>(first), last - first, protection,
                         MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zeros == MAP_FAILED) return false;
    w.shrank.store(true, std::memory_order_release);
    return true;
  }
  return false;
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (claim(reinterpret_cast<std::uintptr_t>(info->si_addr))) return;  // the access is retried and reads zeros
  // Not a watched mapping: whoever handled SIGBUS before us, or the default (a crash).
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    ::signal(SIGBUS, SIG_DFL);  // returning re-runs the access, which now kills us
  }
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

}  // namespace

ShrinkWatch::ShrinkWatch(const void* address, std::size_t size, bool writable) {
  if (size == 0) return;
  install_handler();
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_watched[i].used.compare_exchange_strong(expected, true)) continue;
    Watched& w = g_watched[i];
    w.begin.store(reinterpret_cast<std::uintptr_t>(address), std::memory_order_relaxed);
    w.end.store(reinterpret_cast<std::uintptr_t>(address) + size, std::memory_order_relaxed);
    w.writable.store(writable, std::memory_order_relaxed);
    w.shrank.store(false, std::memory_order_relaxed);
    w.active.store(true, std::memory_order_release);
    slot_ = i;
    return;
  }
}

ShrinkWatch::ShrinkWatch(ShrinkWatch&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

ShrinkWatch& ShrinkWatch::operator=(ShrinkWatch&& other) noexcept {
  if (this != &other) {
    ShrinkWatch old(std::move(*this));
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

ShrinkWatch::~ShrinkWatch() {
  if (slot_ < 0) return;
  Watched& w = g_watched[slot_];
  w.active.store(false, std::memory_order_release);
  w.used.store(false, std::memory_order_release);
}

bool ShrinkWatch::claim_fault(const void* address) {
  return claim(reinterpret_cast<std::uintptr_t>(address));
}

bool ShrinkWatch::shrank() const {
  return slot_ >= 0 && g_watched[slot_].shrank.load(std::memory_order_acquire);
}

}  // namespace ooc::os
