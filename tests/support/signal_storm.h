#pragma once
// SIGUSR1 sent to the process every 50 µs while the storm lives, counted by a handler of some frame size: a program
// that embeds the library and handles a timer's or a profiler's signal. Sent to the process, a signal goes to the
// main thread first (the sender blocks it), which is where the tests compute.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace sprintnet::test {

class SignalStorm {
 public:
  SignalStorm() {
    handled() = 0;
    struct sigaction action = {};
    action.sa_handler = count;
    sigemptyset(&action.sa_mask);
    EXPECT_EQ(sigaction(SIGUSR1, &action, &previous_), 0);
    sender_ = std::thread([this] {
      sigset_t usr1;
      sigemptyset(&usr1);
      sigaddset(&usr1, SIGUSR1);
      pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
      while (!done_.load()) {
        kill(getpid(), SIGUSR1);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  }
  ~SignalStorm() {
    done_ = true;
    sender_.join();
    sigaction(SIGUSR1, &previous_, nullptr);
  }
  SignalStorm(const SignalStorm&) = delete;
  SignalStorm& operator=(const SignalStorm&) = delete;

  // Signals the handler took so far: a test shows they arrived, or it proves nothing.
  static long signals_handled() { return handled().load(); }

 private:
  static std::atomic<long>& handled() {
    static std::atomic<long> count{0};
    return count;
  }
  static void count(int) {
    volatile char frame[512];  // a frame of some size, as a real handler's
    frame[0] = 1;
    frame[511] = frame[0];
    handled().fetch_add(1, std::memory_order_relaxed);
  }

  struct sigaction previous_ = {};
  std::atomic<bool> done_{false};
  std::thread sender_;
};

}  // namespace sprintnet::test
