#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "history.hpp"

namespace fenceq::history {
namespace {

// a's reply came back before b was sent: the daemon applied a before b.
bool before(const Op& a, const Op& b) { return a.returned != kNever && a.returned < b.invoked; }
// a was sent before b's reply came back: a may have been applied before b.
bool could_precede(const Op& a, const Op& b) { return a.invoked < b.returned; }
// The `until` a claim or renew sets: the daemon computes the same expression.
double lease_end(const Op& op) { return op.now + op.ttl; }

bool is_write(Kind k) { return k == Kind::renew || k == Kind::complete || k == Kind::release; }

// Applied for sure with a true result, or possibly applied (no reply).
bool maybe_succeeded(const Op& op) {
  if (op.outcome == Outcome::unknown) return true;
  if (op.outcome != Outcome::ok) return false;
  if (op.kind == Kind::claim) return op.fence_got.has_value();
  return op.flag;
}
bool acked_success(const Op& op) { return op.acked() && maybe_succeeded(op); }

// A fence epoch's floor is a multiple of this (C1.2, C1.5).
constexpr std::int64_t kEpoch = std::int64_t{1} << 32;

std::string fmt_opt(const std::optional<std::string>& s) {
  if (!s) return "nil";
  // Appended: `"\"" + std::string&&` makes GCC 12 warn of a memcpy overlap
  // that cannot happen (-Wrestrict, GCC bug 105329).
  std::string text = "\"";
  text += s->substr(0, 40);
  text += '"';
  return text;
}

class JobChecker {
 public:
  JobChecker(std::vector<const Op*> ops, const Options& opt, std::vector<std::string>& out,
             Summary& sum)
      : ops_(std::move(ops)), opt_(opt), out_(out), sum_(sum) {
    for (const Op* op : ops_) {
      if (op->kind == Kind::claim) {
        if (op->acked() && op->fence_got) {
          claims_[*op->fence_got].push_back(op);
          ++sum_.fences;
        }
        if (op->outcome == Outcome::unknown) unknown_claims_.push_back(op);
      }
      if (is_write(op->kind) && op->acked() && !op->flag) ++sum_.stale_refused;
      if (op->kind == Kind::complete && acked_success(*op)) ++sum_.completes;
      if (op->kind == Kind::state && op->acked()) ++sum_.states;
    }
  }

  void run() {
    check_fences();
    count_refused_across_restores();
    check_enqueues();
    for (const Op* op : ops_) {
      if (op->kind == Kind::claim && op->acked() && op->fence_got) check_claim(*op);
      if (is_write(op->kind) && acked_success(*op)) check_write(*op);
      if (op->kind == Kind::state && op->acked()) check_state(*op);
    }
    check_state_order();
  }

 private:
  void violation(const std::string& what, const Op& op) {
    out_.push_back(op.job + ": " + what + " [" + describe(op) + "]");
  }

  const Op* acked_claim(std::int64_t fence) const {
    auto it = claims_.find(fence);
    return it == claims_.end() ? nullptr : it->second.front();
  }
  // Every acknowledged claim that answered `fence`: one, unless the fence was
  // handed out twice (a violation of its own, reported by check_fences).
  const std::vector<const Op*>& acked_claims(std::int64_t fence) const {
    static const std::vector<const Op*> none;
    auto it = claims_.find(fence);
    return it == claims_.end() ? none : it->second;
  }
  // An acknowledged claim gave `fence` to `owner`.
  bool acked_to(std::int64_t fence, const std::string& owner) const {
    const auto& list = acked_claims(fence);
    return std::any_of(list.begin(), list.end(), [&](const Op* c) { return c->owner == owner; });
  }

