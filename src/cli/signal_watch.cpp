#include "cli/signal_watch.hpp"

#include <pthread.h>

#include <csignal>
#include <thread>

namespace ooc::cli {
namespace {

void watched_signals(sigset_t* set) {
  sigemptyset(set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(set, sig);
}

// The three signals are blocked at the first moment the program runs code of its own:
// from the executable's .preinit_array, before any shared library's initializer and any
// static constructor (only the loading of the libraries, about 0.1 s of ~50 of them,
// comes before it). A Ctrl-C that arrives after that waits, pending, for the watcher
// thread that start() begins in main; one that came while the signals' default action
// was in place used to kill the run with no word (exit -2 on a loaded machine).
void block_watched_signals(int, char**, char**) {
  sigset_t set;
  watched_signals(&set);
  sigprocmask(SIG_BLOCK, &set, nullptr);  // one thread yet
}

[[gnu::section(".preinit_array"), gnu::used]] void (*const block_at_start)(int, char**, char**) = block_watched_signals;

}  // namespace

SignalWatch& SignalWatch::start() {
  // Never destroyed: the detached thread may still wake for a signal while the process
  // exits.
  static SignalWatch* const watch = [] {
    auto* w = new SignalWatch;
    static sigset_t set;
    watched_signals(&set);
    // Blocked (already, since the program's start: block_watched_signals) before TBB
    // starts its threads, so they inherit the mask and only the watcher thread receives
    // these signals.
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([w] {
      while (true) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        int none = 0;
        w->signal_.compare_exchange_strong(none, sig);  // the first signal names the exit
        w->cancel_ = true;
      }
    }).detach();
    return w;
  }();
  return *watch;
}

const char* SignalWatch::signal_name() const {
  const int sig = signal();
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

}  // namespace ooc::cli
