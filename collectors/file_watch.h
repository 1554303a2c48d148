// Change notification for FileTailer (collectors/file_tailer.h, "Change
// notification"): one Linux inotify descriptor watching the directories of the
// configured patterns (creations, renames, deletions) and the inode of every
// open file (writes, renames, unlinks). It only says "look again": the tailer's
// Poll() drains it and re-examines everything, so a dropped or coalesced event
// costs nothing but latency, and polling on an interval works without it.
//
// Thread safety: none. Owned by one FileTailer and used from its thread only;
// fd() may be waited on from that thread's event loop.
#ifndef KVWATCH_COLLECTORS_FILE_WATCH_H_
#define KVWATCH_COLLECTORS_FILE_WATCH_H_

#include <map>
#include <string>
#include <vector>

namespace kvwatch::collectors::tail {

class FileWatch {
 public:
  // enabled false, or inotify unavailable: fd() is -1 and every call does nothing.
  explicit FileWatch(bool enabled);
  // Closes the descriptor, and with it every watch.
  ~FileWatch();
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  // The inotify descriptor (non-blocking, close-on-exec), or -1. Owned here.
  int fd() const { return fd_; }

  // Reads every pending event without blocking. A watched directory that went
  // away is forgotten, so the next WatchDirectories() adds it again.
  void Drain();

  // Watches the directories of `patterns` (a directory part with glob magic
  // is expanded) not watched yet; a missing one is retried on the next call.
  void WatchDirectories(const std::vector<std::string>& patterns);

  // Watches the inode open as `file_fd`; the watch descriptor, or -1. Watches
  // are per inode: two descriptors of one inode share one watch.
  int WatchFile(int file_fd);
  // Removes a watch WatchFile returned (-1: nothing to do).
  void Unwatch(int watch);

 private:
  int fd_ = -1;
  std::map<std::string, int> dir_watches_;  // directory -> inotify watch
};

}  // namespace kvwatch::collectors::tail

#endif  // KVWATCH_COLLECTORS_FILE_WATCH_H_
