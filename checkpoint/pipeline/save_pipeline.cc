#include "checkpoint/pipeline/save_pipeline.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>  // NOLINT(build/c++11)
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/compact_blob_index.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/time_util.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {

// One save between its start and its outcome. The job's thread and the
// queue's thread take turns with it: the job's thread touches it only while
// the queue has no work of it (after SaveQueue::Wait).
struct SavePipeline::Flight {
  SaveRecord record;
  // The hosted nodes' frozen blobs, and where each node's database goes.
  struct NodeSnapshot {
    std::string node;
    std::string file_name;
    std::string path;
    size_t position = 0;  // in nodes_
    std::vector<BlobSnapshot> blobs;
    // Incremental saves: the unchanged blobs, listed by reference.
    std::vector<CheckpointBlobInfo> referenced;
  };
  std::vector<NodeSnapshot> snapshots;
  Stage next = Stage::kWrite;
  // Whether the save outlived the Save call that started it.
  bool in_background = false;

  absl::Time start;
  // Time spent waiting at an exchange for the next call from the job's
  // thread: left out of the save's own time.
  absl::Time parked_at;
  int64_t parked_micros = 0;
  absl::Time done_at;

  // Incremental saves: the epoch of the full save the chain starts with
  // (this save's own when it is full); per node (by position in nodes_),
  // its blobs' generations at the snapshot and the blob index written, for
  // the next save's base; the epochs retention must keep for the saves
  // after this one (the base's), taken when the commit is handed on.
  int64_t chain_start = -1;
  std::vector<BlobGenerations> generations;
  std::vector<std::string> indexes;
  std::vector<int64_t> pinned;

  // This process's write; then every process's.
  WriteReport written;
  absl::StatusOr<WriteTotals> agreed = absl::UnknownError("not agreed yet");
  // The committer's commit-log update, begun ahead of its own write when
  // the commit follows within the same call (see Save).
  std::optional<absl::StatusOr<CommitLogUpdate>> update;
  // The committer's status of its commit, then every process's.
  absl::Status committed;
  int64_t write_micros = 0;
  int64_t agree_micros = 0;
  int64_t commit_micros = 0;
};

namespace {

// After a commit that failed: its new log may be in place all the same
// (say, the directory's fsync failed after the rename). Then the epochs it
// retired are unlisted, and no later commit would see them again: their
// databases are deleted here. Those the log still lists stay.
void DeleteIfUnlisted(const std::string& dir,
                      std::vector<CommittedEpoch> retired,
                      absl::Span<const std::string> nodes) {
  if (retired.empty()) return;
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (!log.ok()) return;
  std::vector<CommittedEpoch> unlisted;
  for (CommittedEpoch& e : retired) {
    if (FindCommittedEpoch(*log, e.epoch(), nodes) == nullptr) {
      unlisted.push_back(std::move(e));
    }
  }
  DeleteRetired(dir, unlisted, /*background=*/true).IgnoreError();
}

std::vector<std::string> FileNamesOf(const std::vector<PipelineNode>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const PipelineNode& n : nodes) names.push_back(n.file_name);
  return names;
}

}  // namespace

SavePipeline::SavePipeline(const CheckpointOptions& options,
                           std::vector<PipelineNode> nodes,
                           std::unique_ptr<Coordinator> coordinator,
                           SaveQueue* queue)
    : options_(options),
      nodes_(std::move(nodes)),
      file_names_(FileNamesOf(nodes_)),
      coordinator_(std::move(coordinator)),
      queue_(queue) {}

void LogIfFailed(const SaveOutcome& outcome) {
  LOG_IF(ERROR, !outcome.stats.ok())
      << "the checkpoint of epoch " << outcome.epoch
      << " failed: " << outcome.stats.status().message();
}

SavePipeline::~SavePipeline() {
  Drain();
  // Nobody took these; a failure must still not go unnoticed.
  for (const SaveOutcome& outcome : finished_) LogIfFailed(outcome);
}

