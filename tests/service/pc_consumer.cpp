// Built with nothing but `pkg-config --cflags --libs fenceq`: proves the
// installed headers, static library and pkg-config file fit together.
#include <fenceq/client.hpp>
#include <iostream>

int main() {
  fenceq::Client c("ipc:///nonexistent/fenceq-pc-consumer.sock",
                   fenceq::ClientOptions{std::chrono::milliseconds(50)});
  try {
    c.ping();
  } catch (const fenceq::Error& e) {
    // "unreachable" (no socket file there, said at once): linked and running.
    std::cout << e.code() << "\n";
    return e.code() == "unreachable" ? 0 : 1;
  }
  return 1;
}
