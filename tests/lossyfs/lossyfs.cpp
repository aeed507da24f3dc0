// fenceq-lossyfs: a FUSE file system that forgets, at a simulated power cut,
// every change that was not made durable (in the spirit of Jepsen's LazyFS).
// It exists to test fenceqd's durability claims: kill -9 the daemon, cut the
// power (SIGUSR1), restart the daemon on the same mount, check what survived.
//
//   fenceq-lossyfs [--torn] [--seed N] [--debug] BACKING MOUNT
//
// The durability model (what a power cut keeps):
//   - file data and size: only what was written before the file's last
//     fsync/fdatasync (or msync(MS_SYNC) of a shared mapping);
//   - a name in a directory (create, mkdir, mknod, symlink, link, unlink,
//     rmdir, rename): only once that directory was fsynced (FUSE fsyncdir).
//     An fsync of a file never makes its name durable. Namespace operations
//     are kept in one log; an fsync of directory D commits every pending
//     operation on an entry of D plus, transitively, every earlier pending
//     operation it conflicts with (the same entry; an inode's creation or
//     unlink against a link to it; a directory's rmdir against the
//     operations inside it; see `Res`). So the durable tree is always the
//     result of running a conflict-closed subset of the operations in their
//     order: never a file in two places, never a link to an inode that lost
//     all its names. An operation inside a new directory does not commit the
//     directory's mkdir: mkdir d; create d/f; fsync(f); fsync(d) without an
//     fsync of d's parent loses d and f (d was an unreachable inode).
//     Operations that commute (other names, other directories) stay pending:
//     this is stricter than ext4, whose journal commits every earlier
//     operation at once. (Renames of a directory below itself are refused
//     live, but the closure does not track ancestry: a workload that renames
//     directories across each other's subtrees is outside what it checks.)
//   - mode, owner and times: with the file's fsync (or directory's fsyncdir).
//   - --torn: at the cut, of each file's last unsynced write a prefix reaches
//     the disk, ending at a random absolute 512-byte sector boundary inside
//     the write (or at its start or end); every earlier unsynced write is
//     lost. "A write" is one FUSE write request: the kernel sends a write(2)
//     that starts inside a page as two (the partial first page, then the
//     rest) and splits at max_write (1 MiB). --seed N makes the choices
//     reproducible (given the same requests in the same order).
//
// Design: BACKING always holds the durable state, laid out as the durable
// tree, plus a hidden BACKING/.lossyfs-orphans/ for inodes that are durable
// but have no durable name yet (a file fsynced, or a directory written into,
// before its creation was committed): renamed into place when it is, deleted
// at a cut. The live state (what MOUNT shows) is kept in memory on top of it:
// per directory the live entries (loaded lazily from BACKING), per file a map
// of dirty extents, the live size and the lowest size it was truncated to
// since its last fsync ("clean_limit": below it unwritten bytes come from
// BACKING, above it they are zeros), plus the log of pending namespace
// operations. fsync writes a file's extents into its BACKING inode;
// fsyncdir replays the committed operations on BACKING with *at() calls on
// directory fds. Every node holds an fd on its BACKING inode, so renames in
// BACKING never lose track of it. A power cut therefore only has to drop the
// memory: it resets every node from its BACKING inode, deletes the orphans and
// reloads the directories that were loaded, reusing a node (and its FUSE inode
// number) when it finds the same BACKING inode again. BACKING is not fsynced on
// the host: the host does not lose power, only this file system does.
//
// Kernel caches (what must stay true for MOUNT to show the durable state after
// a cut):
//   - no writeback cache (FUSE default): every write(2) reaches this process
//     before it returns, so our live state is the file's content;
//   - entry and attribute timeouts are 0, so every path walk and stat asks us;
//   - the page cache is kept across opens (keep_cache) because it is always
//     equal to our live state, except at a cut: then every inode the kernel
//     knows is invalidated (fuse_lowlevel_notify_inval_inode) twice, once
//     before the reset (so dirty pages of shared mappings are written back and
//     dropped with the rest) and once after (so no page of the dropped state
//     stays cached). Notifications are sent from the cut thread, never while
//     holding our mutex: the kernel may need the request loop to serve a
//     write-back before it returns.
//   - no direct_io: SQLite's WAL mode maps the -shm file MAP_SHARED, which
//     FUSE refuses on direct_io files (tried: mmap fails with ENODEV and
//     SQLite with "disk I/O error"; libfuse 3.14 cannot ask for
//     FUSE_DIRECT_IO_ALLOW_MMAP). Shared mappings work through the page
//     cache; their dirty pages reach us as writes (at msync, fsync, close or
//     write-back) and, like any write, stay volatile until an fsync. O_DIRECT
//     and O_SYNC opens need nothing special: the kernel sends the writes
//     (and, for O_SYNC, an fsync) itself.
//   - no lock operations are implemented, so the kernel keeps POSIX (fcntl)
//     and flock locks itself: they work between processes of this machine,
//     which is all SQLite and fenceqd's lock file need.
//
// Mounting uses libfuse's auto_unmount: a fusermount3 child unmounts MOUNT
// even when this process is killed with SIGKILL (not when both are).
//
// Signals: SIGUSR1 cuts the power (and the process keeps serving); SIGTERM,
// SIGINT or SIGHUP unmount and exit 0 (after a cut in progress has finished).
// A clean exit is a clean unmount: every pending change is written to BACKING
// first (like a page cache flush), so send SIGUSR1 before SIGTERM to keep only
// the durable state. One line on stdout says the mount is ready; each cut
// writes one line to stderr.
//
// Requests are served by one thread (the libfuse single-threaded loop); cuts
// and exits run in a second thread that takes every signal; both hold `Fs::mu`
// while they touch the state.

#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr const char* kOrphans = ".lossyfs-orphans";  // hidden, in BACKING's root
constexpr uint64_t kSector = 512;                     // torn-write granularity

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

timespec now() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

enum class Kind { file, dir, symlink, special };

Kind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return Kind::file;
  if (S_ISDIR(mode)) return Kind::dir;
  if (S_ISLNK(mode)) return Kind::symlink;
  return Kind::special;
}

