// ThreadSanitizer suppressions, compiled into every binary that links the
// LevelDB adapter when it is built with --config=tsan; TSan calls this hook
// at start-up. The tsan config links statically (.bazelrc), because TSan
// finds the hook only in the executable.
//
// How TSan matches them (tsan_suppressions.cpp in gcc's libsanitizer): a
// "race:" entry is compared with the function, source file and module of
// every frame of both accesses' stacks, a "deadlock:" entry with those of
// every lock acquisition's stack, and one match filters the whole report;
// "race_top:" looks only at the top frame of each access's stack. Each entry
// only filters reports; none turns interception off, so TSan still sees
// every lock, in LevelDB too. (An earlier called_from_lib entry for
// libleveldb made TSan ignore LevelDB's own mutexes and report our Env,
// which LevelDB calls under them, as racing.)
//
// - Debian's libleveldb is not built with TSan. Its memtable is a lock-free
//   skip list published through atomics inside the library, which TSan
//   cannot see, so memcpy/memcmp calls made by the memtable and its arena on
//   memtable memory could be reported as races. Debian's library hides those
//   classes' symbols, so their frames print as "<null> (libleveldb.so.1d+..)"
//   and the three leveldb:: entries below cannot match them; a report from
//   db_test's WritersOnSeveralThreads (a Get's memcmp against a batch written
//   into the memtable by ~TrackedWriter) came through. The entry naming
//   ~TrackedWriter, where jobgraph hands a batch to LevelDB, filters those
//   reports without filtering every stack through libleveldb.
// - Debian's Abseil is not built with TSan either: absl::StrError fills a
//   function-local static table on first use, and the guard of that static
//   initialization is invisible, so two threads' first error messages are
//   reported as racing on the table.
// - glog computes the UTC offset of every log line's time with libc's
//   localtime_r, whose tzset() frees and allocates its time zone name under
//   a lock inside libc, which TSan does not see: two threads that log at
//   once (the job's and a local tier's flush thread, checkpoint/tier) are
//   reported as racing on that name. Both stacks go through
//   google::LogMessageTime::CalcGmtOffset, which the entry names, into
//   libc; no jobgraph memory is involved.
// - Debian's Open MPI (engine/mpi) is not built with TSan either, so TSan
//   sees it only through the calls it intercepts: in a report, an Open MPI
//   frame is the caller of an interceptor (pthread_mutex_lock, memcpy, ...)
//   and the top frame is the interceptor's, in libtsan.
//   The deadlock entries cover Open MPI's libraries and plugins. The cycle
//   seen is in its TCP transport (mca_btl_tcp.so), which takes two of its
//   own mutexes in both orders; TSan reports it in the MPI tests' ranks.
//   The entries filter every cycle in which Open MPI's code takes a lock.
//   Open MPI calls no jobgraph code and holds none of its locks when an MPI
//   call returns, so such a cycle has only Open MPI's locks in it, and
//   jobgraph's own cycles are still reported.
//   There is no race entry for Open MPI. When a jobgraph thread writes a
//   buffer that jobgraph has handed to MPI, Open MPI's access to it has
//   Open MPI frames exactly as a race inside Open MPI would, so entries such
//   as "race:libmpi.so" hid that race too (tests/tsan_mpi_race_test.cc), and
//   a "race_top:" entry cannot name Open MPI, whose accesses all have an
//   interceptor on top. The MPI tests have not reported a race inside Open
//   MPI; should one appear, name the Open MPI function that touches only
//   Open MPI's own memory, not a library.

#include "absl/base/config.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
extern "C" const char* __tsan_default_suppressions() {
  return "race:leveldb::MemTable\n"
         "race:jobgraph::DB::TrackedWriter::~TrackedWriter\n"
         "race:leveldb::SkipList\n"
         "race:leveldb::Arena\n"
         "race:absl::*::base_internal::StrError\n"
         "race:google::LogMessageTime::CalcGmtOffset\n"
         "deadlock:libmpi.so\n"
         "deadlock:libopen-pal.so\n"
         "deadlock:libopen-rte.so\n"
         "deadlock:libpmix.so\n"
         "deadlock:mca_*.so\n";
}
#endif