  // A power cut may lie between a and b: a may have been applied before it
  // (a was sent before it) and b after it (b was answered after it).
  bool cut_between(const Op& a, const Op& b) const {
    return std::any_of(opt_.cuts.begin(), opt_.cuts.end(),
                       [&](std::uint64_t c) { return a.invoked < c && c < b.returned; });
  }
  // `later` does not show the acknowledged `write`: excused when a cut that
  // may lose acknowledged commits lies between them (C1.4, --sync normal or
  // off). Called only where a violation would be reported otherwise.
  // Or a restore lies between them whose backup may not hold `write`.
  bool lost_at_cut(const Op& write, const Op& later) const {
    if (opt_.lossy && cut_between(write, later)) {
      ++sum_.lost_at_cut;
      return true;
    }
    if (!restore_may_lose(write, later)) return false;
    ++sum_.lost_at_restore;
    return true;
  }

  // A restore lies between a and b: a sent before it, b answered after it.
  bool restore_between(const Op& a, const Op& b) const {
    return std::any_of(opt_.restores.begin(), opt_.restores.end(),
                       [&](const Restore& r) { return a.invoked < r.at && r.at < b.returned; });
  }
  // `later` may have been answered from a restored copy that does not hold
  // `write`: a restore lies between them, and its backup started before
  // `write` was answered (or `write` got no reply). A write answered before
  // the backup started is in the copy, and must be seen after the restore.
  bool restore_may_lose(const Op& write, const Op& later) const {
    return std::any_of(opt_.restores.begin(), opt_.restores.end(), [&](const Restore& r) {
      return write.invoked < r.at && r.at < later.returned && write.returned > r.backup;
    });
  }
  // Some restore came before `at` was answered: fences may have jumped to a
  // new epoch's floor by then.
  bool restored_before(const Op& at) const {
    return std::any_of(opt_.restores.begin(), opt_.restores.end(),
                       [&](const Restore& r) { return r.at < at.returned; });
  }
  // The last restore before `at` was sent (at.invoked), if any.
  const Restore* restore_before_sent(const Op& at) const {
    const Restore* last = nullptr;
    for (const Restore& r : opt_.restores) {
      if (r.at < at.invoked && (!last || r.at > last->at)) last = &r;
    }
    return last;
  }
  // Fence `fence` was handed out (acknowledged) only before restore r: the
  // lease is one r ended. Unknown when no acknowledged claim answered it.
  bool claimed_only_before(std::int64_t fence, const Restore& r) const {
    const auto& list = acked_claims(fence);
    return !list.empty() &&
           std::all_of(list.begin(), list.end(), [&](const Op* c) { return c->returned < r.at; });
  }

  // A restore ends every lease (C1.5): a write sent after it succeeds only
  // with a lease claimed after it, and a read sent after it shows no lease
  // from before it.
  void check_restored_lease(const Op& op, const std::string& owner, std::int64_t fence) {
    const Restore* r = restore_before_sent(op);
    if (!r || !claimed_only_before(fence, *r)) return;
    const std::string what = op.kind == Kind::state
                                 ? "state shows"
                                 : std::string(kind_name(op.kind)) + " succeeded with";
    violation(what + " the lease of " + owner + ", fence " + std::to_string(fence) +
                  ", claimed before the restore at @" + std::to_string(r->at) +
                  " (a lease the restore ended)",
              op);
  }

  void count_refused_across_restores() {
    for (const Op* w : ops_) {
      if (!is_write(w->kind) || !w->acked() || w->flag) continue;
      const Restore* r = restore_before_sent(*w);
      if (r && claimed_only_before(w->fence, *r)) ++sum_.refused_across_restore;
    }
  }

  // Every `until` the lease (owner, fence) may have set by the time `at` was
  // answered: its claim's, and those of its renews that may have succeeded.
  std::vector<double> lease_ends(const std::string& owner, std::int64_t fence, const Op& at,
                                 bool include_claim = true) const {
    std::vector<double> v;
    if (include_claim) {
      if (!acked_claims(fence).empty()) {
        for (const Op* c : acked_claims(fence)) {
          if (c->owner == owner) v.push_back(lease_end(*c));
        }
      } else {
        for (const Op* c : unknown_claims_) {
          if (c->owner == owner && could_precede(*c, at)) v.push_back(lease_end(*c));
        }
      }
    }
    for (const Op* r : ops_) {
      if (r != &at && r->kind == Kind::renew && r->owner == owner && r->fence == fence &&
          maybe_succeeded(*r) && could_precede(*r, at)) {
        v.push_back(lease_end(*r));
      }
    }
    return v;
  }