// One inode as MOUNT shows it. Its durable twin is `fd`'s inode in BACKING.
struct Node {
  uint64_t id = 0;  // the FUSE inode number; never reused
  Kind kind = Kind::file;
  // Live attributes (durable ones are `fd`'s).
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  dev_t rdev = 0;
  timespec atime{}, mtime{}, ctime{};
  bool attr_dirty = false;  // mode/owner/times differ from BACKING's
  uint32_t nlink = 0;       // live names
  uint64_t nlookup = 0;     // the kernel's references (lookup count)
  uint32_t open = 0;        // open file and directory handles
  // The BACKING inode: O_RDWR for files, O_DIRECTORY for directories, O_PATH
  // for the rest. None while nothing of the node is durable yet.
  Fd fd;
  bool orphan = false;  // fd is BACKING/.lossyfs-orphans/o<id> (a file or a directory)
  // Files. Invariant: clean_limit <= min(durable_size, live_size); extents
  // never overlap, never touch each other's ends, and end <= live_size.
  uint64_t live_size = 0, durable_size = 0, clean_limit = 0;
  std::map<uint64_t, std::string> extents;                     // offset -> unsynced bytes
  std::optional<std::pair<uint64_t, std::string>> last_write;  // for --torn
  // Directories.
  std::map<std::string, std::shared_ptr<Node>> entries;  // live, once loaded
  bool loaded = false;
  bool was_loaded = false;  // during a cut: reload it
  std::weak_ptr<Node> parent;
  // Symlinks.
  std::string target;
};
using NodeP = std::shared_ptr<Node>;

// A pending namespace operation. `create` also stands for mkdir, mknod and
// symlink, `unlink` for rmdir (the node's kind tells).
struct Op {
  enum Type { create, link, unlink, rename } type = create;
  NodeP dir, node;  // the entry (dir, name) of node; rename: its source
  std::string name;
  NodeP dir2, replaced;  // rename: the target entry and the node it replaced
  std::string name2;
};

// What an operation writes or reads, for the commit closure: an entry
// (dir, name), the names of an inode ("links": written by what adds its first
// name or removes one, read by link(2), which needs the inode alive), or the
// existence of a directory ("exists": written by rmdir, read by every
// operation inside it, so the directory is empty in BACKING when its rmdir is
// replayed; mkdir does not write it: a directory can be durable before its
// name is, as an orphan). Two operations conflict when one writes what the
// other reads or writes; links to one inode, or operations on other entries,
// commute. A rename writes both entries and the replaced inode's links, not
// the moved inode's: it keeps its link count.
struct Res {
  enum Type { entry, links, exists } type;
  uint64_t id;
  std::string name;
  bool operator<(const Res& o) const {
    return std::tie(type, id, name) < std::tie(o.type, o.id, o.name);
  }
};

void resources(const Op& op, std::vector<Res>& w, std::vector<Res>& r) {
  w.push_back({Res::entry, op.dir->id, op.name});
  r.push_back({Res::exists, op.dir->id, ""});
  switch (op.type) {
    case Op::create:
      w.push_back({Res::links, op.node->id, ""});
      break;
    case Op::unlink:
      w.push_back({Res::links, op.node->id, ""});
      if (op.node->kind == Kind::dir) w.push_back({Res::exists, op.node->id, ""});
      break;
    case Op::link:
      r.push_back({Res::links, op.node->id, ""});
      break;
    case Op::rename:
      w.push_back({Res::entry, op.dir2->id, op.name2});
      r.push_back({Res::exists, op.dir2->id, ""});
      if (op.replaced) {
        w.push_back({Res::links, op.replaced->id, ""});
        if (op.replaced->kind == Kind::dir) w.push_back({Res::exists, op.replaced->id, ""});
      }
      break;
  }
}

struct Fs {
  std::mutex mu;
  std::string backing, mountpoint;
  fuse_session* se = nullptr;
  NodeP root;
  Fd orphans;
  uint64_t next_id = FUSE_ROOT_ID + 1;
  uint64_t next_fh = 1;
  // Nodes the kernel holds (nlookup > 0) or that have open handles.
  std::unordered_map<uint64_t, NodeP> table;
  // Every node alive, to reset them all at a cut (expired ones are purged).
  std::unordered_map<uint64_t, std::weak_ptr<Node>> all;
  // BACKING inode -> node, so a reload finds the node it had.
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<Node>> by_backing;
  // Files with unsynced data or size (ordered: --seed must replay the same).
  std::map<uint64_t, NodeP> dirty;
  std::vector<Op> pending;  // namespace operations not yet durable, in order
  std::unordered_map<uint64_t, std::vector<std::tuple<std::string, uint64_t, mode_t>>> dirs;
  bool torn = false;
  std::mt19937_64 rng;
  uint64_t cuts = 0;
  bool debug = false;
};

