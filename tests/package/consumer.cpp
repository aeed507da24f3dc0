// A consumer of the installed C++ client, built two ways by check_package.sh:
// with find_package(fenceq) (CMakeLists.txt) and with nothing but
// `pkg-config --cflags --libs fenceq`. Against the daemon at ENDPOINT it
// enqueues, claims, completes and reads the state of the job JOB, and prints
// that state as the daemon answered it.
// Usage: consumer ENDPOINT JOB
#include <fenceq/client.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consumer ENDPOINT JOB\n";
    return 2;
  }
  const std::string job = argv[2];
  try {
    fenceq::Client c(argv[1], fenceq::ClientOptions{std::chrono::milliseconds(5000)});
    if (!c.enqueue(job)) return 1;
    const auto fence = c.claim(job, "worker-a", 30);
    if (!fence || c.claim(job, "worker-b", 30)) return 1;
    if (c.complete(job, "worker-b", *fence, "stolen")) return 1;  // not the owner (C3.5)
    if (!c.complete(job, "worker-a", *fence, "paid")) return 1;
    const auto s = c.state(job);
    if (!s) return 1;
    std::cout << "state: id=" << s->id << " fence=" << s->fence
              << " result=" << s->result.value_or("(null)") << " done=" << s->done << "\n";
    return 0;
  } catch (const fenceq::Error& e) {
    std::cerr << "consumer: " << e.code() << ": " << e.what() << "\n";
    return 1;
  }
}
