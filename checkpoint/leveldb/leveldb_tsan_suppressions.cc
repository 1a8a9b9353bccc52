// ThreadSanitizer suppressions, compiled into every binary that links the
// LevelDB adapter when it is built with --config=tsan (gcc defines
// __SANITIZE_THREAD__ then); TSan calls this hook at start-up. The tsan
// config links statically (.bazelrc), because TSan finds the hook only in the
// executable.
//
// Each entry only filters reports; none turns interception off, so TSan
// still sees every lock, in LevelDB too. (An earlier called_from_lib entry
// for libleveldb made TSan ignore LevelDB's own mutexes and report our Env,
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
// - Debian's Open MPI (engine/mpi) is not built with TSan: its plugins (the
//   TCP transport, for one) take their own mutexes in orders TSan calls
//   potential deadlocks, and its progress threads hand buffers over through
//   atomics TSan cannot see. Only reports whose top frames are in Open MPI's
//   libraries are filtered; jobgraph's calls into MPI are still checked.

#ifdef __SANITIZE_THREAD__
extern "C" const char* __tsan_default_suppressions() {
  return "race:leveldb::MemTable\n"
         "race:jobgraph::DB::TrackedWriter::~TrackedWriter\n"
         "race:leveldb::SkipList\n"
         "race:leveldb::Arena\n"
         "race:absl::*::base_internal::StrError\n"
         "deadlock:libmpi.so\n"
         "deadlock:libopen-pal.so\n"
         "deadlock:libopen-rte.so\n"
         "deadlock:libpmix.so\n"
         "deadlock:mca_*.so\n"
         "race:libmpi.so\n"
         "race:libopen-pal.so\n"
         "race:libopen-rte.so\n"
         "race:libpmix.so\n"
         "race:mca_*.so\n";
}
#endif