absl::Status SavePipeline::LockNodes() {
  if (!locks_.empty()) return absl::OkStatus();
  std::vector<std::unique_ptr<NodeLock>> locks;
  for (const PipelineNode& n : nodes_) {
    if (!coordinator_->Hosts(n.node)) continue;
    JG_ASSIGN_OR_RETURN(std::unique_ptr<NodeLock> lock,
                        NodeLock::Acquire(options_.directory, n.file_name));
    locks.push_back(std::move(lock));
  }
  locks_ = std::move(locks);
  return absl::OkStatus();
}

bool SavePipeline::MayBeListed(int64_t epoch) const {
  return !listed_bound_.has_value() || epoch <= *listed_bound_;
}

absl::Status SavePipeline::Prepare(const SaveRecord& record, bool* agreed) {
  *agreed = false;
  // The mark edits an entry that is there: nothing to get ready.
  if (record.kind == SaveKind::kLoopFinished) return absl::OkStatus();
  // Forgetting the epoch (below) takes out its entry and those that refer
  // to it, all of later epochs (an entry refers to earlier ones): a base of
  // an earlier epoch, and the databases it refers to, stay listed. A base
  // of this epoch or a later one (a restored preemption checkpoint, which
  // this save replaces) goes.
  if (!base_.empty() && base_.epoch() >= record.epoch) base_ = SaveBase();
  absl::Status local = PrepareCheckpointDirectory(options_.directory);
  if (local.ok()) local = LockNodes();
  if (!MayBeListed(record.epoch)) return local;
  // The log must never list an epoch over databases being replaced, so the
  // epoch's entry goes first, once every earlier save has its outcome (a
  // commit in flight may be adding it), and every process waits for that.
  Drain();
  *agreed = true;
  int64_t newest = -1;  // of the job's entries left in the log
  if (local.ok() && coordinator_->commits()) {
    // Before any database is in place: databases without a commit log are
    // then always damage, never a crash before the first commit.
    local = CreateCommitLogIfMissing(options_.directory, options_.db_type);
    if (local.ok()) {
      absl::StatusOr<int64_t> left =
          ForgetEpoch(options_.directory, record.epoch, file_names_);
      if (left.ok()) newest = *left;
      local = left.status();
    }
  }
  JG_ASSIGN_OR_RETURN(newest, coordinator_->AgreeWithCommitter(local, newest));
  listed_bound_ = newest;
  return absl::OkStatus();
}

void SavePipeline::RestoredFrom(
    const Session& session, int64_t epoch,
    const std::vector<std::vector<std::string>>& blobs) {
  CHECK(flights_.empty()) << "a restore with checkpoint saves in flight";
  base_ = SaveBase();
  if (!options_.incremental) return;
  std::vector<std::unique_ptr<CompactBlobIndex>> indexes(nodes_.size());
  std::vector<BlobGenerations> generations(nodes_.size());
  // The chain begins with the oldest database these refer to: from the
  // indexes themselves, which the references of later saves copy.
  int64_t chain_start = epoch;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const PipelineNode& n = nodes_[i];
    if (!coordinator_->Hosts(n.node)) continue;
    const std::string path =
        CheckpointDbPath(options_.directory, n.file_name, epoch);
    absl::StatusOr<CompactBlobIndex> index =
        ReadCompactBlobIndexAt(options_.db_type, path);
    absl::StatusOr<std::vector<BlobSnapshot>> frozen =
        index.ok() ? session.SnapshotBlobs(n.node, blobs[i])
                   : absl::StatusOr<std::vector<BlobSnapshot>>(index.status());
    if (!frozen.ok()) {
      LOG(WARNING) << "node '" << n.node << "': the first save after the "
                   << "restore of epoch " << epoch
                   << " is full: " << frozen.status().message();
      return;
    }
    if (!index->referenced_epochs().empty()) {
      chain_start = std::min(chain_start, index->referenced_epochs().front());
    }
    indexes[i] = std::make_unique<CompactBlobIndex>(*std::move(index));
    generations[i] = GenerationsOf(*frozen);
  }
  base_ = SaveBase::Restored(epoch, chain_start, std::move(indexes),
                             std::move(generations));
}