  // Fences issued are 1, 2, 3, ...: never repeated, increasing in real time,
  // and every value up to the highest seen was given by some claim. In lossy
  // mode a cut may take back claims, so fences may have gaps (a daemon that
  // protects its fences jumps past every fence it may have handed out); they
  // still never repeat and never go down in real time.
  void check_fences() {
    std::int64_t highest = 0;
    for (const auto& [fence, list] : claims_) {
      if (fence < 1) violation("claim answered fence " + std::to_string(fence), *list.front());
      if (list.size() > 1) {
        violation(
            "fence " + std::to_string(fence) + " issued " + std::to_string(list.size()) + " times",
            *list[1]);
      }
      highest = std::max(highest, fence);
    }
    for (const Op* s : ops_) {
      if (s->kind == Kind::state && s->acked() && s->row)
        highest = std::max(highest, s->row->fence);
    }
    std::int64_t explained = static_cast<std::int64_t>(claims_.size()) +
                             static_cast<std::int64_t>(unknown_claims_.size());
    // A restore raises fences to a new epoch's floor: they jump once a reply
    // came after one.
    const bool jumped = std::any_of(ops_.begin(), ops_.end(), [&](const Op* op) {
      return op->acked() && restored_before(*op);
    });
    if (!opt_.lossy && !jumped && highest > explained) {
      out_.push_back(ops_.front()->job + ": fence " + std::to_string(highest) + " seen, but only " +
                     std::to_string(claims_.size()) + " acknowledged and " +
                     std::to_string(unknown_claims_.size()) +
                     " unanswered claims could have issued fences (a gap)");
    }
    for (const auto& [fa, la] : claims_) {
      for (const auto& [fb, lb] : claims_) {
        if (fa >= fb && before(*la.front(), *lb.front())) {
          violation("fence " + std::to_string(fb) + " issued after fence " + std::to_string(fa) +
                        " was acknowledged",
                    *lb.front());
        }
      }
    }
  }

  void check_enqueues() {
    const Op* created = nullptr;
    for (const Op* e : ops_) {
      if (e->kind != Kind::enqueue || !e->acked()) continue;
      if (e->flag) {
        // A cut may have taken the job back, creation included.
        if (created && !lost_at_cut(*created, *e)) violation("enqueue answered true twice", *e);
        created = e;
      } else if (!exists_before(*e, e)) {
        violation("enqueue answered false for a job no request created", *e);
      }
    }
  }

  // Some enqueue other than `self` may have created the job before `at` was answered.
  bool exists_before(const Op& at, const Op* self = nullptr) const {
    for (const Op* e : ops_) {
      if (e != self && e->kind == Kind::enqueue && e->maybe_applied() && could_precede(*e, at)) {
        return true;
      }
    }
    return false;
  }