Fs g;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("lossyfs: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

// --- nodes -----------------------------------------------------------------

void register_backing(const NodeP& n) {
  struct stat st {};
  if (n->fd && ::fstat(n->fd.get(), &st) == 0) g.by_backing[{st.st_dev, st.st_ino}] = n;
}

NodeP new_node(Kind kind, mode_t mode, uid_t uid, gid_t gid) {
  auto n = std::make_shared<Node>();
  n->id = g.next_id++;
  n->kind = kind;
  n->mode = mode;
  n->uid = uid;
  n->gid = gid;
  n->atime = n->mtime = n->ctime = now();
  g.all[n->id] = n;
  return n;
}

void attrs_from(Node& n, const struct stat& st) {
  n.mode = st.st_mode;
  n.uid = st.st_uid;
  n.gid = st.st_gid;
  n.rdev = st.st_rdev;
  n.atime = st.st_atim;
  n.mtime = st.st_mtim;
  n.ctime = st.st_ctim;
  n.attr_dirty = false;
  if (n.kind == Kind::file) {
    n.live_size = n.durable_size = n.clean_limit = static_cast<uint64_t>(st.st_size);
  }
}

// The node for BACKING entry `name` of directory fd `dirfd`: the one already
// holding that inode, or a new one. Null when it cannot be opened.
NodeP adopt(int dirfd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return nullptr;
  auto it = g.by_backing.find({st.st_dev, st.st_ino});
  if (it != g.by_backing.end()) {
    if (auto n = it->second.lock(); n && n->kind == kind_of(st.st_mode)) return n;
  }
  Kind kind = kind_of(st.st_mode);
  int fd = -1;
  switch (kind) {
    case Kind::file:
      fd = ::openat(dirfd, name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      break;
    case Kind::dir:
      fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      break;
    default:
      fd = ::openat(dirfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) {
    say("cannot open %s in BACKING: %s (left out)", name.c_str(), std::strerror(errno));
    return nullptr;
  }
  auto n = new_node(kind, st.st_mode, st.st_uid, st.st_gid);
  n->fd.reset(fd);
  attrs_from(*n, st);
  if (kind == Kind::symlink) {
    std::string buf(PATH_MAX, '\0');
    ssize_t len = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
    n->target = len > 0 ? buf.substr(0, static_cast<std::size_t>(len)) : "";
  }
  g.by_backing[{st.st_dev, st.st_ino}] = n;
  return n;
}

// Fills d's live entries from its BACKING directory (d's durable entries are
// its live ones until an operation in d, and every operation loads d first).
int load_dir(const NodeP& d) {
  d->entries.clear();
  d->loaded = true;
  if (!d->fd) return 0;  // created live, or lost at a cut: empty
  int fd = ::openat(d->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  DIR* dp = ::fdopendir(fd);
  if (!dp) {
    ::close(fd);
    return errno;
  }
  while (dirent* de = ::readdir(dp)) {
    std::string name = de->d_name;
    if (name == "." || name == ".." || (d == g.root && name == kOrphans)) continue;
    NodeP child = adopt(d->fd.get(), name);
    if (!child) continue;
    d->entries[name] = child;
    child->nlink++;
    if (child->kind == Kind::dir) child->parent = d;
  }
  ::closedir(dp);
  return 0;
}

int ensure_loaded(const NodeP& d) { return d->loaded ? 0 : load_dir(d); }

NodeP get(fuse_ino_t ino) {
  auto it = g.table.find(ino);
  return it == g.table.end() ? nullptr : it->second;
}

// Drops the kernel's and handles' hold on a node (dir maps and pending
// operations keep their own).
void maybe_drop(const NodeP& n) {
  if (n->nlookup == 0 && n->open == 0 && n != g.root) g.table.erase(n->id);
}

struct stat stat_of(const Node& n) {
  struct stat st {};
  st.st_ino = n.id;
  st.st_mode = n.mode;
  st.st_uid = n.uid;
  st.st_gid = n.gid;
  st.st_rdev = n.rdev;
  st.st_atim = n.atime;
  st.st_mtim = n.mtime;
  st.st_ctim = n.ctime;
  st.st_blksize = 4096;
  switch (n.kind) {
    case Kind::file:
      st.st_size = static_cast<off_t>(n.live_size);
      break;
    case Kind::dir:
      st.st_size = 4096;
      break;
    case Kind::symlink:
      st.st_size = static_cast<off_t>(n.target.size());
      break;
    case Kind::special:
      break;
  }
  // Directories report 1 link ("unknown", like btrfs) so no tool infers a
  // subdirectory count from it.
  st.st_nlink = n.kind == Kind::dir ? (n.nlink > 0 ? 1 : 0) : n.nlink;
  st.st_blocks = (st.st_size + 511) / 512;
  return st;
}

void reply_entry(fuse_req_t req, const NodeP& n) {
  fuse_entry_param e{};
  e.ino = n->id;
  e.generation = 1;
  e.attr = stat_of(*n);
  e.attr_timeout = 0;
  e.entry_timeout = 0;
  if (fuse_reply_entry(req, &e) == 0) {
    n->nlookup++;
    g.table[n->id] = n;
  }
}

// --- file data -------------------------------------------------------------

void mark_dirty(const NodeP& n) {
  if (n->kind == Kind::file) g.dirty[n->id] = n;
}

// Puts `len` bytes at `off` into the extents, merging every extent it
// overlaps or touches (sequential appends grow one string in place).
void put_extent(Node& n, uint64_t off, const char* data, uint64_t len) {
  if (len == 0) return;
  uint64_t end = off + len;
  auto it = n.extents.upper_bound(off);
  if (it != n.extents.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size() >= off) it = prev;
  }
  if (it == n.extents.end() || it->first > end) {
    n.extents.emplace(off, std::string(data, len));
    return;
  }
  uint64_t start = std::min(it->first, off);
  auto last = it;
  uint64_t new_end = end;
  for (auto j = it; j != n.extents.end() && j->first <= end; ++j) {
    new_end = std::max<uint64_t>(new_end, j->first + j->second.size());
    last = j;
  }
  std::string buf;
  auto from = it;
  if (it->first == start) {
    buf = std::move(it->second);  // already at position 0
    ++from;
  }
  buf.resize(new_end - start);
  for (auto j = from; j != std::next(last); ++j) {
    std::memcpy(buf.data() + (j->first - start), j->second.data(), j->second.size());
  }
  std::memcpy(buf.data() + (off - start), data, len);
  n.extents.erase(it, std::next(last));
  n.extents.emplace(start, std::move(buf));
}

int read_live(const Node& n, uint64_t off, std::string& out) {
  uint64_t end = off + out.size();
  if (n.fd && off < n.clean_limit) {
    uint64_t bend = std::min(end, n.clean_limit);
    uint64_t pos = off;
    while (pos < bend) {
      ssize_t r =
          ::pread(n.fd.get(), out.data() + (pos - off), bend - pos, static_cast<off_t>(pos));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return errno;
      if (r == 0) break;  // shorter than expected: the rest reads as zeros
      pos += static_cast<uint64_t>(r);
    }
  }
  auto it = n.extents.upper_bound(off);
  if (it != n.extents.begin()) --it;
  for (; it != n.extents.end() && it->first < end; ++it) {
    uint64_t s = std::max(off, it->first);
    uint64_t e = std::min<uint64_t>(end, it->first + it->second.size());
    if (s < e) std::memcpy(out.data() + (s - off), it->second.data() + (s - it->first), e - s);
  }
  return 0;
}

void truncate_live(const NodeP& n, uint64_t size) {
  if (size < n->live_size) {
    n->extents.erase(n->extents.lower_bound(size), n->extents.end());
    if (!n->extents.empty()) {
      auto& [start, data] = *std::prev(n->extents.end());
      if (start + data.size() > size) data.resize(size - start);
    }
    n->clean_limit = std::min(n->clean_limit, size);
  }
  n->live_size = size;
  n->last_write.reset();  // the file's last change is no longer a write
  n->mtime = n->ctime = now();
  mark_dirty(n);
}

int write_all(int fd, const char* p, uint64_t len, uint64_t off) {
  while (len > 0) {
    ssize_t w = ::pwrite(fd, p, len, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    p += w;
    len -= static_cast<uint64_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return 0;
}

// Mode, owner and times to BACKING (only for fds that allow it).
int apply_attrs(Node& n) {
  if (!n.fd || !n.attr_dirty || n.kind == Kind::symlink || n.kind == Kind::special) return 0;
  if (::fchmod(n.fd.get(), n.mode & 07777) != 0) return errno;
  if (::fchown(n.fd.get(), n.uid, n.gid) != 0) return errno;
  timespec t[2] = {n.atime, n.mtime};
  if (::futimens(n.fd.get(), t) != 0) return errno;
  n.attr_dirty = false;
  return 0;
}

// An orphan's name in BACKING/.lossyfs-orphans/.
std::string orphan_name(const Node& n) { return "o" + std::to_string(n.id); }

// fsync: the file's live data becomes its BACKING inode's. A file none of
// whose names is durable yet gets an orphan inode, renamed into place when
// its name is committed (and deleted at a cut otherwise).
int sync_file(const NodeP& n) {
  if (n->fd && !n->attr_dirty && !g.dirty.count(n->id)) return 0;  // nothing unsynced
  if (!n->fd) {
    int fd = ::openat(g.orphans.get(), orphan_name(*n).c_str(),
                      O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, n->mode & 07777);
    if (fd < 0) return errno;
    n->fd.reset(fd);
    n->orphan = true;
    n->durable_size = n->clean_limit = 0;
    register_backing(n);
  }
  int fd = n->fd.get();
  uint64_t size = n->clean_limit;  // BACKING's size once the truncation is done
  if (n->clean_limit < n->durable_size && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return errno;
  }
  for (auto& [off, data] : n->extents) {
    if (int e = write_all(fd, data.data(), data.size(), off)) return e;
    size = std::max<uint64_t>(size, off + data.size());
  }
  if (size != n->live_size && ::ftruncate(fd, static_cast<off_t>(n->live_size)) != 0) return errno;
  n->attr_dirty = true;  // the writes changed BACKING's mtime
  if (int e = apply_attrs(*n)) return e;
  n->extents.clear();
  n->durable_size = n->clean_limit = n->live_size;
  n->last_write.reset();
  g.dirty.erase(n->id);
  return 0;
}

// --- namespace commits -------------------------------------------------------

int fail(const char* what, const Op& op) {
  int e = errno;
  say("commit: %s %s failed: %s", what, op.name.c_str(), std::strerror(e));
  return e ? e : EIO;
}

// A directory whose mkdir is still pending gets its BACKING inode when an
// operation inside it is committed first: an orphan, until its own name is.
int materialize(const NodeP& d) {
  if (d->fd) return 0;
  std::string o = orphan_name(*d);
  if (::mkdirat(g.orphans.get(), o.c_str(), d->mode & 07777) != 0) return errno;
  int fd = ::openat(g.orphans.get(), o.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  d->fd.reset(fd);
  d->orphan = true;
  d->attr_dirty = true;
  register_backing(d);
  return apply_attrs(*d);
}

// Empties a BACKING directory, subdirectories included (the orphans, at a cut).
void remove_contents(int dirfd) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* dp = ::fdopendir(fd);
  if (!dp) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* de = ::readdir(dp)) {
    if (std::strcmp(de->d_name, ".") && std::strcmp(de->d_name, "..")) names.push_back(de->d_name);
  }
  ::closedir(dp);
  for (auto& name : names) {
    if (::unlinkat(dirfd, name.c_str(), 0) == 0) continue;
    if (errno != EISDIR) continue;
    if (Fd sub{::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)}) {
      remove_contents(sub.get());
    }
    ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
  }
}

// Replays one operation on BACKING. Its directories have a BACKING inode
// there (maybe an orphan) whose durable entries hold what the live ones held
// when the operation ran (earlier operations on those entries conflict with
// it, so they were committed first).
int apply(const Op& op) {
  if (materialize(op.dir) != 0) return fail("directory", op);
  if (op.type == Op::rename && materialize(op.dir2) != 0) return fail("directory", op);
  const int dfd = op.dir->fd.get();
  Node& n = *op.node;
  switch (op.type) {
    case Op::create: {
      if (n.orphan) {  // durable already: give it its name
        if (::renameat(g.orphans.get(), orphan_name(n).c_str(), dfd, op.name.c_str()) != 0) {
          return fail("rename orphan", op);
        }
        n.orphan = false;
        return apply_attrs(n);
      }
      switch (n.kind) {
        case Kind::file:
          if (!n.fd) {
            int fd = ::openat(dfd, op.name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC,
                              n.mode & 07777);
            if (fd < 0) return fail("create", op);
            n.fd.reset(fd);
            n.durable_size = n.clean_limit = 0;
            n.attr_dirty = true;
          } else {
            errno = EEXIST;  // a second creation of one inode
            return fail("create", op);
          }
          break;
        case Kind::dir: {
          if (::mkdirat(dfd, op.name.c_str(), n.mode & 07777) != 0) return fail("mkdir", op);
          int fd = ::openat(dfd, op.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (fd < 0) return fail("open new directory", op);
          n.fd.reset(fd);
          n.attr_dirty = true;
          break;
        }
        case Kind::symlink:
        case Kind::special: {
          int rc = n.kind == Kind::symlink ? ::symlinkat(n.target.c_str(), dfd, op.name.c_str())
                                           : ::mknodat(dfd, op.name.c_str(), n.mode, n.rdev);
          if (rc != 0) return fail("symlink/mknod", op);
          int fd = ::openat(dfd, op.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
          if (fd < 0) return fail("open new node", op);
          n.fd.reset(fd);
          if (::fchownat(dfd, op.name.c_str(), n.uid, n.gid, AT_SYMLINK_NOFOLLOW) != 0) {
            return fail("chown new node", op);
          }
          break;
        }
      }
      register_backing(op.node);
      return apply_attrs(n);
    }
    case Op::link: {
      if (!n.fd) {
        errno = ENOENT;
        return fail("link (no inode)", op);
      }
      if (::linkat(n.fd.get(), "", dfd, op.name.c_str(), AT_EMPTY_PATH) != 0) {
        std::string proc = "/proc/self/fd/" + std::to_string(n.fd.get());
        if (::linkat(AT_FDCWD, proc.c_str(), dfd, op.name.c_str(), AT_SYMLINK_FOLLOW) != 0) {
          return fail("link", op);
        }
      }
      return 0;
    }
    case Op::unlink:
      if (::unlinkat(dfd, op.name.c_str(), n.kind == Kind::dir ? AT_REMOVEDIR : 0) != 0) {
        return fail("unlink", op);
      }
      return 0;
    case Op::rename:
      if (::renameat(dfd, op.name.c_str(), op.dir2->fd.get(), op.name2.c_str()) != 0) {
        return fail("rename", op);
      }
      return 0;
  }
  return EIO;
}

// fsyncdir(d), or d == nullptr: everything (a clean unmount).
int commit(const NodeP& d) {
  std::vector<bool> take(g.pending.size(), false);
  std::set<Res> acc_w, acc_r;
  std::vector<Res> w, r;
  for (std::size_t i = g.pending.size(); i-- > 0;) {
    const Op& op = g.pending[i];
    w.clear();
    r.clear();
    resources(op, w, r);
    bool in = !d || op.dir == d || (op.type == Op::rename && op.dir2 == d);
    for (auto& x : w) in = in || acc_w.count(x) || acc_r.count(x);
    for (auto& x : r) in = in || acc_w.count(x);
    if (!in) continue;
    take[i] = true;
    acc_w.insert(w.begin(), w.end());
    acc_r.insert(r.begin(), r.end());
  }
  int err = 0;
  std::vector<Op> rest;
  for (std::size_t i = 0; i < g.pending.size(); ++i) {
    if (!take[i]) {
      rest.push_back(std::move(g.pending[i]));
    } else if (int e = apply(g.pending[i]); e && !err) {
      err = e;
    }
  }
  g.pending = std::move(rest);
  if (d && !err) err = apply_attrs(*d);
  return err;
}

// --- the power cut -----------------------------------------------------------

std::vector<uint64_t> kernel_inodes() {
  std::lock_guard lk(g.mu);
  std::vector<uint64_t> ids;
  for (auto& [id, n] : g.table) ids.push_back(id);
  return ids;
}

// Drops the kernel's cached pages and attributes of every inode it holds,
// writing back dirty pages of shared mappings first (as writes to us).
void invalidate_kernel_caches() {
  for (uint64_t id : kernel_inodes()) fuse_lowlevel_notify_inval_inode(g.se, id, 0, 0);
}

// Reloads `d` and, below it, every directory that was loaded before the cut
// (so live link counts are right again for every node the kernel may use).
void reload(const NodeP& d) {
  if (!d->was_loaded) return;
  d->was_loaded = false;
  if (int e = load_dir(d)) say("cut: cannot reload a directory: %s", std::strerror(e));
  for (auto& [name, c] : d->entries) {
    if (c->kind == Kind::dir) reload(c);
  }
}

void power_cut() {
  invalidate_kernel_caches();
  uint64_t bytes = 0, files = 0, ops = 0, torn = 0, torn_bytes = 0;
  {
    std::lock_guard lk(g.mu);
    files = g.dirty.size();
    ops = g.pending.size();
    for (auto& [id, n] : g.dirty) {
      for (auto& [off, data] : n->extents) bytes += data.size();
      if (!g.torn || !n->last_write || !n->fd) continue;
      // A prefix of the last write, ending at an absolute sector boundary
      // strictly inside it, or at its start or end; all equally likely.
      const auto& [off, data] = *n->last_write;
      uint64_t end = off + data.size();
      uint64_t first = (off / kSector + 1) * kSector;
      uint64_t inner = first < end ? (end - 1 - first) / kSector + 1 : 0;
      uint64_t k = std::uniform_int_distribution<uint64_t>(0, inner + 1)(g.rng);
      uint64_t stop = k == 0 ? off : k == inner + 1 ? end : first + (k - 1) * kSector;
      if (stop > off) {
        if (int e = write_all(n->fd.get(), data.data(), stop - off, off)) {
          say("cut: torn write failed: %s", std::strerror(e));
        }
      }
      torn++;
      torn_bytes += stop - off;
    }
    g.dirty.clear();
    g.pending.clear();
    // Inodes durable before any name of theirs was: unreachable now.
    remove_contents(g.orphans.get());
    // Every node back to its BACKING inode (kept alive here while the
    // directory maps that held them are cleared).
    std::vector<NodeP> nodes;
    for (auto it = g.all.begin(); it != g.all.end();) {
      if (auto n = it->second.lock()) {
        nodes.push_back(std::move(n));
        ++it;
      } else {
        it = g.all.erase(it);
      }
    }
    for (auto& n : nodes) {
      n->nlink = 0;
      n->orphan = false;
      n->extents.clear();
      n->last_write.reset();
      struct stat st {};
      if (n->fd && ::fstat(n->fd.get(), &st) == 0) {
        attrs_from(*n, st);
      } else {
        n->live_size = n->durable_size = n->clean_limit = 0;
        n->attr_dirty = false;
      }
      if (n->kind == Kind::dir) {
        n->was_loaded = n->loaded;
        n->entries.clear();
        n->parent.reset();
        // A directory without a BACKING inode never existed durably: empty.
        n->loaded = !n->fd;
      }
    }
    g.root->nlink = 1;
    g.root->was_loaded = true;
    reload(g.root);
    for (auto it = g.by_backing.begin(); it != g.by_backing.end();) {
      it = it->second.expired() ? g.by_backing.erase(it) : std::next(it);
    }
    g.cuts++;
  }
  invalidate_kernel_caches();
  if (g.torn) {
    say("power cut %" PRIu64 ": dropped %" PRIu64 " unsynced bytes in %" PRIu64
        " files and %" PRIu64 " namespace ops; torn %" PRIu64 " writes (%" PRIu64
        " bytes reached the disk)",
        g.cuts, bytes, files, ops, torn, torn_bytes);
  } else {
    say("power cut %" PRIu64 ": dropped %" PRIu64 " unsynced bytes in %" PRIu64
        " files and %" PRIu64 " namespace ops",
        g.cuts, bytes, files, ops);
  }
}

// A clean unmount: every pending change written to BACKING.
void flush_all() {
  std::lock_guard lk(g.mu);
  auto dirty = g.dirty;
  for (auto& [id, n] : dirty) {
    if (int e = sync_file(n)) say("exit: cannot write back a file: %s", std::strerror(e));
  }
  if (int e = commit(nullptr)) say("exit: cannot commit: %s", std::strerror(e));
  for (auto& [id, w] : g.all) {
    if (auto n = w.lock()) apply_attrs(*n);
  }
}

// --- FUSE operations ---------------------------------------------------------

#define LOCK std::lock_guard lk_(g.mu)
#define NODE_OR_RETURN(var, ino) \
  NodeP var = get(ino);          \
  if (!var) return (void)fuse_reply_err(req, ESTALE)

int check_new_name(const NodeP& p, const char* name) {
  if (p->kind != Kind::dir) return ENOTDIR;
  if (std::strlen(name) > NAME_MAX) return ENAMETOOLONG;
  if (p == g.root && std::strcmp(name, kOrphans) == 0) return EPERM;
  if (int e = ensure_loaded(p)) return e;
  if (p->nlink == 0) return ENOENT;  // removed directory
  if (p->entries.count(name)) return EEXIST;
  return 0;
}

// Looks up an existing entry; ENOENT/ENOTDIR as the kernel expects.
int find(const NodeP& p, const char* name, NodeP& out) {
  if (p->kind != Kind::dir) return ENOTDIR;
  if (int e = ensure_loaded(p)) return e;
  if (p == g.root && std::strcmp(name, kOrphans) == 0) return ENOENT;
  auto it = p->entries.find(name);
  if (it == p->entries.end()) return ENOENT;
  out = it->second;
  return 0;
}

void touch_dir(Node& d) { d.mtime = d.ctime = now(); }

// A new live node at (p, name), logged as pending.
NodeP add_new(fuse_req_t req, const NodeP& p, const char* name, Kind kind, mode_t mode) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  NodeP n = new_node(kind, mode, ctx->uid, ctx->gid);
  if (kind == Kind::dir) {
    n->loaded = true;
    n->parent = p;
  }
  p->entries[name] = n;
  n->nlink = 1;
  touch_dir(*p);
  Op op;
  op.type = Op::create;
  op.dir = p;
  op.node = n;
  op.name = name;
  g.pending.push_back(std::move(op));
  return n;
}

void op_init(void*, fuse_conn_info* conn) {
  // Writes must reach us before write(2) returns, and we invalidate caches
  // ourselves (only cuts change data behind the kernel's back).
  conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_HANDLE_KILLPRIV |
                  FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  LOCK;
  NODE_OR_RETURN(p, parent);
  NodeP n;
  if (int e = find(p, name, n)) return (void)fuse_reply_err(req, e);
  reply_entry(req, n);
}

void forget_one(fuse_ino_t ino, uint64_t nlookup) {
  NodeP n = get(ino);
  if (!n) return;
  n->nlookup -= std::min(n->nlookup, nlookup);
  maybe_drop(n);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  {
    LOCK;
    forget_one(ino, nlookup);
  }
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  {
    LOCK;
    for (size_t i = 0; i < count; ++i) forget_one(forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  struct stat st = stat_of(*n);
  fuse_reply_attr(req, &st, 0);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (n->kind == Kind::dir) return (void)fuse_reply_err(req, EISDIR);
    if (n->kind != Kind::file) return (void)fuse_reply_err(req, EINVAL);
    if (attr->st_size < 0) return (void)fuse_reply_err(req, EINVAL);
    truncate_live(n, static_cast<uint64_t>(attr->st_size));
  }
  timespec t = now();
  if (to_set & FUSE_SET_ATTR_MODE) n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
  if (to_set & FUSE_SET_ATTR_UID) n->uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) n->gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_ATIME) n->atime = attr->st_atim;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) n->atime = t;
  if (to_set & FUSE_SET_ATTR_MTIME) n->mtime = attr->st_mtim;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) n->mtime = t;
  n->ctime = (to_set & FUSE_SET_ATTR_CTIME) ? attr->st_ctim : t;
  n->attr_dirty = true;
  mark_dirty(n);
  struct stat st = stat_of(*n);
  fuse_reply_attr(req, &st, 0);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (n->kind != Kind::symlink) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_readlink(req, n->target.c_str());
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  LOCK;
  NODE_OR_RETURN(p, parent);
  if (int e = check_new_name(p, name)) return (void)fuse_reply_err(req, e);
  if (S_ISDIR(mode) || S_ISLNK(mode)) return (void)fuse_reply_err(req, EINVAL);
  NodeP n = add_new(req, p, name, kind_of(mode), mode);
  n->rdev = rdev;
  reply_entry(req, n);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  LOCK;
  NODE_OR_RETURN(p, parent);
  if (int e = check_new_name(p, name)) return (void)fuse_reply_err(req, e);
  reply_entry(req, add_new(req, p, name, Kind::dir, S_IFDIR | (mode & 07777)));
}

void op_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  LOCK;
  NODE_OR_RETURN(p, parent);
  if (int e = check_new_name(p, name)) return (void)fuse_reply_err(req, e);
  NodeP n = add_new(req, p, name, Kind::symlink, S_IFLNK | 0777);
  n->target = link;
  reply_entry(req, n);
}