absl::StatusOr<CheckpointStats> SavePipeline::Save(
    const Session* session, const SaveRecord& record,
    const std::vector<std::vector<std::string>>& blobs, bool wait) {
  const absl::Time start = absl::Now();
  // The saves before this one reach their boundary's exchange; at most one
  // of them writes while this one does.
  Settle(/*snapshot_follows=*/true);
  const int64_t waited = MicrosSince(start);

  auto flight = std::make_shared<Flight>();
  flight->record = record;
  flight->start = absl::Now();
  bool agreed = false;
  absl::Status local = Prepare(record, &agreed);
  // Every process has this failure: no exchange is needed to agree on it.
  const bool failed_everywhere = agreed && !local.ok();
  // The committer of several processes begins its commit ahead, before its
  // own databases, when the commit follows in this call: what is left after
  // the agreement is then one write, two fsyncs and a rename, not a wait of
  // every process for the committer's lock and read.
  if (local.ok() && coordinator_->commits() &&
      coordinator_->spans_processes() && queue_->runs_inline()) {
    flight->update = CommitLogUpdate::Begin(options_.directory);
    if (flight->update->ok()) {
      if (absl::Status prepared = (*flight->update)->Prepare();
          !prepared.ok()) {
        flight->update = std::move(prepared);
      }
    }
  }
  const bool incremental =
      options_.incremental && record.kind != SaveKind::kLoopFinished;
  // Refers to the last committed save (the base) unless a full save is due.
  const bool refers = incremental && !record.full &&
                      base_.UsableFor(record.epoch, options_.full_every);
  flight->chain_start = refers ? base_.chain_start() : record.epoch;
  if (incremental) {
    flight->generations.resize(nodes_.size());
    flight->indexes.resize(nodes_.size());
  }
  if (local.ok() && record.kind != SaveKind::kLoopFinished) {
    for (size_t i = 0; i < nodes_.size() && local.ok(); ++i) {
      const PipelineNode& n = nodes_[i];
      if (!coordinator_->Hosts(n.node)) continue;
      absl::StatusOr<std::vector<BlobSnapshot>> frozen =
          session->SnapshotBlobs(n.node, blobs[i]);
      if (!frozen.ok()) {
        local = frozen.status();
        break;
      }
      if (incremental) flight->generations[i] = GenerationsOf(*frozen);
      SaveBase::Split split;
      if (refers) {
        split = base_.SplitNode(i, *std::move(frozen));
      } else {
        split.write = *std::move(frozen);
      }
      flight->snapshots.push_back(
          {n.node, n.file_name,
           CheckpointDbPath(options_.directory, n.file_name, record.epoch), i,
           std::move(split.write), std::move(split.referenced)});
    }
  }
  if (!local.ok()) {
    ReleaseSnapshots(*flight);
    flight->written.status = local;
    // As many tallies as every other process reports: they are summed.
    if (options_.incremental) flight->written.tallies = NoTallies();
    if (coordinator_->spans_processes() && !failed_everywhere) {
      // This process's own failure becomes its write's report, agreed on
      // like a failed write: every process goes through the same stages,
      // the collective after_write hook included (Write runs only that).
      flight->next = hooks_.after_write ? Stage::kWrite : Stage::kAgree;
    } else {
      // The outcome at once: no save is in flight (Settle, and Prepare when
      // it agreed, left none).
      flight->agreed = local;
      flight->next = Stage::kDone;
      flight->done_at = absl::Now();
    }
  }
  flights_.push_back(flight);
  if (flight->next == Stage::kDone) {
    Collect();
    return OutcomeOf(*flight).stats;
  }
  flight->in_background = !queue_->runs_inline() && !wait;
  queue_->Run([this, flight] { Advance(*flight); });
  if (!flight->in_background) {
    Drain();
    return OutcomeOf(*flight).stats;
  }
  CheckpointStats stats;
  stats.epoch = record.epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  stats.in_background = true;
  stats.waited_micros = waited;
  stats.wall_micros = MicrosSince(start);
  return stats;
}