  void check_claim(const Op& c) {
    const std::int64_t m = *c.fence_got;
    if (!exists_before(c)) violation("claim succeeded on a job never enqueued", c);
    for (const Op* x : ops_) {
      // Only a complete sent before c was answered: one sent later is judged
      // as a superseded write (and a fence handed out twice would otherwise
      // match a later complete to an earlier claim).
      if (x->kind == Kind::complete && acked_success(*x) && x->fence < m && could_precede(*x, c) &&
          !lost_at_cut(*x, c)) {
        violation("claim succeeded (fence " + std::to_string(m) +
                      ") on a job completed with fence " + std::to_string(x->fence),
                  c);
      }
    }
    if (m < 2) return;
    // The lease m-1 must have ended (until <= now) when claim m was applied.
    // In lossy mode only when no cut lies between claim m-1 and claim m: a
    // cut may have taken back m-1 or its renews, and the lease before m may
    // be an older one, or none (fences jump after a cut).
    std::vector<double> ends;
    {
      // Across a restore the same: it ended every lease, and the first claim
      // after it follows the floor (m-1), which no claim handed out.
      const Op* prev = acked_claim(m - 1);
      if (prev ? restore_between(*prev, c) : (restored_before(c) && (m - 1) % kEpoch == 0)) {
        return;
      }
    }
    if (opt_.lossy) {
      const Op* prev = acked_claim(m - 1);
      if (prev ? cut_between(*prev, c)
               : std::any_of(opt_.cuts.begin(), opt_.cuts.end(),
                             [&](std::uint64_t cut) { return cut < c.returned; })) {
        return;
      }
    }
    if (const Op* prev = acked_claim(m - 1)) {
      for (const Op* r : ops_) {
        if (r->kind == Kind::release && r->owner == prev->owner && r->fence == m - 1 &&
            maybe_succeeded(*r) && could_precede(*r, c)) {
          return;  // possibly released: until = 0
        }
      }
      ++sum_.leases_expired;
      // The until in force is the one set last: by the latest acknowledged
      // renew (one no other acknowledged renew followed), else by the claim,
      // or by any renew whose outcome is unknown.
      std::vector<const Op*> acked_renews, unknown_renews;
      for (const Op* r : ops_) {
        if (r->kind != Kind::renew || r->owner != prev->owner || r->fence != m - 1) continue;
        if (!could_precede(*r, c)) continue;  // sent after c was answered: not in force at c
        if (acked_success(*r)) acked_renews.push_back(r);
        if (r->outcome == Outcome::unknown && could_precede(*r, c)) unknown_renews.push_back(r);
      }
      for (const Op* r : acked_renews) {
        bool superseded = std::any_of(acked_renews.begin(), acked_renews.end(),
                                      [&](const Op* r2) { return before(*r, *r2); });
        if (!superseded) ends.push_back(lease_end(*r));
      }
      if (acked_renews.empty()) ends.push_back(lease_end(*prev));
      for (const Op* r : unknown_renews) ends.push_back(lease_end(*r));
    } else {
      // Fence m-1 came from a claim whose reply was lost: any of them.
      for (const Op* u : unknown_claims_) {
        if (could_precede(*u, c)) ends.push_back(lease_end(*u));
      }
      if (ends.empty()) return;  // reported as a gap
    }
    double earliest = *std::min_element(ends.begin(), ends.end());
    if (earliest > c.now) {
      std::ostringstream s;
      s.precision(17);
      s << "claim succeeded at now=" << c.now << " while lease " << (m - 1)
        << " was live until >= " << earliest;
      violation(s.str(), c);
    }
  }

  void check_write(const Op& w) {
    const char* what = kind_name(w.kind);
    const Op* issued = acked_claim(w.fence);
    if (issued && !acked_to(w.fence, w.owner)) {
      violation(std::string(what) + " succeeded with fence " + std::to_string(w.fence) +
                    " which was issued to " + issued->owner,
                w);
    }
    check_holder(w);
    check_restored_lease(w, w.owner, w.fence);
    if (!issued) {
      bool maybe = std::any_of(unknown_claims_.begin(), unknown_claims_.end(), [&](const Op* u) {
        return u->owner == w.owner && could_precede(*u, w);
      });
      if (!maybe) {
        violation(std::string(what) + " succeeded with a fence never issued to its owner", w);
      }
    }
    // One report per write, naming the highest fence acknowledged before it.
    for (auto it = claims_.rbegin(); it != claims_.rend() && it->first > w.fence; ++it) {
      const auto& list = it->second;
      if (std::any_of(list.begin(), list.end(), [&](const Op* c) { return before(*c, w); })) {
        violation(std::string(what) + " succeeded with fence " + std::to_string(w.fence) +
                      " after fence " + std::to_string(it->first) +
                      " was issued (superseded lease)",
                  w);
        break;
      }
    }
    int concurrent_completes = 0;
    for (const Op* x : ops_) {
      if (x == &w) continue;
      if (x->kind == Kind::complete && acked_success(*x)) {
        if (before(*x, w)) {
          if (!lost_at_cut(*x, w)) {
            violation(std::string(what) + " succeeded on a job already done", w);
          }
        } else if (w.kind == Kind::complete && x->invoked < w.invoked &&
                   !(opt_.lossy && cut_between(*x, w)) && !restore_may_lose(*x, w)) {
          // Sent before w, answered after w was sent: of two successful
          // completes without a real-time order, each pair is reported
          // once, here, at the later-sent one.
          ++concurrent_completes;
        }
      }
      if (x->kind == Kind::release && acked_success(*x) && x->owner == w.owner &&
          x->fence == w.fence && before(*x, w) && !lost_at_cut(*x, w)) {
        violation(std::string(what) + " succeeded after its lease was released", w);
      }
    }
    if (concurrent_completes > 0) {
      violation("job completed successfully " + std::to_string(concurrent_completes + 1) +
                    " times (concurrent completes)",
                w);
    }
    if (w.kind == Kind::release) return;  // release does not look at the time (C3.6)
    auto ends = lease_ends(w.owner, w.fence, w);
    double latest = ends.empty() ? 0 : *std::max_element(ends.begin(), ends.end());
    if (w.now >= latest) {
      std::ostringstream s;
      s.precision(17);
      s << what << " succeeded at now=" << w.now << " but lease " << w.fence
        << " had ended at the latest at " << latest << " (expired lease)";
      violation(s.str(), w);
    }
  }