void remove_entry(fuse_req_t req, fuse_ino_t parent, const char* name, bool dir) {
  LOCK;
  NODE_OR_RETURN(p, parent);
  NodeP n;
  if (int e = find(p, name, n)) return (void)fuse_reply_err(req, e);
  if (!dir && n->kind == Kind::dir) return (void)fuse_reply_err(req, EISDIR);
  if (dir) {
    if (n->kind != Kind::dir) return (void)fuse_reply_err(req, ENOTDIR);
    if (int e = ensure_loaded(n)) return (void)fuse_reply_err(req, e);
    if (!n->entries.empty()) return (void)fuse_reply_err(req, ENOTEMPTY);
    n->parent.reset();
  }
  p->entries.erase(name);
  n->nlink--;
  n->ctime = now();
  touch_dir(*p);
  Op op;
  op.type = Op::unlink;
  op.dir = p;
  op.node = n;
  op.name = name;
  g.pending.push_back(std::move(op));
  fuse_reply_err(req, 0);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  remove_entry(req, parent, name, false);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  remove_entry(req, parent, name, true);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
               const char* newname, unsigned int flags) {
  LOCK;
  if (flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) return (void)fuse_reply_err(req, EINVAL);
  NODE_OR_RETURN(p, parent);
  NODE_OR_RETURN(q, newparent);
  NodeP n, old;
  if (int e = find(p, name, n)) return (void)fuse_reply_err(req, e);
  if (q->kind != Kind::dir) return (void)fuse_reply_err(req, ENOTDIR);
  if (int e = ensure_loaded(q)) return (void)fuse_reply_err(req, e);
  if (std::strlen(newname) > NAME_MAX) return (void)fuse_reply_err(req, ENAMETOOLONG);
  if (q == g.root && std::strcmp(newname, kOrphans) == 0) return (void)fuse_reply_err(req, EPERM);
  if (q->nlink == 0) return (void)fuse_reply_err(req, ENOENT);
  if (auto it = q->entries.find(newname); it != q->entries.end()) old = it->second;
  if (old == n) return (void)fuse_reply_err(req, 0);  // two names of one inode: no-op
  if (old) {
    if (flags & RENAME_NOREPLACE) return (void)fuse_reply_err(req, EEXIST);
    if (n->kind == Kind::dir && old->kind != Kind::dir) return (void)fuse_reply_err(req, ENOTDIR);
    if (n->kind != Kind::dir && old->kind == Kind::dir) return (void)fuse_reply_err(req, EISDIR);
    if (old->kind == Kind::dir) {
      if (int e = ensure_loaded(old)) return (void)fuse_reply_err(req, e);
      if (!old->entries.empty()) return (void)fuse_reply_err(req, ENOTEMPTY);
    }
  }
  if (n->kind == Kind::dir) {
    // Not into itself or below it.
    for (NodeP a = q; a; a = a->parent.lock()) {
      if (a == n) return (void)fuse_reply_err(req, EINVAL);
    }
  }
  if (old) {
    old->nlink--;
    old->ctime = now();
    if (old->kind == Kind::dir) old->parent.reset();
  }
  p->entries.erase(name);
  q->entries[newname] = n;
  if (n->kind == Kind::dir) n->parent = q;
  n->ctime = now();
  touch_dir(*p);
  touch_dir(*q);
  Op op;
  op.type = Op::rename;
  op.dir = p;
  op.node = n;
  op.name = name;
  op.dir2 = q;
  op.name2 = newname;
  op.replaced = old;
  g.pending.push_back(std::move(op));
  fuse_reply_err(req, 0);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  NODE_OR_RETURN(p, newparent);
  if (n->kind == Kind::dir) return (void)fuse_reply_err(req, EPERM);
  if (int e = check_new_name(p, newname)) return (void)fuse_reply_err(req, e);
  p->entries[newname] = n;
  n->nlink++;
  n->ctime = now();
  touch_dir(*p);
  Op op;
  op.type = Op::link;
  op.dir = p;
  op.node = n;
  op.name = newname;
  g.pending.push_back(std::move(op));
  reply_entry(req, n);
}