void SavePipeline::Advance(Flight& flight) {
  const bool exchanges_here = !coordinator_->spans_processes();
  while (true) {
    switch (flight.next) {
      case Stage::kWrite:
        Write(flight);
        flight.next = Stage::kAgree;
        break;
      case Stage::kAgree:
      case Stage::kShare:
        if (!exchanges_here) {
          flight.parked_at = absl::Now();
          return;
        }
        {
          SettleRound round;
          if (flight.next == Stage::kAgree) {
            round.write = flight.written;
          } else {
            round.commit = flight.committed;
          }
          Settled settled = coordinator_->Settle(round);
          if (flight.next == Stage::kAgree) {
            Agreed(flight, *settled.write);
          } else {
            Shared(flight, *settled.commit);
          }
        }
        break;
      case Stage::kCommit:
        Commit(flight);
        flight.next = Stage::kShare;
        break;
      case Stage::kDone:
        return;
    }
  }
}

void SavePipeline::Write(Flight& flight) {
  const absl::Time start = absl::Now();
  if (!flight.written.status.ok()) {
    // Failed in the caller's thread, before the write (Save): the other
    // processes' hooks still wait for this one's.
    AfterWrite(flight);
    return;
  }
  WriteReport report;
  // The blobs are frozen and nothing of the save is written yet; in an
  // asynchronous save the job goes on meanwhile and overwrites them. A test
  // holds the save here to prove that it writes what was frozen, and that a
  // crash now loses only this epoch. The mark writes no database.
  if (flight.record.kind != SaveKind::kLoopFinished) {
    report.status = Failpoint("save.after_snapshot");
  }
  if (report.status.ok()) {
    std::optional<PauseGate::Hold> paused;
    if (hooks_.write_pause != nullptr) {
      paused.emplace(hooks_.write_pause->Pause());
    }
    report = WriteNodeDatabases(flight);
  }
  if (options_.incremental) report.tallies = ReferenceTallies(flight);
  flight.written = std::move(report);
  AfterWrite(flight);
  flight.write_micros = MicrosSince(start);
}

void SavePipeline::AfterWrite(Flight& flight) {
  if (!hooks_.after_write) return;
  absl::Status done = hooks_.after_write(flight.record, flight.written.status);
  if (flight.written.status.ok()) flight.written.status = std::move(done);
}

WriteReport SavePipeline::WriteNodeDatabases(Flight& flight) const {
  std::vector<absl::StatusOr<int64_t>> written(flight.snapshots.size(),
                                               int64_t{0});
  auto write = [&](size_t i) {
    const Flight::NodeSnapshot& node = flight.snapshots[i];
    std::vector<BlobToSave> blobs;
    blobs.reserve(node.blobs.size());
    for (const BlobSnapshot& b : node.blobs) {
      blobs.push_back({b.name, b.blob.get()});
    }
    CheckpointDbOptions db_options;
    db_options.node = node.file_name;
    db_options.epoch = flight.record.epoch;
    db_options.serialization.chunk_bytes = options_.chunk_bytes;
    db_options.referenced = node.referenced;
    written[i] = WriteCheckpointDb(
        options_.db_type, node.path, std::move(blobs), db_options,
        flight.indexes.empty() ? nullptr : &flight.indexes[node.position]);
  };
  // The nodes' databases are written side by side, as the nodes run.
  std::vector<std::thread> others;
  for (size_t i = 1; i < flight.snapshots.size(); ++i) {
    try {
      others.emplace_back(write, i);
    } catch (const std::system_error&) {
      write(i);  // no thread to be had: this one writes it
    }
  }
  if (!flight.snapshots.empty()) write(0);
  for (std::thread& t : others) t.join();
  WriteReport report;
  for (size_t i = 0; i < written.size(); ++i) {
    if (!written[i].ok()) {
      report.status =
          Annotate(written[i].status(),
                   absl::StrCat("node '", flight.snapshots[i].node, "'"));
      break;
    }
    report.bytes += *written[i];
  }
  return report;
}

