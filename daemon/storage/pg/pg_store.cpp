#include "storage/pg/pg_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {

using namespace pg;  // NOLINT: the statements' numbers

namespace {
// The schema's migration at each connection, and once, at the first, the
// restored copy's new fence epoch.
PgConnection::Migrate migrate_for(bool restored) {
  if (!restored) return &pg::migrate;
  auto pending = std::make_shared<bool>(true);
  return [pending](PgConnection& c) {
    pg::migrate(c);
    if (*pending) {
      pg::raise_fence_epoch(c);
      *pending = false;
    }
  };
}
}  // namespace

PgStore::PgStore(const std::string& uri, bool listen, bool restored)
    : conn_(uri, statements(), migrate_for(restored), listen) {
  if (!listen) return;
  sweeper_ = std::make_unique<PgSweeper>(uri);  // the writer's
  // The queues with settings and with groups, known from the start: read
  // first with the first batch that claims, they made that claim go through
  // the statement that claims nothing of such a queue, so the first
  // claim_next of a grouped or limited queue after every start answered
  // nothing (a test of C3.25 across a restart found it). A server not
  // there at the start (not fatal: unavailable until it is back) leaves
  // them to that first batch, as before.
  if (!connected()) return;
  try {
    for (auto& [queue, config] : queue_configs()) configured_.insert(std::move(queue));
    PgParams none;
    auto grouped = conn_.run(kGroupedQueues, none, "claim_next");
    for (int k = 0, n = PQntuples(grouped.get()); k < n; ++k) {
      grouped_.emplace(bytes_at(grouped.get(), k, 0));
    }
    configs_read_ = std::chrono::steady_clock::now();
  } catch (const StoreError& e) {
    if (e.kind != StoreError::Kind::unavailable) throw;
    configured_.clear();
    grouped_.clear();
  }
}

PgStore::~PgStore() = default;

void PgStore::ended() {
  if (sweeper_) sweeper_->changed(changes_ - swept_from_);
  swept_from_ = changes_;
}

std::uint64_t PgStore::sweeps() const { return sweeper_ ? sweeper_->sweeps() : 0; }

std::unique_ptr<StoreReads> PgStore::open_reader() const {
  return std::make_unique<PgStore>(conn_.uri(), false);
}

void PgStore::count_changes(PGresult* res) {
  const char* n = PQcmdTuples(res);
  if (n && *n) changes_ += std::strtoll(n, nullptr, 10);
}

void PgStore::freed(std::string_view queue) {
  auto& f = queue_changes_.freed;
  if (std::find(f.begin(), f.end(), queue) == f.end()) f.emplace_back(queue);
}

Store::QueueChanges PgStore::take_queue_changes() { return std::exchange(queue_changes_, {}); }

QueueTally::Entries PgStore::take_queue_totals() { return tally_.take(); }

void PgStore::begin() {
  queue_changes_ = {};
  tally_.clear();
  events_.clear();
  write_locked_ = false;
  conn_.begin();
}

void PgStore::commit() {
  if (events_on_) read_events();  // pg_events.cpp: inside the transaction, before COMMIT
  try {
    conn_.commit();
  } catch (...) {
    ended();
    throw;
  }
  ended();
}

void PgStore::rollback() noexcept {
  queue_changes_ = {};
  tally_.clear();
  events_.clear();
  conn_.rollback();
  ended();
}

namespace {
std::vector<std::pair<std::string, QueueConfig>> read_configs(const PGresult* r) {
  std::vector<std::pair<std::string, QueueConfig>> out;
  for (int i = 0, n = PQntuples(r); i < n; ++i) out.push_back(rows::queue_config(PgRow{r, i}));
  return out;
}
}  // namespace

std::optional<Payload> PgStore::payload(std::string_view id) {
  if (has_nul(id)) return std::nullopt;
  PgParams p;
  p.text(id);
  auto res = conn_.run(kPayload, p, "payload");
  const PGresult* r = res.get();
  if (PQntuples(r) == 0) return std::nullopt;
  return PgRow{r, 0}.payload(0);
}

Store::Links PgStore::links(std::string_view id) {
  Links out;
  if (has_nul(id)) return out;
  PgParams p;
  p.text(id);
  auto res = conn_.run(kLinks, p, "job");
  for (int k = 0; k < PQntuples(res.get()); ++k) rows::add_link(out, PgRow{res.get(), k});
  return out;
}

JobResults PgStore::results(const std::vector<std::string>& ids, double now) {
  // One statement for them all; an id holding U+0000 is in no row.
  JobResults out;
  std::unordered_map<std::string_view, std::size_t> at;
  BinaryArray asked(kText);
  for (const auto& id : ids) {
    if (!at.emplace(id, out.size()).second) continue;
    out.emplace_back(id, std::nullopt);
    if (!has_nul(id)) asked.add(id);
  }
  const std::string bytes = asked.bytes();
  PgParams p;
  p.text(bytes).f8(now);
  auto res = conn_.run(kResults, p, "results");
  const PGresult* r = res.get();
  for (int k = 0; k < PQntuples(r); ++k) {
    auto i = at.find(bytes_at(r, k, 0));
    if (i == at.end()) continue;
    PgRow row{r, k};
    out[i->second].second =
        JobOutcome{rules::parse_status(row.text(1).value_or("")).value_or(JobStatus::ready),
                   row.text(2)};
    out[i->second].second->omitted = row.null(2) && row.integer(3) != 0;
  }
  return out;
}

