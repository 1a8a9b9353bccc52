// ThreadSanitizer suppressions, compiled into every binary that links the
// LevelDB adapter when it is built with --config=tsan (gcc defines
// __SANITIZE_THREAD__ then); TSan calls this hook at start-up.
//
// Debian's libleveldb is not built with TSan. Its memtable is a lock-free
// skip list published through atomics inside the library, which TSan cannot
// see, so memcpy/memcmp calls made from inside LevelDB on memtable memory are
// reported as races. Only accesses made from within libleveldb are
// suppressed; our own code's accesses are still checked.
//
// Debian's Abseil is not built with TSan either: absl::StrError fills a
// function-local static table on first use, and the guard of that static
// initialization is invisible, so two threads' first error messages are
// reported as racing on the table. Only that function is suppressed.

#ifdef __SANITIZE_THREAD__
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libleveldb.so.1d\n"
         "race:absl::*::base_internal::StrError\n";
}
#endif
