#include "cli/signal_watch.hpp"

#include <pthread.h>

#include <csignal>
#include <thread>

namespace ooc::cli {

SignalWatch& SignalWatch::start() {
  // Never destroyed: the detached thread may still wake for a signal while the process
  // exits.
  static SignalWatch* const watch = [] {
    auto* w = new SignalWatch;
    static sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    // Blocked before TBB starts its threads, so they inherit the mask and only the
    // watcher thread receives these signals.
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