std::vector<int64_t> SavePipeline::ReferenceTallies(
    const Flight& flight) const {
  // [referenced bytes, then for each k in 1..full_every the number of this
  // process's blobs held k epochs back]: summed over the processes, the
  // commit learns which epochs the save references. A chain spans fewer
  // than full_every epochs (SaveBase::UsableFor), so k never exceeds it.
  std::vector<int64_t> tallies = NoTallies();
  for (const Flight::NodeSnapshot& node : flight.snapshots) {
    for (const CheckpointBlobInfo& info : node.referenced) {
      for (int64_t bytes : info.value_bytes()) tallies[0] += bytes;
      const int64_t back = flight.record.epoch - info.stored_in_epoch();
      CHECK(back >= 1 && back <= options_.full_every)
          << "blob '" << info.name() << "' refers " << back << " epochs back";
      ++tallies[back];
    }
  }
  return tallies;
}

std::vector<int64_t> SavePipeline::NoTallies() const {
  return std::vector<int64_t>(1 + options_.full_every, 0);
}

std::vector<int64_t> SavePipeline::PinnedEpochs() const {
  if (base_.empty()) return {};
  return {base_.epoch()};
}

void SavePipeline::Commit(Flight& flight) {
  if (!coordinator_->commits()) return;
  const absl::Time start = absl::Now();
  const SaveRecord& record = flight.record;
  absl::StatusOr<CommitLogUpdate> update =
      flight.update.has_value() ? *std::move(flight.update)
                                : CommitLogUpdate::Begin(options_.directory);
  flight.update.reset();
  if (record.kind == SaveKind::kLoopFinished) {
    flight.committed =
        update.ok() ? MarkEpochLoopFinished(*std::move(update), record.epoch,
                                            file_names_, record.preemption)
                    : update.status();
    flight.commit_micros = MicrosSince(start);
    if (flight.committed.ok() && hooks_.committed) hooks_.committed(record);
    return;
  }
  EpochCommit commit;
  commit.epoch = record.epoch;
  commit.nodes = file_names_;
  commit.total_bytes = flight.agreed->bytes;
  const std::vector<int64_t>& tallies = flight.agreed->tallies;
  if (!tallies.empty()) {
    commit.referenced_bytes = tallies[0];
    for (size_t back = tallies.size() - 1; back >= 1; --back) {
      if (tallies[back] > 0) {
        commit.referenced_epochs.push_back(record.epoch -
                                           static_cast<int64_t>(back));
      }
    }
  }
  // The save's own time: without its waits for epoch boundaries.
  commit.save_micros = MicrosSince(flight.start) - flight.parked_micros;
  commit.committed_unix_micros = flight.agreed->commit_unix_micros;
  if (hooks_.held_nodes) commit.held_nodes = hooks_.held_nodes();
  commit.host = hooks_.host;
  if (record.kind == SaveKind::kPreemption)
    commit.preemption = record.preemption;
  // The epochs that retention retires leave the log in the commit's own
  // write: one write, and a crash never leaves them listed beside the new
  // epoch. Their databases go once the log no longer lists them.
  std::vector<CommittedEpoch> retired;
  std::vector<int64_t> pinned = flight.pinned;
  if (hooks_.pinned) {
    for (int64_t epoch : hooks_.pinned()) pinned.push_back(epoch);
  }
  commit.also = [&](CommitLog& log) {
    retired = RetireEpochs(log, options_.retention, commit.nodes, pinned);
  };
  absl::Status committed =
      update.ok() ? CommitEpoch(*std::move(update), options_.db_type, commit)
                  : update.status();
  if (!committed.ok()) {
    DeleteIfUnlisted(options_.directory, std::move(retired), commit.nodes);
  } else {
    // The epoch is committed now; a failure to delete old databases must
    // not turn it into a failed save. It is logged; those databases stay on
    // disk, unlisted (`ckpt list` shows them as uncommitted, `ckpt gc`
    // counts them).
    absl::Status deleted =
        DeleteRetired(options_.directory, retired, /*background=*/true)
            .status();
    LOG_IF(ERROR, !deleted.ok())
        << "epoch " << record.epoch << " is committed in " << options_.directory
        << ", but retention failed: " << deleted;
  }
  const bool listed = committed.ok();
  flight.committed = std::move(committed);
  flight.commit_micros = MicrosSince(start);
  if (listed && hooks_.committed) hooks_.committed(record);
}

