// A thread that has used OpenSSL's error queue and ends only after main has returned (as a
// detached gRPC event-engine thread can) must not leak that queue. The leak, when there is one,
// is found by LeakSanitizer at the process's end, so CMake registers this program as a test only
// in builds with -fsanitize=address (scripts/test-sanitizers.sh, part of CI). Removing the
// OPENSSL_INIT_NO_ATEXIT initializer of src/service/common.cpp makes it fail there: OpenSSL's
// atexit handler, registered at the thread's first OpenSSL call and so run before
// end_late_thread, deletes the key whose destructor would have freed the thread's 904 bytes.
#include <openssl/err.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "service/common.hpp"

namespace {

std::mutex mutex;
std::condition_variable changed;
bool queue_used = false;
bool may_end = false;
std::thread late;

void end_late_thread() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    may_end = true;
  }
  changed.notify_all();
  late.join();
}

}  // namespace

int main() {
  // Registered before any OpenSSL call in this program, so it runs after every atexit handler
  // that OpenSSL could register later (they run in reverse order).
  if (std::atexit(end_late_thread) != 0) return 2;
  if (!dcalign::service::openssl_cleanup_left_to_exit()) {
    std::fprintf(stderr, "openssl_exit: OpenSSL refused OPENSSL_INIT_NO_ATEXIT\n");
    return 1;
  }
  late = std::thread([] {
    ERR_clear_error();  // the thread's first OpenSSL call: allocates its error queue
    std::unique_lock<std::mutex> lock(mutex);
    queue_used = true;
    changed.notify_all();
    changed.wait(lock, [] { return may_end; });
  });
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [] { return queue_used; });
  std::puts("openssl_exit: a thread with an OpenSSL error queue outlives main");
  return 0;
}