  // The worker that sent w holds its fence from its own latest claim that
  // answered it. If that fence was handed out again to a later claim, which
  // was acknowledged before w was sent, w came from a superseded holder, and
  // the daemon accepted it only because the new holder has the same owner
  // name (workers share names): the stale write the fence exists to stop.
  void check_holder(const Op& w) {
    const auto& list = acked_claims(w.fence);
    if (list.size() < 2) return;
    const Op* mine = nullptr;
    for (const Op* c : list) {
      if (c->thread == w.thread && before(*c, w) && (!mine || c->invoked > mine->invoked)) mine = c;
    }
    if (!mine) return;
    for (const Op* c : list) {
      if (c != mine && c->invoked > mine->invoked && before(*c, w)) {
        violation(std::string(kind_name(w.kind)) + " succeeded with fence " +
                      std::to_string(w.fence) + " of its own claim [" + describe(*mine) +
                      "] after that fence was handed out again [" + describe(*c) +
                      "] (stale holder accepted)",
                  w);
        return;
      }
    }
  }

  void check_state(const Op& s) {
    if (!s.row) {
      for (const Op* x : ops_) {
        bool made = (x->kind == Kind::enqueue && x->acked()) ||
                    (x->kind == Kind::claim && acked_success(*x));
        if (made && before(*x, s) && !lost_at_cut(*x, s)) {
          violation("state shows no job after " + describe(*x) + " was acknowledged", s);
          return;
        }
      }
      return;
    }
    const Row& r = *s.row;
    if (!exists_before(s)) violation("state shows a job no enqueue created", s);
    // A row raised at a recovery or restore (below) keeps its owner, result
    // and done; only its fence moved to the floor.
    const bool raised = raised_at_recovery(r, s);
    std::int64_t claims_sent = 0;
    for (const Op* x : ops_) {
      if (x->kind == Kind::claim && maybe_succeeded(*x) && could_precede(*x, s)) ++claims_sent;
      if (x->kind == Kind::claim && acked_success(*x) && before(*x, s) && r.fence < *x->fence_got &&
          !lost_at_cut(*x, s)) {
        violation("state shows fence " + std::to_string(r.fence) + " after fence " +
                      std::to_string(*x->fence_got) + " was acknowledged (lost claim)",
                  s);
      }
      if (x->kind == Kind::complete && acked_success(*x) && before(*x, s)) {
        if ((!r.done || r.result != x->result || (r.fence != x->fence && !raised) ||
             r.owner != x->owner) &&
            !lost_at_cut(*x, s)) {
          violation("state does not show the acknowledged " + describe(*x) + " (lost complete)", s);
        }
      }
    }
    if (!opt_.lossy && !restored_before(s) && r.fence > claims_sent) {
      violation("state shows fence " + std::to_string(r.fence) + " but only " +
                    std::to_string(claims_sent) + " claims could have succeeded",
                s);
    }
    if (raised) ++sum_.raised_at_recovery;
    if ((opt_.lossy || restored_before(s)) && r.fence > 0 && !raised && !handed_out(r.fence, s)) {
      // Fences may jump, so counting claims says nothing; the fence must
      // still be one a claim may have handed out.
      violation("state shows fence " + std::to_string(r.fence) + " which no claim handed out", s);
    }
    if (r.result && !r.done) violation("state shows a result on a job not done", s);
    if (raised) return;  // the rest of the row is what it was before the cut
    if (r.done) {
      bool written = std::any_of(ops_.begin(), ops_.end(), [&](const Op* x) {
        return x->kind == Kind::complete && maybe_succeeded(*x) && could_precede(*x, s) &&
               x->fence == r.fence && x->owner == r.owner && x->result == r.result;
      });
      if (!written) violation("state shows done with a result no complete wrote", s);
    }
    if (r.owner) {
      if (r.fence < 1) violation("state shows an owner with fence 0", s);
      check_restored_lease(s, *r.owner, r.fence);
      auto ends = lease_ends(*r.owner, r.fence, s);
      bool issued = false;
      if (acked_claim(r.fence)) {
        issued = acked_to(r.fence, *r.owner);
      } else {
        issued = std::any_of(unknown_claims_.begin(), unknown_claims_.end(), [&](const Op* u) {
          return u->owner == *r.owner && could_precede(*u, s);
        });
      }
      if (!issued) violation("state shows a lease no claim issued", s);
      if (std::find(ends.begin(), ends.end(), r.until) == ends.end()) {
        std::ostringstream m;
        m.precision(17);
        m << "state shows until=" << r.until << " which no claim or renew of that lease set";
        violation(m.str(), s);
      }
    } else {
      if (r.until != 0) violation("state shows no owner but until != 0", s);
      if (r.fence > 0) {
        bool released = std::any_of(ops_.begin(), ops_.end(), [&](const Op* x) {
          return x->kind == Kind::release && maybe_succeeded(*x) && x->fence == r.fence &&
                 could_precede(*x, s);
        });
        if (!released) violation("state shows no owner but no release of that lease was sent", s);
      }
    }
  }

