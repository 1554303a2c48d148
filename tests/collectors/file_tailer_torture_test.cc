// Torture test of collectors/file_tailer.h, in the spirit of Vector's
// model-based file_watcher experiments. A writer appends numbered records
// ("seq=N <padding>", LF or CRLF, sometimes written in two pieces with a poll
// in between) to app.log, while a seeded PRNG rotates it by rename (keeping
// app.log.1..3, the writer sometimes writing late to the old file), copytruncates
// it, truncates it, deletes it, deletes the oldest rotated file, and destroys the
// tailer (gracefully after Checkpoint(), or "killed" without one) to re-create
// it from its checkpoint. The tailer's read chunk and per-poll budget change at
// each re-creation. Every round ends with a poll (repeated until nothing is
// pending), so at most one rotation/truncation/deletion happens between polls.
//
// The model says which records the tailer MUST have delivered after each poll:
// every record in a file it is bound to read at that poll, i.e. a file a
// pattern matches now, a file it held after its previous poll (renamed or
// deleted since: drained through the open descriptor), or the copy a
// copytruncate left beside a held file; after a re-creation, "held" means the
// files of the last checkpoint (found by inode in their directory, or through
// their copy if truncated or deleted since). Checks:
//   - every delivered line is exactly the text of a record that was written;
//   - no record is delivered twice, where a kill rolls back the deliveries
//     made after the last Checkpoint() (the consumer lost them too: that is
//     the contract of commit-after-delivery);
//   - after each poll, every record the tailer must have read has been delivered;
//   - every truncation of a held file that had a complete line is reported
//     by exactly one kTruncated event, and kLostBytes adds up exactly to the
//     partial lines such truncations destroyed when no copy was found. So the
//     only records missing at the end are those the tailer never had a chance
//     to see (written after its last poll and destroyed by a truncation whose
//     copy went elsewhere, or in a file it never saw before a kill), and every
//     truncation that destroyed unseen records was reported.
//
// Size: by default each of the 4 modes runs 1000 rounds (about 3000 records,
// 800 rename/copy/truncate/delete operations and 80 restarts per mode; a few
// seconds in all, most of it checkpoint fsyncs). Set KVWATCH_LONG=1 for 20 times as many
// rounds, and KVWATCH_SEED=<n> to change the seed (a failure prints the seed and
// round, and replays exactly).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collectors/file_tailer.h"

namespace kvwatch::collectors {
namespace {

constexpr int kKeptRotations = 3;

struct Mode {
  const char* name;
  bool glob_rotated;    // pattern "app.log*" also matches the rotated names
  bool copy_elsewhere;  // copytruncate copies go to old/, where no pattern or search looks
};

// What the model knows of a file at the moment the tailer looked at it.
struct Snapshot {
  int generation = 0;
  std::uint64_t size = 0;
  std::size_t complete = 0;   // complete records
  std::uint64_t partial = 0;  // bytes of an unfinished record
};

struct ModelFile {
  std::string name;  // relative to the directory; empty once deleted
  std::vector<std::uint64_t> records;
  std::uint64_t size = 0;
  std::uint64_t partial = 0;  // trailing bytes of an unfinished record
  int generation = 0;         // bumped by each truncation
  int copy_of = -1;           // copytruncate copy: the file and generation copied
  int copy_generation = 0;
};

std::uint64_t EnvNumber(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  return std::strtoull(value, nullptr, 10);
}

class TortureRun {
 public:
  TortureRun(Mode mode, std::uint64_t seed, int rounds, std::string dir)
      : mode_(mode), seed_(seed), rounds_(rounds), dir_(std::move(dir)), rng_(seed) {}

  ~TortureRun() {
    if (writer_fd_ >= 0) ::close(writer_fd_);
  }

  void Run() {
    std::filesystem::create_directory(dir_ + "/old");
    OpenWriter();
    CreateTailer();
    for (round_ = 0; round_ < rounds_ && !Failed(); ++round_) Round();
    if (!tailer_) CreateTailer();
    PollAndCheck();
    Report();
  }

