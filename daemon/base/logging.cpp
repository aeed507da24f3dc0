#include "base/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace fenceq::daemon {

std::string client_text(std::string_view s) {
  constexpr std::size_t kMaxQuoted = 300;
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < kMaxQuoted; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxQuoted) out += "...";
  return out + "'";
}
namespace {

// sd-daemon.h's SD_ERR … SD_DEBUG, by spdlog level.
int syslog_priority(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    case spdlog::level::critical:
      return 2;
    case spdlog::level::off:
    case spdlog::level::n_levels:
      break;
  }
  return 6;
}

// "%*" in the pattern: "<N>", the line's syslog priority for journald.
class PriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char text[] = {'<', static_cast<char>('0' + syslog_priority(msg.level)), '>'};
    dest.append(text, text + sizeof text);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

}  // namespace

bool stderr_is_journal() {
  const char* e = std::getenv("JOURNAL_STREAM");
  if (!e || !*e) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(e, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (::fstat(2, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

std::string journal_prefix(int priority) {
  if (!stderr_is_journal()) return "";
  // Appended, not `"<" + std::string&&`: GCC 12 inlines that operator+ into a
  // memcpy it then wrongly warns may overlap (-Wrestrict, GCC bug 105329).
  std::string prefix = "<";
  prefix += std::to_string(priority);
  prefix += '>';
  return prefix;
}

void init_logging(const std::string& level) {
  std::shared_ptr<spdlog::logger> logger;
  if (stderr_is_journal()) {
    logger = spdlog::stderr_logger_mt("fenceqd");
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<PriorityFlag>('*').set_pattern("%*%l %v");
    logger->set_formatter(std::move(f));
  } else {
    logger = spdlog::stderr_color_mt("fenceqd");
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace fenceq::daemon
