// The SQLite store's groups (issue 31; docs/contract.md C3.11): the turns of
// a queue's groups, claim_next of a queue with groups (claim_fair), and the
// group settings every claim obeys.
//
// The file's only writer keeps the turns in memory (grouped_): writing a
// turn to a table on every claim cost a random page of that table and two of
// its index in every commit (fenceq-ceiling, 10,000 groups: 3 times slower
// than without groups). They are read from the open jobs at start (every
// group never served) and again after a rollback.
//
// claim_fair claims one job at a time. For each it walks the queue's groups
// in turn order (the least recently served first, those never served before
// any other and by name, '' standing for the jobs of no group), takes each
// group's head (its most urgent claimable job: jobs_group, or jobs_next for
// no group) unless the group's settings hold it back, and stops at the first
// head of the queue's top priority (an upper bound: the top priority of its
// open jobs, jobs_next and jobs_group_top); failing that, it claims the most
// urgent head it met, the earliest in turn among equals. A queue whose jobs
// share one priority thus reads one group per claim, plus the groups it
// steps over (every job leased or delayed, or held back). A group found with
// no open job leaves the turns (it joins again with its next job).
#include "sqlite_rows.hpp"
#include "sqlite_store.hpp"
#include "store_rows.hpp"

namespace fenceq::daemon {

using rules::kSqlite;
using sqlite::column_text;
using sqlite::SqliteRow;
using sqlite::Use;

void SqliteStore::prepare_group_statements() {
  groups_of_open_.reset(prepare("SELECT DISTINCT queue, grp FROM jobs WHERE done = 0 AND dead = 0 "
                                "AND grp IS NOT NULL"));
  const std::string head = "SELECT id, priority FROM jobs WHERE queue = :queue AND ";
  const std::string claimable = " AND " + rules::claimable(":now") + " ORDER BY " +
                                rules::urgency() + " LIMIT 1";
  group_head_.reset(prepare(head + "grp = :grp" + claimable));
  no_group_head_.reset(prepare(head + rules::kNoGroup + claimable));
  group_open_.reset(prepare("SELECT 1 FROM jobs WHERE queue = ?1 AND grp = ?2 AND done = 0 AND "
                            "dead = 0 LIMIT 1"));
  no_group_open_.reset(prepare(std::string("SELECT 1 FROM jobs WHERE queue = ?1 AND ") +
                               rules::kNoGroup + " AND done = 0 AND dead = 0 LIMIT 1"));
  const auto top = [](const char* which) {
    return std::string("COALESCE((SELECT priority FROM jobs WHERE queue = ?1 AND ") + which +
           " AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), -9223372036854775808)";
  };
  top_priority_.reset(prepare("SELECT MAX(" + top(rules::kNoGroup) + ", " + top(rules::kInGroup) + ")"));
  allowance_max_.reset(prepare("SELECT " + rules::allowance(kSqlite, ":queue", ":now", ":max")));
  group_allowed_.reset(prepare("SELECT " + rules::group_allowed(":queue", ":grp", ":now")));
  log_group_claim_.reset(prepare("INSERT OR FAIL INTO group_claims(queue, grp, at) VALUES(?1, ?2, ?3)"));
  prune_group_claims_.reset(prepare("DELETE FROM group_claims WHERE queue = ?1 AND grp = ?2 AND at <= ?3"));
}

void SqliteStore::load_groups() {
  // Turns of the groups still open are kept; every other group is new.
  auto before = std::move(grouped_);
  grouped_.clear();
  Use u(groups_of_open_.get());
  int rc;
  while ((rc = sqlite3_step(groups_of_open_.get())) == SQLITE_ROW) {
    const auto queue = column_text(groups_of_open_.get(), 0).value_or("");
    const auto group = column_text(groups_of_open_.get(), 1).value_or("");
    std::int64_t turn = 0;
    if (auto q = before.find(queue); q != before.end()) {
      if (auto g = q->second.turn_of.find(group); g != q->second.turn_of.end()) turn = g->second;
    }
    auto& t = grouped_[queue];
    t.turn_of[group] = turn;
    t.order.emplace(turn, group);
  }
  if (rc != SQLITE_DONE) fail_with("read the groups", rc);
  // The jobs of no group of those queues take turns under ''.
  for (auto& [queue, t] : grouped_) {
    Use o(no_group_open_.get());
    o.text(1, queue);
    if (!step_row(no_group_open_.get(), "read the groups")) continue;
    end_row(no_group_open_.get(), "read the groups");
    std::int64_t turn = 0;
    if (auto q = before.find(queue); q != before.end()) {
      if (auto g = q->second.turn_of.find(kNoGroupTurn); g != q->second.turn_of.end()) turn = g->second;
    }
    t.turn_of[std::string(kNoGroupTurn)] = turn;
    t.order.emplace(turn, std::string(kNoGroupTurn));
  }
  groups_dirty_ = false;
}

void SqliteStore::join_group(std::string_view queue, std::string_view group) {
  auto q = grouped_.find(queue);
  const bool first = q == grouped_.end();
  if (first) q = grouped_.emplace(std::string(queue), Turns{}).first;
  auto& t = q->second;
  if (!t.turn_of.contains(group)) {
    t.turn_of.emplace(std::string(group), 0);
    t.order.emplace(0, std::string(group));
    groups_dirty_ = true;
  }
  if (!first || group == kNoGroupTurn) return;
  // The queue's first group: its open jobs of no group take turns under ''.
  Use u(no_group_open_.get());
  u.text(1, queue);
  if (!step_row(no_group_open_.get(), "enqueue")) return;
  end_row(no_group_open_.get(), "enqueue");
  t.turn_of.emplace(std::string(kNoGroupTurn), 0);
  t.order.emplace(0, std::string(kNoGroupTurn));
}

bool SqliteStore::group_allowed(std::string_view queue, std::string_view group, double now) {
  auto* s = group_allowed_.get();
  Use u(s);
  u.text(u.at(":queue"), queue).text(u.at(":grp"), group).real(u.at(":now"), now);
  if (!step_row(s, "group settings")) return false;
  const bool ok = sqlite3_column_int64(s, 0) > 0;
  end_row(s, "group settings");
  return ok;
}

void SqliteStore::served(std::string_view queue, std::string_view group,
                         const QueueConfig* limits, double now, bool turn) {
  if (turn) {
    if (auto q = grouped_.find(queue); q != grouped_.end()) {
      auto& t = q->second;
      if (auto g = t.turn_of.find(group); g != t.turn_of.end()) {
        t.order.erase({g->second, g->first});
        g->second = ++turn_;
        t.order.emplace(g->second, g->first);
      }
    }
  }
  if (!limits || limits->group_rate <= 0 || group == kNoGroupTurn) return;
  {
    Use u(prune_group_claims_.get());
    u.text(1, queue).text(2, group).real(3, now - limits->group_per - rules::kClaimLogKeep);
    step_done(prune_group_claims_.get(), "group rate window");
  }
  Use u(log_group_claim_.get());
  u.text(1, queue).text(2, group).real(3, now);
  step_done(log_group_claim_.get(), "group rate window");
}

void SqliteStore::claim_fair(const ClaimNextParams& p, const QueueConfig* limits,
                             CallResult& r) {
  const auto [queue, owner, now, ttl, max] = p;
  auto& turns = grouped_.find(queue)->second;
  std::int64_t allowed = max;
  if (limits) {
    Use a(allowance_max_.get());
    a.text(a.at(":queue"), queue).real(a.at(":now"), now).integer(a.at(":max"), max);
    if (!step_row(allowance_max_.get(), "claim_next")) return;
    allowed = sqlite3_column_int64(allowance_max_.get(), 0);
    end_row(allowance_max_.get(), "claim_next");
  }
  const bool group_limits = limits && limits->group_limited();
  // The top priority of the queue's open jobs: a bound that no claim of
  // this call changes (a claimed job stays open).
  std::int64_t top;
  {
    Use t(top_priority_.get());
    t.text(1, queue);
    if (!step_row(top_priority_.get(), "claim_next")) return;
    top = sqlite3_column_int64(top_priority_.get(), 0);
    end_row(top_priority_.get(), "claim_next");
  }
  std::vector<ClaimedJob> jobs;
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  std::vector<std::string> empty;  // groups found with no open job
  while (static_cast<std::int64_t>(jobs.size()) < allowed) {
    struct Head {
      std::string id, group;
      std::int64_t priority = 0;
    };
    std::optional<Head> best;
    for (const auto& [turn, group] : turns.order) {
      const bool none = group == kNoGroupTurn;
      if (!none && group_limits && !group_allowed(queue, group, now)) continue;
      auto* h = none ? no_group_head_.get() : group_head_.get();
      Use u(h);
      u.text(u.at(":queue"), queue).real(u.at(":now"), now);
      if (!none) u.text(u.at(":grp"), group);
      if (!step_row(h, "claim_next")) {
        auto* o = none ? no_group_open_.get() : group_open_.get();
        Use q(o);
        q.text(1, queue);
        if (!none) q.text(2, group);
        if (step_row(o, "claim_next")) {
          end_row(o, "claim_next");
        } else {
          empty.push_back(group);
        }
        continue;
      }
      const std::int64_t priority = sqlite3_column_int64(h, 1);
      if (!best || priority > best->priority) {
        best = Head{column_text(h, 0).value_or(""), group, priority};
      }
      end_row(h, "claim_next");
      if (best->priority >= top) break;
    }
    for (const auto& group : empty) {
      auto g = turns.turn_of.find(group);
      turns.order.erase({g->second, g->first});
      turns.turn_of.erase(g);
      groups_dirty_ = true;
    }
    empty.clear();
    if (!best) break;
    auto* c = limits ? claim_row_held_.get() : claim_row_.get();
    {
      Use u(c);
      u.text(u.at(":id"), best->id).text(u.at(":owner"), owner).real(u.at(":until"), now + ttl)
          .real(u.at(":now"), now);
      if (!step_row(c, "claim_next")) break;  // cannot happen: its head was claimable
      jobs.push_back(rows::claimed_job(SqliteRow{c}, order));
      end_row(c, "claim_next");
    }
    served(queue, best->group, limits, now, true);
  }
  if (!jobs.empty()) tally_.at(queue).claimed += jobs.size();
  if (limits) log_claims(queue, *limits, now, static_cast<std::int64_t>(jobs.size()));
  r.jobs = std::move(jobs);  // in the order the turns took them
}

}  // namespace fenceq::daemon