void open_file(const NodeP& n, fuse_file_info* fi) {
  if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) truncate_live(n, 0);
  // The page cache always equals our live state except at a cut, which
  // invalidates it explicitly (see the top comment).
  fi->keep_cache = 1;
  fi->direct_io = 0;
  n->open++;
  g.table[n->id] = n;
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (n->kind == Kind::dir) return (void)fuse_reply_err(req, EISDIR);
  if (n->kind != Kind::file) return (void)fuse_reply_err(req, ENXIO);
  open_file(n, fi);
  if (fuse_reply_open(req, fi) != 0) {
    n->open--;
    maybe_drop(n);
  }
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
  LOCK;
  NODE_OR_RETURN(p, parent);
  NodeP n;
  if (find(p, name, n) == 0) {  // raced with another creator: open it
    if (fi->flags & O_EXCL) return (void)fuse_reply_err(req, EEXIST);
    if (n->kind == Kind::dir) return (void)fuse_reply_err(req, EISDIR);
    if (n->kind != Kind::file) return (void)fuse_reply_err(req, ENXIO);
  } else {
    if (int e = check_new_name(p, name)) return (void)fuse_reply_err(req, e);
    n = add_new(req, p, name, Kind::file, S_IFREG | (mode & 07777));
  }
  open_file(n, fi);
  fuse_entry_param e{};
  e.ino = n->id;
  e.generation = 1;
  e.attr = stat_of(*n);
  if (fuse_reply_create(req, &e, fi) == 0) {
    n->nlookup++;
  } else {
    n->open--;
    maybe_drop(n);
  }
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (n->kind != Kind::file) return (void)fuse_reply_err(req, EISDIR);
  uint64_t o = static_cast<uint64_t>(off);
  if (off < 0 || o >= n->live_size) return (void)fuse_reply_buf(req, nullptr, 0);
  std::string out(std::min<uint64_t>(size, n->live_size - o), '\0');
  if (int e = read_live(*n, o, out)) return (void)fuse_reply_err(req, e);
  fuse_reply_buf(req, out.data(), out.size());
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
              fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (n->kind != Kind::file) return (void)fuse_reply_err(req, EISDIR);
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  uint64_t o = static_cast<uint64_t>(off);
  put_extent(*n, o, buf, size);
  n->live_size = std::max<uint64_t>(n->live_size, o + size);
  n->mtime = n->ctime = now();
  if (g.torn) n->last_write.emplace(o, std::string(buf, size));
  mark_dirty(n);
  fuse_reply_write(req, size);
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  fuse_reply_err(req, 0);  // close(2) makes nothing durable
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  {
    LOCK;
    if (NodeP n = get(ino)) {
      if (n->open > 0) n->open--;
      maybe_drop(n);
    }
  }
  fuse_reply_err(req, 0);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (n->kind != Kind::file) return (void)fuse_reply_err(req, 0);
  fuse_reply_err(req, sync_file(n));
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  LOCK;
  NODE_OR_RETURN(d, ino);
  if (d->kind != Kind::dir) return (void)fuse_reply_err(req, ENOTDIR);
  if (int e = ensure_loaded(d)) return (void)fuse_reply_err(req, e);
  // A snapshot, so offsets stay valid while the directory changes.
  std::vector<std::tuple<std::string, uint64_t, mode_t>> list;
  NodeP up = d->parent.lock();
  list.emplace_back(".", d->id, S_IFDIR);
  list.emplace_back("..", up ? up->id : d->id, S_IFDIR);
  for (auto& [name, c] : d->entries) list.emplace_back(name, c->id, c->mode & S_IFMT);
  uint64_t fh = g.next_fh++;
  g.dirs[fh] = std::move(list);
  fi->fh = fh;
  d->open++;
  g.table[d->id] = d;
  if (fuse_reply_open(req, fi) != 0) {
    g.dirs.erase(fh);
    d->open--;
    maybe_drop(d);
  }
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  LOCK;
  auto it = g.dirs.find(fi->fh);
  if (it == g.dirs.end()) return (void)fuse_reply_err(req, EBADF);
  std::string buf(size, '\0');
  size_t used = 0;
  for (size_t i = static_cast<size_t>(std::max<off_t>(off, 0)); i < it->second.size(); ++i) {
    auto& [name, id, type] = it->second[i];
    struct stat st {};
    st.st_ino = id;
    st.st_mode = type;
    size_t len = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st,
                                   static_cast<off_t>(i + 1));
    if (len > size - used) break;
    used += len;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  {
    LOCK;
    g.dirs.erase(fi->fh);
    if (NodeP d = get(ino)) {
      if (d->open > 0) d->open--;
      maybe_drop(d);
    }
  }
  fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(d, ino);
  fuse_reply_err(req, commit(d));
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv {};
  if (::fstatvfs(g.root->fd.get(), &sv) != 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_statfs(req, &sv);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, fuse_file_info*) {
  LOCK;
  NODE_OR_RETURN(n, ino);
  if (n->kind != Kind::file) return (void)fuse_reply_err(req, ENODEV);
  if (off < 0 || len <= 0) return (void)fuse_reply_err(req, EINVAL);
  uint64_t o = static_cast<uint64_t>(off), end = o + static_cast<uint64_t>(len);
  const int keep = FALLOC_FL_KEEP_SIZE;
  if (mode & ~(keep | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
    return (void)fuse_reply_err(req, EOPNOTSUPP);
  }
  if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
    if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & keep)) return (void)fuse_reply_err(req, EINVAL);
    uint64_t zend = (mode & keep) ? std::min(end, n->live_size) : end;
    if (zend > o) {
      std::string zeros(zend - o, '\0');
      put_extent(*n, o, zeros.data(), zeros.size());
      n->live_size = std::max(n->live_size, zend);
    }
  } else if (!(mode & keep) && end > n->live_size) {
    truncate_live(n, end);  // blocks are not modelled: only the size
  }
  n->mtime = n->ctime = now();
  mark_dirty(n);
  fuse_reply_err(req, 0);
}