 private:
  bool Failed() const { return ::testing::Test::HasFailure(); }
  std::string Where() const {
    return std::string(mode_.name) + " seed " + std::to_string(seed_) + " round " + std::to_string(round_) + ": ";
  }
  std::uint64_t Uniform(std::uint64_t n) { return rng_() % n; }
  // KVWATCH_TORTURE_TRACE=1 prints every operation and event, to debug a failure.
  void Trace(const std::string& what) const {
    if (trace_) std::printf("  r%d %s\n", round_, what.c_str());
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // --- One round ----------------------------------------------------------------

  void Round() {
    for (std::uint64_t i = Uniform(5); i > 0; --i) WriteRecord();
    bool down = false;
    if (Chance(0.08)) {
      DestroyTailer(/*graceful=*/Chance(0.5));
      down = true;
    }
    if (Chance(0.4)) DisruptiveOperation(/*live=*/!down);
    for (std::uint64_t i = Uniform(3); i > 0; --i) WriteRecord();
    if (down) CreateTailer();
    PollAndCheck();
    if (Chance(0.06)) TakeCheckpoint();  // each costs two fsyncs
  }

  void DisruptiveOperation(bool live) {
    CompletePending();
    const std::uint64_t pick = Uniform(mode_.glob_rotated ? 9 : 8);
    if (pick < 3) {
      ++stats_.renames;
      RotateByRename();
    } else if (pick < 5) {
      ++stats_.copytruncates;
      Truncate(live, /*copy=*/true);
    } else if (pick < 6) {
      ++stats_.truncates;
      Truncate(live, /*copy=*/false);
    } else if (pick < 8) {
      ++stats_.deletes;
      DeleteCurrent();
    } else {
      ++stats_.deletes;
      DeleteOldestRotated();
    }
  }

  // --- The writer -----------------------------------------------------------------

  void OpenWriter() {
    if (writer_fd_ >= 0) ::close(writer_fd_);
    writer_fd_ = ::open(Path("app.log").c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(writer_fd_, 0) << Where() << "open app.log";
    int existing = FileNamed("app.log");
    if (existing < 0) {
      ModelFile file;
      file.name = "app.log";
      files_.push_back(std::move(file));
      existing = static_cast<int>(files_.size()) - 1;
    }
    current_ = existing;
  }

  void WriteBytes(const std::string& bytes) {
    ASSERT_EQ(::write(writer_fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()))
        << Where() << "write";
    files_[current_].size += bytes.size();
  }

  std::string RecordText(std::uint64_t seq) {
    std::string text = "seq=" + std::to_string(seq) + " ";
    const std::uint64_t pad = Chance(0.1) ? Uniform(400) : Uniform(60);
    for (std::uint64_t i = 0; i < pad; ++i) text += static_cast<char>('a' + (seq * 7 + i) % 26);
    return text;
  }

  void WriteRecord() {
    CompletePending();
    const std::uint64_t seq = texts_.size();
    texts_.push_back(RecordText(seq));
    delivered_.push_back(0);
    obligated_.push_back(false);
    const std::string bytes = texts_.back() + (Chance(0.2) ? "\r\n" : "\n");
    ModelFile& file = files_[current_];
    // Leave a record unfinished only behind a complete one (see the header).
    if (!file.records.empty() && Chance(0.15)) {
      const std::size_t cut = 1 + Uniform(bytes.size() - 1);
      WriteBytes(bytes.substr(0, cut));
      file.partial = cut;
      pending_ = bytes.substr(cut);
      pending_seq_ = seq;
      return;
    }
    WriteBytes(bytes);
    file.records.push_back(seq);
    Trace("write seq " + std::to_string(seq) + " to file " + std::to_string(current_));
  }

  void CompletePending() {
    if (pending_.empty()) return;
    WriteBytes(pending_);
    files_[current_].partial = 0;
    files_[current_].records.push_back(pending_seq_);
    pending_.clear();
  }

  // --- File operations --------------------------------------------------------------

  int FileNamed(const std::string& name) const {
    for (std::size_t i = 0; i < files_.size(); ++i) {
      if (files_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }

  void RenameFile(const std::string& from, const std::string& to) {
    const int moving = FileNamed(from);
    if (moving < 0) return;
    Trace("rename " + from + " (file " + std::to_string(moving) + ") -> " + to);
    const int replaced = FileNamed(to);
    ASSERT_EQ(::rename(Path(from).c_str(), Path(to).c_str()), 0) << Where() << from << " -> " << to;
    if (replaced >= 0) files_[replaced].name.clear();  // unlinked by the rename
    files_[moving].name = to;
  }

  // app.log.2 -> app.log.3, app.log.1 -> app.log.2 (the oldest is replaced).
  void ShiftRotated() {
    for (int k = kKeptRotations - 1; k >= 1; --k) {
      RenameFile("app.log." + std::to_string(k), "app.log." + std::to_string(k + 1));
    }
  }

  void RotateByRename() {
    ShiftRotated();
    RenameFile("app.log", "app.log.1");
    // The writer has not reopened yet: a few late records land in the old file.
    for (std::uint64_t i = Uniform(3); i > 0; --i) WriteRecord();
    CompletePending();
    OpenWriter();
  }

  void Truncate(bool live, bool copy) {
    const int f = current_;
    Trace(std::string(copy ? "copytruncate" : "truncate") + " file " + std::to_string(f) + (live ? "" : " while down"));
    if (live && held_.count(f) && held_[f].complete > 0) {
      ++expected_truncated_;
      const bool adoptable = copy && !mode_.copy_elsewhere;
      if (!adoptable) expected_lost_bytes_ += held_[f].partial;
    }
    if (copy) {
      std::string name;
      if (mode_.copy_elsewhere) {
        name = "old/app.log." + std::to_string(++copies_elsewhere_);
      } else {
        ShiftRotated();
        name = "app.log.1";
        const int replaced = FileNamed(name);
        if (replaced >= 0) files_[replaced].name.clear();
      }
      std::filesystem::copy_file(Path("app.log"), Path(name), std::filesystem::copy_options::overwrite_existing);
      ModelFile duplicate = files_[f];
      duplicate.name = name;
      duplicate.generation = 0;
      duplicate.copy_of = f;
      duplicate.copy_generation = files_[f].generation;
      files_.push_back(std::move(duplicate));
    }
    ASSERT_EQ(::truncate(Path("app.log").c_str(), 0), 0) << Where() << "truncate";
    ModelFile& file = files_[f];
    file.records.clear();
    file.size = 0;
    file.partial = 0;
    ++file.generation;
  }

  void DeleteCurrent() {
    Trace("delete app.log (file " + std::to_string(current_) + ")");
    ASSERT_EQ(::unlink(Path("app.log").c_str()), 0) << Where() << "unlink";
    files_[current_].name.clear();
    OpenWriter();
  }

  void DeleteOldestRotated() {
    for (int k = kKeptRotations; k >= 1; --k) {
      const int f = FileNamed("app.log." + std::to_string(k));
      if (f < 0) continue;
      Trace("delete " + files_[f].name + " (file " + std::to_string(f) + ")");
      ASSERT_EQ(::unlink(Path(files_[f].name).c_str()), 0) << Where() << "unlink rotated";
      files_[f].name.clear();
      return;
    }
  }

  // --- The tailer -------------------------------------------------------------------

  bool Matched(const ModelFile& file) const {
    if (file.name == "app.log") return true;
    return mode_.glob_rotated && file.name.rfind("app.log.", 0) == 0;
  }

  void CreateTailer() {
    FileTailerOptions options;
    options.patterns = {Path(mode_.glob_rotated ? "app.log*" : "app.log")};
    options.start_position = TailStartPosition::kBeginning;
    options.checkpoint_path = Path("tailer.checkpoint");
    options.rotate_wait = std::chrono::milliseconds(0);
    options.use_inotify = Chance(0.5);
    static constexpr std::size_t kChunks[] = {7, 64, 1000, 65536};
    options.read_chunk_bytes = kChunks[Uniform(4)];
    options.max_read_bytes_per_poll = Chance(0.3) ? 200 : 0;
    options.fingerprint_bytes = Chance(0.2) ? 16 : 256;
    auto created = FileTailer::Create(options);
    ASSERT_TRUE(created.ok()) << Where() << created.error();
    tailer_ = std::move(created).value();
    fresh_ = true;
    Trace("create tailer, chunk " + std::to_string(options.read_chunk_bytes));
  }

  void TakeCheckpoint() {
    base::Status status = tailer_->Checkpoint();
    ASSERT_TRUE(status.ok()) << Where() << status.error();
    if (!fresh_) checkpoint_ = held_;  // a fresh tailer re-writes the entries it loaded
    Trace("checkpoint");
    checkpointed_log_ = log_.size();
    ++stats_.checkpoints;
  }

  void DestroyTailer(bool graceful) {
    Trace(graceful ? "graceful restart" : "kill");
    if (graceful) {
      TakeCheckpoint();
      ++stats_.graceful_restarts;
    } else {
      // Killed: deliveries after the last checkpoint are undone (the consumer
      // lost them as well) and will come again.
      for (std::size_t i = checkpointed_log_; i < log_.size(); ++i) --delivered_[log_[i]];
      log_.resize(checkpointed_log_);
      ++stats_.kills;
    }
    tailer_.reset();
  }

  TailCallbacks Callbacks() {
    TailCallbacks callbacks;
    callbacks.on_line = [this](std::string_view, std::string_view, std::uint64_t, std::string_view line) {
      OnLine(line);
    };
    callbacks.on_event = [this](const TailEvent& event) {
      Trace("  event " + std::string(TailEventKindName(event.kind)) + " " + event.path + " " +
            std::to_string(event.count) + ": " + event.message);
      if (fresh_) return;  // restart-time detections are not counted as live ones
      if (event.kind == TailEventKind::kTruncated) ++live_truncated_;
      if (event.kind == TailEventKind::kLostBytes) live_lost_bytes_ += event.count;
    };
    return callbacks;
  }

  void OnLine(std::string_view line) {
    std::uint64_t seq = 0;
    const bool parsed =
        line.starts_with("seq=") && std::from_chars(line.data() + 4, line.data() + line.size(), seq).ec == std::errc();
    if (!parsed || seq >= texts_.size() || texts_[seq] != line) {
      ADD_FAILURE() << Where() << "delivered a line that was never written: '" << std::string(line.substr(0, 80))
                    << "'";
      return;
    }
    Trace("  line seq " + std::to_string(seq));
    if (++delivered_[seq] > 1) ADD_FAILURE() << Where() << "seq " << seq << " delivered twice";
    log_.push_back(seq);
  }

  // The files the tailer must have read completely by the end of this poll.
  std::set<int> Obligations() const {
    std::set<int> bound;
    const std::map<int, Snapshot>& before = fresh_ ? checkpoint_ : held_;
    for (const auto& [f, snap] : before) {
      const ModelFile& file = files_[f];
      const bool same = file.generation == snap.generation;
      // A live tailer drains a held file even if it was renamed or deleted; a
      // re-created one finds a checkpointed file by inode while it has a name.
      if (same && (!fresh_ || !file.name.empty())) bound.insert(f);
      if (!same || file.name.empty()) {
        if (snap.size == 0 || mode_.copy_elsewhere) continue;
        for (std::size_t c = 0; c < files_.size(); ++c) {
          const ModelFile& copy = files_[c];
          if (copy.copy_of == f && copy.copy_generation == snap.generation && !copy.name.empty()) {
            bound.insert(static_cast<int>(c));
          }
        }
      }
    }
    for (std::size_t f = 0; f < files_.size(); ++f) {
      if (!files_[f].name.empty() && Matched(files_[f])) bound.insert(static_cast<int>(f));
    }
    return bound;
  }

  void PollAndCheck() {
    for (int i = 0;; ++i) {
      if (i == 10000) {
        ADD_FAILURE() << Where() << "Poll() still has more pending after 10000 calls";
        return;
      }
      if (!tailer_->Poll(Callbacks()).more_pending) break;
    }
    ++stats_.polls;
    for (int f : Obligations()) {
      for (std::uint64_t seq : files_[f].records) {
        obligated_[seq] = true;
        if (delivered_[seq] != 1) {
          ADD_FAILURE() << Where() << "seq " << seq << " in " << files_[f].name << " (file " << f << ") delivered "
                        << delivered_[seq] << " times, expected once";
          return;
        }
      }
    }
    held_.clear();
    for (std::size_t f = 0; f < files_.size(); ++f) {
      const ModelFile& file = files_[f];
      if (file.name.empty() || !Matched(file)) continue;
      held_[static_cast<int>(f)] = Snapshot{file.generation, file.size, file.records.size(), file.partial};
    }
    fresh_ = false;
  }

  void Report() {
    std::size_t once = 0;
    std::size_t rolled_back = 0;  // were due once, undone by a kill, then out of reach
    for (std::size_t seq = 0; seq < delivered_.size(); ++seq) {
      once += delivered_[seq] == 1;
      rolled_back += delivered_[seq] == 0 && obligated_[seq];
    }
    EXPECT_EQ(live_truncated_, expected_truncated_) << Where() << "kTruncated events for truncations of held files";
    EXPECT_EQ(live_lost_bytes_, expected_lost_bytes_) << Where() << "kLostBytes total";
    EXPECT_GT(once, texts_.size() / 2) << Where() << "suspiciously few records delivered";
    std::printf(
        "[ %s ] seed %llu: %d rounds, %zu records, %zu delivered once, %zu missing (%zu "
        "undone by a kill, %zu never within reach); %d renames, %d copytruncates, %d truncates, %d "
        "deletes, %d kills, %d graceful "
        "restarts, %d checkpoints, %d polls; %llu truncations and %llu lost bytes reported\n",
        mode_.name, static_cast<unsigned long long>(seed_), rounds_, texts_.size(), once, texts_.size() - once,
        rolled_back, texts_.size() - once - rolled_back, stats_.renames, stats_.copytruncates, stats_.truncates,
        stats_.deletes, stats_.kills, stats_.graceful_restarts, stats_.checkpoints, stats_.polls,
        static_cast<unsigned long long>(live_truncated_), static_cast<unsigned long long>(live_lost_bytes_));
  }

  const Mode mode_;
  const std::uint64_t seed_;
  const int rounds_;
  const std::string dir_;
  std::mt19937_64 rng_;
  const bool trace_ = EnvNumber("KVWATCH_TORTURE_TRACE", 0) != 0;
  int round_ = 0;

  // Files and the writer.
  std::vector<ModelFile> files_;
  int current_ = -1;  // the file the writer appends to
  int writer_fd_ = -1;
  std::string pending_;  // rest of an unfinished record
  std::uint64_t pending_seq_ = 0;
  int copies_elsewhere_ = 0;

  // Records and deliveries.
  std::vector<std::string> texts_;  // by seq
  std::vector<int> delivered_;      // by seq, net of rollbacks
  std::vector<bool> obligated_;     // by seq: was due at some poll
  std::vector<std::uint64_t> log_;  // delivery order, for rollbacks
  std::size_t checkpointed_log_ = 0;

  // The tailer and what it holds.
  std::unique_ptr<FileTailer> tailer_;
  bool fresh_ = true;                   // created and not polled yet
  std::map<int, Snapshot> held_;        // files it holds after its last poll
  std::map<int, Snapshot> checkpoint_;  // files its last checkpoint covers

  std::uint64_t expected_truncated_ = 0;
  std::uint64_t expected_lost_bytes_ = 0;
  std::uint64_t live_truncated_ = 0;
  std::uint64_t live_lost_bytes_ = 0;
  struct {
    int renames = 0, copytruncates = 0, truncates = 0, deletes = 0;
    int kills = 0, graceful_restarts = 0, checkpoints = 0, polls = 0;
  } stats_;
};

class FileTailerTortureTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "file_tailer_torture_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(FileTailerTortureTest, RandomOperationsAgainstTheModel) {
  const bool long_run = EnvNumber("KVWATCH_LONG", 0) != 0;
  const int rounds = long_run ? 20000 : 1000;
  const std::uint64_t seed = EnvNumber("KVWATCH_SEED", 20261107);
  TortureRun(GetParam(), seed, rounds, dir_).Run();
}

INSTANTIATE_TEST_SUITE_P(Modes, FileTailerTortureTest,
                         ::testing::Values(Mode{"GlobMatchesRotatedNames", true, false},
                                           Mode{"ExactPath", false, false}, Mode{"CopiesElsewhere", false, true},
                                           Mode{"GlobAndCopiesElsewhere", true, true}),
                         [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvwatch::collectors