  // In lossy mode, fenceqd starting after the unclean stop of a lossy run
  // raises every fence to its new fence epoch's floor (a multiple of 2^32)
  // and ends the leases the cut may have brought back (C1.2): a row may then
  // show that floor, with no lease, or done as it was. It must lie past every
  // fence handed out before the read: none of them can ever match it.
  // A restore (C1.5) does the same at the start on the copy, in any mode.
  bool raised_at_recovery(const Row& r, const Op& s) const {
    if (r.fence < kEpoch || r.fence % kEpoch != 0) return false;
    // The last cut (lossy) or restore before the read was answered: the raise
    // happened at the start after it (or a later one). No claim sent before
    // it may have handed out a fence at or past the floor.
    std::optional<std::uint64_t> cut;
    for (auto c : opt_.cuts) {
      if (opt_.lossy && c < s.returned && (!cut || c > *cut)) cut = c;
    }
    for (const Restore& x : opt_.restores) {
      if (x.at < s.returned && (!cut || x.at > *cut)) cut = x.at;
    }
    if (!cut) return false;
    for (const auto& [fence, list] : claims_) {
      if (fence >= r.fence && std::any_of(list.begin(), list.end(), [&](const Op* c) {
            return c->invoked < *cut;
          })) {
        return false;
      }
    }
    return true;
  }

  // Some claim answered `fence` (acknowledged, or unanswered and sent before
  // `at` was answered).
  bool handed_out(std::int64_t fence, const Op& at) const {
    auto sent = [&](const Op* c) { return could_precede(*c, at); };
    const auto& acked = acked_claims(fence);
    return std::any_of(acked.begin(), acked.end(), sent) ||
           std::any_of(unknown_claims_.begin(), unknown_claims_.end(), sent);
  }

