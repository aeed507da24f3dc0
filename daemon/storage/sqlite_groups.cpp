// The SQLite store's groups (issue 31; docs/contract.md C3.11): a grouped
// job's group taking turns (queue_groups), claim_next of a queue with groups
// (claim_fair), and the group settings every claim obeys.
//
// claim_fair claims one job at a time. For each it walks the queue's groups
// in turn order (queue_groups_turn: the least recently served first, a group
// never served before any other, '' standing for the jobs of no group), takes
// each group's head (its most urgent claimable job: jobs_group, or jobs_next
// for no group) unless the group's settings hold it back, and stops at the
// first head of the queue's top priority (an upper bound: the top priority
// of its open jobs, jobs_next and jobs_group_top); failing that, it claims
// the most urgent head it met, the earliest in turn among equals. A queue
// whose jobs share one priority thus reads one group per claim, plus the
// groups it steps over (every job leased or delayed, or held back). A group
// found with no open job leaves queue_groups (it joins again with its next
// job), so groups that are done cost nothing.
#include "sqlite_rows.hpp"
#include "sqlite_store.hpp"
#include "store_rows.hpp"

namespace fenceq::daemon {

using rules::kSqlite;
using sqlite::column_text;
using sqlite::SqliteRow;
using sqlite::Use;

namespace {
// '' in queue_groups: the jobs of no group, one group of their own.
constexpr std::string_view kNoGroupTurn = "";
}  // namespace

void SqliteStore::prepare_group_statements() {
  join_group_.reset(prepare("INSERT OR IGNORE INTO queue_groups(queue, grp, turn) VALUES(?1, ?2, 0)"));
  rejoin_group_.reset(prepare("INSERT OR IGNORE INTO queue_groups(queue, grp, turn) SELECT queue, "
                              "grp, 0 FROM jobs WHERE id = ?1 AND grp IS NOT NULL RETURNING queue"));
  groups_in_turn_.reset(prepare("SELECT grp FROM queue_groups WHERE queue = ?1 ORDER BY turn, grp"));
  const std::string head = "SELECT id, priority FROM jobs WHERE queue = :queue AND ";
  const std::string claimable = " AND " + rules::claimable(":now") + " ORDER BY " +
                                rules::urgency() + " LIMIT 1";
  group_head_.reset(prepare(head + "grp = :grp" + claimable));
  no_group_head_.reset(prepare(head + rules::kNoGroup + claimable));
  group_open_.reset(prepare("SELECT 1 FROM jobs WHERE queue = ?1 AND grp = ?2 AND done = 0 AND "
                            "dead = 0 LIMIT 1"));
  no_group_open_.reset(prepare(std::string("SELECT 1 FROM jobs WHERE queue = ?1 AND ") +
                               rules::kNoGroup + " AND done = 0 AND dead = 0 LIMIT 1"));
  leave_group_.reset(prepare("DELETE FROM queue_groups WHERE queue = ?1 AND grp = ?2"));
  const auto top = [](const char* which) {
    return std::string("COALESCE((SELECT priority FROM jobs WHERE queue = ?1 AND ") + which +
           " AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), -9223372036854775808)";
  };
  top_priority_.reset(prepare("SELECT MAX(" + top(rules::kNoGroup) + ", " + top(rules::kInGroup) + ")"));
  allowance_max_.reset(prepare("SELECT " + rules::allowance(kSqlite, ":queue", ":now", ":max")));
  group_allowed_.reset(prepare("SELECT " + rules::group_allowed(kSqlite, ":queue", ":grp", ":now")));
  take_turn_.reset(prepare("INSERT INTO queue_groups(queue, grp, turn) VALUES(?1, ?2, ?3) "
                           "ON CONFLICT(queue, grp) DO UPDATE SET turn = excluded.turn"));
  log_group_claim_.reset(prepare("INSERT OR FAIL INTO group_claims(queue, grp, at) VALUES(?1, ?2, ?3)"));
  prune_group_claims_.reset(prepare("DELETE FROM group_claims WHERE queue = ?1 AND grp = ?2 AND at <= ?3"));
}

void SqliteStore::join_group(std::string_view queue, std::string_view group) {
  Use u(join_group_.get());
  u.text(1, queue).text(2, group);
  step_done(join_group_.get(), "enqueue");
  if (!grouped_.contains(queue)) grouped_.emplace(queue);
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
    Use u(take_turn_.get());
    u.text(1, queue).text(2, group).integer(3, ++turn_);
    step_done(take_turn_.get(), "group turn");
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
  std::int64_t allowed = max;
  if (limits) {
    Use a(allowance_max_.get());
    a.text(a.at(":queue"), queue).real(a.at(":now"), now).integer(a.at(":max"), max);
    if (!step_row(allowance_max_.get(), "claim_next")) return;
    allowed = sqlite3_column_int64(allowance_max_.get(), 0);
    end_row(allowance_max_.get(), "claim_next");
  }
  const bool group_limits = limits && limits->group_limited();
  // The jobs of no group take turns under '' once any is open.
  {
    Use u(no_group_open_.get());
    u.text(1, queue);
    const bool any = step_row(no_group_open_.get(), "claim_next");
    if (any) end_row(no_group_open_.get(), "claim_next");
    if (any) {
      Use j(join_group_.get());
      j.text(1, queue).text(2, kNoGroupTurn);
      step_done(join_group_.get(), "claim_next");
    }
  }
  std::vector<ClaimedJob> jobs;
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  std::vector<std::string> empty;  // groups found with no open job
  while (static_cast<std::int64_t>(jobs.size()) < allowed) {
    std::int64_t top;
    {
      Use t(top_priority_.get());
      t.text(1, queue);
      if (!step_row(top_priority_.get(), "claim_next")) break;
      top = sqlite3_column_int64(top_priority_.get(), 0);
      end_row(top_priority_.get(), "claim_next");
    }
    struct Head {
      std::string id, group;
      std::int64_t priority = 0;
    };
    std::optional<Head> best;
    {
      Use g(groups_in_turn_.get());
      g.text(1, queue);
      int rc;
      while ((rc = sqlite3_step(groups_in_turn_.get())) == SQLITE_ROW) {
        const std::string group = column_text(groups_in_turn_.get(), 0).value_or("");
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
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_with("claim_next", rc);
    }
    for (const auto& group : empty) {
      Use d(leave_group_.get());
      d.text(1, queue).text(2, group);
      step_done(leave_group_.get(), "claim_next");
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
