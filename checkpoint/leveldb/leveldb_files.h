// The names of LevelDB's own files inside a database directory. Internal to
// the LevelDB adapter (leveldb_db.cc, leveldb_direct.cc,
// leveldb_file_list.cc, leveldb_manifest.cc, leveldb_type.cc): nothing else
// may depend on how LevelDB lays out a database.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FILES_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FILES_H_

namespace jobgraph {

// Names the current MANIFEST-*; a database without it cannot be opened.
inline constexpr char kLevelDbCurrentFile[] = "CURRENT";
// Locked (POSIX write lock on the whole file) while the database is open.
inline constexpr char kLevelDbLockFile[] = "LOCK";
// The prefix of the descriptor files that list the database's tables.
inline constexpr char kLevelDbManifestPrefix[] = "MANIFEST-";
// jobgraph's own list of the other files with their sizes and CRC-32Cs
// (DbFileList), written when a kNew database is closed.
inline constexpr char kDbFileListName[] = "JOBGRAPH_FILES";

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FILES_H_