  // Reads in real-time order never go back: fence, done, existence (in
  // lossy mode: unless a cut lies between them).
  void check_state_order() {
    std::vector<const Op*> reads;
    for (const Op* s : ops_) {
      if (s->kind == Kind::state && s->acked()) reads.push_back(s);
    }
    for (const Op* a : reads) {
      for (const Op* b : reads) {
        if (!before(*a, *b) || !a->row) continue;
        const bool back = !b->row || b->row->fence < a->row->fence || (a->row->done && !b->row->done);
        if (back && lost_at_cut(*a, *b)) continue;
        if (!b->row) {
          violation("job vanished: an earlier state showed it", *b);
        } else if (b->row->fence < a->row->fence || (a->row->done && !b->row->done)) {
          violation("state went back: fence " + std::to_string(a->row->fence) + " -> " +
                        std::to_string(b->row->fence),
                    *b);
        }
      }
    }
  }

  std::vector<const Op*> ops_;
  const Options& opt_;
  std::vector<std::string>& out_;
  Summary& sum_;
  std::map<std::int64_t, std::vector<const Op*>> claims_;  // acknowledged, by fence
  std::vector<const Op*> unknown_claims_;
};

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::enqueue:
      return "enqueue";
    case Kind::claim:
      return "claim";
    case Kind::renew:
      return "renew";
    case Kind::complete:
      return "complete";
    case Kind::release:
      return "release";
    case Kind::state:
      return "state";
  }
  return "?";
}

std::string describe(const Op& op) {
  std::ostringstream s;
  s.precision(17);
  s << "t" << op.thread << " " << kind_name(op.kind) << "(" << op.job;
  if (op.kind != Kind::enqueue && op.kind != Kind::state) s << ", " << op.owner;
  if (is_write(op.kind)) s << ", fence=" << op.fence;
  if (op.kind == Kind::claim || op.kind == Kind::renew) s << ", ttl=" << op.ttl;
  if (op.kind == Kind::complete) s << ", " << fmt_opt(op.result);
  if (op.kind == Kind::claim || op.kind == Kind::renew || op.kind == Kind::complete) {
    s << ", now=" << op.now;
  }
  s << ") @" << op.invoked << "..";
  if (op.returned == kNever) {
    s << "? unknown (" << op.error << ")";
    return s.str();
  }
  s << op.returned << " -> ";
  if (op.outcome == Outcome::refused) {
    s << "error " << op.error;
  } else if (op.kind == Kind::claim) {
    s << (op.fence_got ? std::to_string(*op.fence_got) : "nil");
  } else if (op.kind == Kind::state) {
    if (!op.row) {
      s << "nil";
    } else {
      s << "{owner=" << fmt_opt(op.row->owner) << " until=" << op.row->until
        << " fence=" << op.row->fence << " result=" << fmt_opt(op.row->result)
        << " done=" << op.row->done << "}";
    }
  } else {
    s << (op.flag ? "true" : "false");
  }
  return s.str();
}

std::vector<std::string> check(const std::vector<Op>& ops, Summary& summary,
                               const Options& options) {
  std::map<std::string, std::vector<const Op*>> by_job;
  for (const Op& op : ops) {
    by_job[op.job].push_back(&op);
    ++summary.operations;
    switch (op.outcome) {
      case Outcome::ok:
        ++summary.acknowledged;
        break;
      case Outcome::refused:
        ++summary.refused;
        break;
      case Outcome::unknown:
        ++summary.unknown;
        break;
    }
  }
  summary.jobs = by_job.size();
  summary.cuts = options.cuts.size();
  summary.restores = options.restores.size();
  std::vector<std::string> violations;
  for (auto& [job, list] : by_job) {
    std::sort(list.begin(), list.end(),
              [](const Op* a, const Op* b) { return a->invoked < b->invoked; });
    JobChecker(list, options, violations, summary).run();
  }
  return violations;
}

}  // namespace fenceq::history