std::optional<JobState> PgStore::state(std::string_view id) {
  if (has_nul(id)) return std::nullopt;  // no stored id holds U+0000
  PgParams p;
  p.text(id);
  auto res = conn_.run(kState, p, "state");
  const PGresult* r = res.get();
  if (PQntuples(r) == 0) return std::nullopt;
  return rows::job_state(PgRow{r, 0});
}

std::vector<JobInfo> PgStore::list(const ListFilter& f, double now) {
  // Ids hold no U+0000, so "after a\0b" is exactly "after a".
  std::string_view after = f.after.substr(0, f.after.find('\0'));
  if (f.queue && has_nul(*f.queue)) return {};  // no such queue
  std::optional<std::string_view> status;
  if (f.status) status = rules::status_text(*f.status);
  PgParams p;
  p.text(after).f8(now).opt_text(f.queue).opt_text(status);
  if (f.limit >= 0) {
    p.i8(f.limit);
  } else {
    p.null();  // no limit, as SQLite reads a negative one
  }
  if (f.id && has_nul(*f.id)) return {};  // no stored id holds U+0000
  p.opt_text(f.id);
  if (has_nul(f.prefix)) return {};  // nor starts with a prefix that does
  ListFilter cut = f;
  cut.after = after;
  const auto b = list_bounds(cut);
  p.text(b.lower)
      .opt_text(b.upper ? std::optional<std::string_view>(*b.upper) : std::nullopt)
      .f8(b.after_created);
  if (f.key && has_nul(*f.key)) return {};  // no stored key holds U+0000
  p.opt_text(f.key);
  if (f.group && has_nul(*f.group)) return {};
  p.opt_text(f.group);
  const Stmt which = !dead_page(f) ? list_statement(f.order, b.upper.has_value())
                     : b.upper ? kDeadListBounded : kDeadList;
  auto res = conn_.run(which, p, "list");
  const PGresult* s = res.get();
  std::vector<JobInfo> out;
  for (int i = 0, n = PQntuples(s); i < n; ++i) out.push_back(rows::job_info(PgRow{s, i}));
  return out;
}

std::optional<double> PgStore::next_claimable_at(std::string_view queue, double now) {
  if (has_nul(queue)) return std::nullopt;
  PgParams p;
  p.text(queue).f8(now);
  auto res = conn_.run(kNextClaimable, p, "next_claimable_at");
  if (PQntuples(res.get()) == 0 || PQgetisnull(res.get(), 0, 0)) return std::nullopt;
  return double_at(res.get(), 0, 0);
}

std::vector<QueueStats> PgStore::queue_stats(double now) {
  PgParams p;
  p.f8(now);
  auto res = conn_.run(kStats, p, "stats");
  const PGresult* s = res.get();
  std::vector<QueueStats> out;
  for (int i = 0, n = PQntuples(s); i < n; ++i) rows::add_stats_row(out, PgRow{s, i}, now);
  add_configs(out, queue_configs());
  add_group_configs(out, group_configs());
  add_retentions(out, retentions());
  return out;
}

std::vector<std::tuple<std::string, std::string, GroupOverride>> PgStore::group_configs() {
  PgParams p;
  auto res = conn_.run(kGroupConfigs, p, "group_config");
  std::vector<std::tuple<std::string, std::string, GroupOverride>> out;
  for (int i = 0, n = PQntuples(res.get()); i < n; ++i) {
    out.push_back(rows::group_config(PgRow{res.get(), i}));
  }
  return out;
}

std::optional<QueueConfig> PgStore::queue_config(std::string_view queue) {
  if (has_nul(queue)) return std::nullopt;
  PgParams p;
  p.text(queue);
  auto all = read_configs(conn_.run(kConfigs, p, "queue_config").get());
  if (all.empty()) return std::nullopt;
  return all.front().second;
}

std::vector<std::pair<std::string, QueueConfig>> PgStore::queue_configs() {
  PgParams p;
  p.null();
  return read_configs(conn_.run(kConfigs, p, "queue_config").get());
}

std::vector<std::pair<std::string, Retention>> PgStore::retentions() {
  PgParams p;
  auto res = conn_.run(kRetentions, p, "queue_config");
  const PGresult* r = res.get();
  std::vector<std::pair<std::string, Retention>> out;
  for (int i = 0, n = PQntuples(r); i < n; ++i) {
    auto keep = [&](int col) {
      return PQgetisnull(r, i, col) ? std::nullopt : std::optional<double>(double_at(r, i, col));
    };
    out.emplace_back(std::string(bytes_at(r, i, 0)), Retention{keep(1), keep(2), keep(3)});
  }
  return out;
}

std::vector<Store::StoredSchedule> PgStore::schedules() {
  PgParams p;
  auto res = conn_.run(kSchedules, p, "schedule_list");
  const PGresult* r = res.get();
  std::vector<StoredSchedule> out;
  for (int i = 0, n = PQntuples(r); i < n; ++i) out.push_back(rows::schedule(PgRow{r, i}));
  return out;
}

std::string PgStore::claim_next_plan() {
  PgParams p;
  p.text("default").text("plan").f8(0).f8(0).i8(1);
  const PgStatement claim_next = claim_next_statement();
  auto res = conn_.exec_params("EXPLAIN " + claim_next.sql, p, claim_next.types, "explain");
  std::string plan;
  for (int i = 0, n = PQntuples(res.get()); i < n; ++i) {
    plan += PQgetvalue(res.get(), i, 0);
    plan += "\n";
  }
  return plan;
}

double PgStore::clock_high_water() {
  PgParams p;
  p.text("clock_high_water");
  auto res = conn_.run(kGetMeta, p, "read clock");
  if (PQntuples(res.get()) == 0) return 0;
  return double_at(res.get(), 0, 0);
}

}  // namespace fenceq::daemon
