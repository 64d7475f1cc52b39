#include "os/crash_guard.hpp"

#include "os/shrink_watch.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ooc::os {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kCount = sizeof kSignals / sizeof kSignals[0];

// Read by the handler, which may run on any thread at any moment: the thread inside the
// library (0: none), and the file it works on, written only by that thread before it
// marks itself.
std::atomic<bool> g_installed{false};
std::atomic<long> g_inside{0};
char g_file[4096];
char g_prefix[64];
struct sigaction g_previous[kCount];

long this_thread() { return ::syscall(SYS_gettid); }

void say(const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    text += w;
    n -= static_cast<std::size_t>(w);
  }
}

void on_fatal(int sig, siginfo_t* info, void* context) {
  // A shrunk mapping's fault is the shrink watch's, whichever handler came first.
  if (sig == SIGBUS && info != nullptr && ShrinkWatch::claim_fault(info->si_addr)) return;
  if (g_inside.load(std::memory_order_acquire) == this_thread()) {
    say(g_prefix);
    if (g_file[0] != '\0') {
      say(g_file);
      say(": damaged HDF5 file (the HDF5 library crashed reading it)\n");
    } else {
      say("an HDF5 file is damaged (the HDF5 library crashed reading it)\n");
    }
    ::_exit(1);
  }
  // Not ours: whoever handled the signal before, or the default action.
  int i = 0;
  while (i < kCount && kSignals[i] != sig) ++i;
  if (i == kCount) return;
  const struct sigaction& previous = g_previous[i];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else {
    // A fault re-runs its instruction on return and now meets the default action; a
    // signal sent (kill, raise, abort) is sent again, delivered once this returns.
    ::signal(sig, SIG_DFL);
    if (info == nullptr || info->si_code <= 0) ::raise(sig);
  }
}

// Each thread that enters the library gets an alternate stack for the handler (one a
// sanitizer set up already is kept), freed when the thread ends.
struct AltStack {
  void* memory = nullptr;
  AltStack() {
    stack_t current{};
    if (::sigaltstack(nullptr, &current) != 0 || (current.ss_flags & SS_DISABLE) == 0) return;
    const std::size_t size = std::max<std::size_t>(SIGSTKSZ, std::size_t{64} << 10);
    memory = std::malloc(size);
    if (memory == nullptr) return;
    stack_t stack{};
    stack.ss_sp = memory;
    stack.ss_size = size;
    if (::sigaltstack(&stack, nullptr) != 0) {
      std::free(memory);
      memory = nullptr;
    }
  }
  ~AltStack() {
    if (memory == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
    std::free(memory);
  }
};

void ensure_alt_stack() { thread_local AltStack stack; }

}  // namespace

void contain_library_crashes(const char* prefix) {
  static std::once_flag once;
  std::call_once(once, [prefix] {
    std::strncpy(g_prefix, prefix, sizeof g_prefix - 1);
    ensure_alt_stack();
    for (int i = 0; i < kCount; ++i) {
      struct sigaction action {};
      action.sa_sigaction = on_fatal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&action.sa_mask);
      ::sigaction(kSignals[i], &action, &g_previous[i]);
    }
    g_installed.store(true, std::memory_order_release);
  });
}

bool library_crashes_contained() { return g_installed.load(std::memory_order_acquire); }

InLibrary::InLibrary(std::string_view file) {
  if (!g_installed.load(std::memory_order_acquire)) return;
  ensure_alt_stack();
  const std::size_t n = std::min(file.size(), sizeof g_file - 1);
  std::memcpy(g_file, file.data(), n);
  g_file[n] = '\0';
  thread_local const long self = this_thread();
  g_inside.store(self, std::memory_order_release);
  marked_ = true;
}

InLibrary::~InLibrary() {
  if (marked_) g_inside.store(0, std::memory_order_release);
}

}  // namespace ooc::os