// --- main --------------------------------------------------------------------

// Signals are taken by one thread, so a termination never interrupts a cut
// (whose kernel notifications may need the request loop to keep running).
std::atomic<bool> loop_done{false};
pthread_t loop_thread;

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGUSR1, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  return set;
}

void on_wake(int) {}  // SIGUSR2: only makes the loop's read(2) return EINTR

void signal_thread() {
  sigset_t set = handled_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig != SIGUSR1) break;
    if (!loop_done) power_cut();
  }
  // The loop sees the flag after its read(2) is interrupted. Repeat: the
  // signal may land just before it blocks in read(2) again.
  fuse_session_exit(g.se);
  while (!loop_done) {
    pthread_kill(loop_thread, SIGUSR2);
    ::usleep(10000);
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: fenceq-lossyfs [--torn] [--seed N] [--debug] BACKING MOUNT\n"
               "  Mounts MOUNT over the directory BACKING; SIGUSR1 cuts the power (every change\n"
               "  not yet fsynced is lost), SIGTERM unmounts. See the source for the model.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--torn") {
      g.torn = true;
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--debug") {
      g.debug = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      paths.push_back(a);
    }
  }
  if (paths.size() != 2) return usage();
  g.rng.seed(seed);
  char buf[PATH_MAX];
  if (!::realpath(paths[0].c_str(), buf)) {
    say("BACKING %s: %s", paths[0].c_str(), std::strerror(errno));
    return 1;
  }
  g.backing = buf;
  if (!::realpath(paths[1].c_str(), buf)) {
    say("MOUNT %s: %s", paths[1].c_str(), std::strerror(errno));
    return 1;
  }
  g.mountpoint = buf;

  // One fd per node: allow as many as the hard limit does.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }

  int rootfd = ::open(g.backing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) {
    say("BACKING %s: %s", g.backing.c_str(), std::strerror(errno));
    return 1;
  }
  g.root = std::make_shared<Node>();
  g.root->id = FUSE_ROOT_ID;
  g.root->kind = Kind::dir;
  g.root->fd.reset(rootfd);
  g.root->nlink = 1;
  g.root->nlookup = 1;
  struct stat st {};
  ::fstat(rootfd, &st);
  attrs_from(*g.root, st);
  g.all[FUSE_ROOT_ID] = g.root;
  g.table[FUSE_ROOT_ID] = g.root;
  register_backing(g.root);
  // Orphans left by an earlier run that did not exit cleanly are lost inodes.
  if (::mkdirat(rootfd, kOrphans, 0700) != 0 && errno != EEXIST) {
    say("cannot create %s/%s: %s", g.backing.c_str(), kOrphans, std::strerror(errno));
    return 1;
  }
  g.orphans.reset(::openat(rootfd, kOrphans, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!g.orphans) {
    say("cannot open %s/%s: %s", g.backing.c_str(), kOrphans, std::strerror(errno));
    return 1;
  }
  remove_contents(g.orphans.get());

  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.readlink = op_readlink;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.symlink = op_symlink;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.open = op_open;
  ops.create = op_create;
  ops.read = op_read;
  ops.write = op_write;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.fsync = op_fsync;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.fsyncdir = op_fsyncdir;
  ops.statfs = op_statfs;
  ops.fallocate = op_fallocate;
  // No getlk/setlk/flock: the kernel keeps the locks (see the top comment).

  std::string opts =
      "default_permissions,auto_unmount,fsname=lossyfs:" + g.backing + ",subtype=lossyfs";
  std::vector<std::string> fargv = {argv[0], "-o", opts};
  if (g.debug) fargv.push_back("-d");
  std::vector<char*> cargv;
  for (auto& s : fargv) cargv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(cargv.size()), cargv.data());

  // SIGUSR1 (cut) and SIGTERM/SIGINT/SIGHUP (exit) go to the signal thread
  // only; SIGUSR2 (no SA_RESTART) wakes the loop thread when it must end.
  sigset_t handled = handled_signals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_wake;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGUSR2, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  loop_thread = pthread_self();

  g.se = fuse_session_new(&args, &ops, sizeof ops, nullptr);
  if (!g.se) return 1;
  if (fuse_session_mount(g.se, g.mountpoint.c_str()) != 0) {
    say("cannot mount %s", g.mountpoint.c_str());
    return 1;
  }
  std::thread signals(signal_thread);

  if (g.torn) say("torn writes on, seed %" PRIu64, seed);
  std::printf("lossyfs: mounted %s over %s\n", g.mountpoint.c_str(), g.backing.c_str());
  std::fflush(stdout);

  int rc = fuse_session_loop(g.se);  // until a signal, or an unmount from outside

  loop_done = true;
  pthread_kill(signals.native_handle(), SIGTERM);  // ends it if it still waits
  signals.join();
  fuse_session_unmount(g.se);
  flush_all();
  fuse_session_destroy(g.se);
  fuse_opt_free_args(&args);
  ::unlinkat(g.root->fd.get(), kOrphans, AT_REMOVEDIR);  // empty after the flush
  std::fflush(stderr);
  return rc < 0 ? 1 : 0;
}