void SavePipeline::Agreed(Flight& flight, absl::StatusOr<WriteTotals> agreed) {
  flight.agreed = std::move(agreed);
  if (flight.agreed.ok()) {
    flight.next = Stage::kCommit;
  } else {
    flight.next = Stage::kDone;
    flight.done_at = absl::Now();
  }
}

void SavePipeline::AgreeCommitTime(Flight& flight) {
  // As AgreeAndCommit does it when the commit follows in the same call.
  absl::StatusOr<int64_t> time = coordinator_->AgreeWithCommitter(
      absl::OkStatus(), absl::ToUnixMicros(absl::Now()));
  if (!time.ok()) {
    flight.agreed = time.status();
    flight.next = Stage::kDone;
    flight.done_at = absl::Now();
    return;
  }
  flight.agreed->commit_unix_micros = *time;
}

void SavePipeline::Shared(Flight& flight, absl::Status committed) {
  flight.committed = std::move(committed);
  flight.next = Stage::kDone;
  flight.done_at = absl::Now();
}

void SavePipeline::ReleaseSnapshots(Flight& flight) {
  if (flight.snapshots.empty()) return;
  auto frozen = std::make_shared<std::vector<Flight::NodeSnapshot>>(
      std::move(flight.snapshots));
  flight.snapshots.clear();
  queue_->Run([frozen = std::move(frozen)] {});
}

bool SavePipeline::Settle(bool snapshot_follows) {
  queue_->Wait();
  // The queue's thread has no work now: the job's thread may touch every
  // flight. A save whose write ended did so in the epoch that just
  // finished, so its snapshot may go (ARCHITECTURE.md, invariant 6), freed
  // on the queue's thread, off the job's.
  for (const std::shared_ptr<Flight>& f : flights_) {
    if (f->next != Stage::kWrite) ReleaseSnapshots(*f);
  }
  bool progressed = false;
  std::shared_ptr<Flight> to_commit;
  if (coordinator_->spans_processes()) {
    // The exchanges that are due, in one round: the newest save's write and
    // the commit before it.
    std::shared_ptr<Flight> agreeing;
    std::shared_ptr<Flight> sharing;
    for (const std::shared_ptr<Flight>& f : flights_) {
      if (f->next == Stage::kAgree) agreeing = f;
      if (f->next == Stage::kShare) sharing = f;
    }
    const absl::Time now = absl::Now();
    for (Flight* f : {agreeing.get(), sharing.get()}) {
      if (f != nullptr) {
        f->parked_micros += absl::ToInt64Microseconds(now - f->parked_at);
      }
    }
    if (agreeing != nullptr && sharing == nullptr && queue_->runs_inline()) {
      // The commit follows in this call: agreeing, committing and sharing
      // are one exchange centred on the committer.
      Flight& flight = *agreeing;
      CommitRound round = coordinator_->AgreeAndCommit(
          flight.written, [&](const WriteTotals& totals) {
            flight.agreed = totals;
            Commit(flight);
            return flight.committed;
          });
      flight.agree_micros = absl::ToInt64Microseconds(round.agreed_at - now);
      flight.commit_micros = MicrosSince(round.agreed_at);
      flight.agreed = std::move(round.write);
      Shared(flight, std::move(round.commit));
      if (hooks_.shared && flight.agreed.ok() && flight.committed.ok()) {
        hooks_.shared(flight.record);
      }
      progressed = true;
    } else if (agreeing != nullptr || sharing != nullptr) {
      SettleRound round;
      if (agreeing != nullptr) round.write = agreeing->written;
      if (sharing != nullptr) round.commit = sharing->committed;
      Settled settled = coordinator_->Settle(round);
      const int64_t exchange_micros = MicrosSince(now);
      if (sharing != nullptr) {
        sharing->commit_micros += exchange_micros;
        Shared(*sharing, *settled.commit);
        if (hooks_.shared && sharing->committed.ok()) {
          hooks_.shared(sharing->record);
        }
      }
      if (agreeing != nullptr) {
        agreeing->agree_micros = exchange_micros;
        Agreed(*agreeing, *settled.write);
        if (agreeing->next == Stage::kCommit &&
            coordinator_->several_commit()) {
          AgreeCommitTime(*agreeing);
        }
        if (agreeing->next == Stage::kCommit) to_commit = agreeing;
      }
      progressed = true;
    }
  }
  const size_t before = finished_.size();
  Collect();
  if (to_commit != nullptr) {
    // Queued once Collect is done with the flights: it must not read one
    // the queue's thread works on, nor lower the bound below an epoch whose
    // commit is in flight (the log may list it from then on).
    if (listed_bound_.has_value()) {
      listed_bound_ = std::max(*listed_bound_, to_commit->record.epoch);
    }
    // A save snapshotted before this commit runs refers to the current
    // base: its databases must outlive the commit's retention.
    if (snapshot_follows) to_commit->pinned = PinnedEpochs();
    queue_->Run([this, to_commit] { Advance(*to_commit); });
  }
  return progressed || finished_.size() > before;
}

void SavePipeline::Collect() {
  while (!flights_.empty() && flights_.front()->next == Stage::kDone) {
    std::shared_ptr<Flight> flight = std::move(flights_.front());
    flights_.pop_front();
    const SaveRecord& record = flight->record;
    SaveOutcome outcome = OutcomeOf(*flight);
    if (record.kind != SaveKind::kLoopFinished && listed_bound_.has_value()) {
      // A commit drops the job's later entries; a failed one may still
      // have listed the epoch (say, the log was renamed in place and then
      // its directory's fsync failed).
      listed_bound_ = outcome.stats.ok()
                          ? record.epoch
                          : std::max(*listed_bound_, record.epoch);
    }
    if (options_.incremental && flight->agreed.ok() &&
        !flight->committed.ok()) {
      // A commit that failed may still have put its log in place (say, the
      // directory's fsync failed after the rename), and that log's
      // retention may have retired what the base refers to: the next save
      // is full.
      base_ = SaveBase();
    }
    if (options_.incremental && record.kind == SaveKind::kEpoch &&
        outcome.stats.ok()) {
      // The next save refers to this one.
      absl::StatusOr<SaveBase> base = SaveBase::After(
          record.epoch, flight->chain_start, std::move(flight->indexes),
          std::move(flight->generations));
      LOG_IF(ERROR, !base.ok()) << base.status() << "; the next save is full";
      base_ = base.ok() ? *std::move(base) : SaveBase();
    }
    finished_.push_back(std::move(outcome));
  }
}

SaveOutcome SavePipeline::OutcomeOf(const Flight& flight) const {
  SaveOutcome outcome;
  outcome.epoch = flight.record.epoch;
  outcome.kind = flight.record.kind;
  outcome.in_background = flight.in_background;
  absl::Status status = flight.agreed.status();
  if (status.ok()) status = flight.committed;
  if (!status.ok()) {
    outcome.stats = status;
    return outcome;
  }
  CheckpointStats stats;
  stats.epoch = flight.record.epoch;
  stats.num_dbs = flight.record.kind == SaveKind::kLoopFinished
                      ? 0
                      : static_cast<int>(nodes_.size());
  stats.bytes = flight.agreed->bytes;
  if (!flight.agreed->tallies.empty()) {
    stats.referenced_bytes = flight.agreed->tallies[0];
  }
  stats.write_micros = flight.write_micros;
  stats.agree_micros = flight.agree_micros;
  stats.commit_micros = flight.commit_micros;
  stats.in_background = flight.in_background;
  stats.wall_micros = absl::ToInt64Microseconds(flight.done_at - flight.start) -
                      flight.parked_micros;
  outcome.stats = stats;
  return outcome;
}

void SavePipeline::Drain() {
  // Every round moves a save on: after the queue's wait each one waits at
  // an exchange or is done.
  while (!flights_.empty()) {
    CHECK(Settle(/*snapshot_follows=*/false)) << "a checkpoint save is stuck";
  }
}

std::vector<SaveOutcome> SavePipeline::TakeFinished() {
  if (!coordinator_->spans_processes() && queue_->Idle()) Collect();
  return std::exchange(finished_, {});
}

}  // namespace jobgraph
