// The SQLite store: the only file that includes <sqlite3.h>.
//
// Layout of this file, top to bottom:
//   1. the schema, as a table of migrations (index + 1 = user_version);
//   2. small RAII wrappers: Stmt (a prepared statement with bound parameters)
//      and Txn (a BEGIN IMMEDIATE transaction rolled back unless committed);
//   3. SqliteStore, one method per Store call;
//   4. OpenStore / StoreSchemaVersion / CheckStoreIntegrity.
// docs/database.md describes the schema for people who query the file directly.

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "runner/base/json.h"
#include "runner/base/log.h"
#include "runner/base/text.h"
#include "runner/store/store.h"

namespace protocol {

namespace {

// ---- 1. schema ------------------------------------------------------------
// Append-only: never edit a released step; add a new one. Open() applies the
// steps after the file's user_version, one transaction per step, and sets
// user_version to the step's index + 1 in the same transaction.
const char* const kMigrations[] = {
    // 1: the initial schema.
    R"sql(
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY,
  kind             TEXT NOT NULL,
  plan_name        TEXT NOT NULL,
  plan_title       TEXT NOT NULL,
  plan_file        TEXT NOT NULL,
  plan_text        TEXT NOT NULL,
  plan_sha256      TEXT NOT NULL,
  source           TEXT NOT NULL,
  started_at       TEXT NOT NULL,
  finished_at      TEXT NOT NULL,
  status           TEXT NOT NULL,
  protocol_version TEXT NOT NULL,
  git_revision     TEXT NOT NULL
);
CREATE TABLE run_context (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq    INTEGER NOT NULL,
  key    TEXT NOT NULL,
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);
CREATE TABLE cases (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  case_id         TEXT NOT NULL,
  repeat          INTEGER NOT NULL,
  stage           TEXT NOT NULL,
  model           TEXT NOT NULL,
  workload        TEXT NOT NULL,
  backend         TEXT NOT NULL,
  system          TEXT NOT NULL,
  nodes           INTEGER NOT NULL,
  topology        TEXT NOT NULL,
  network         TEXT NOT NULL,
  variant         TEXT NOT NULL,
  length_unit     TEXT NOT NULL,
  length_count    INTEGER NOT NULL,
  report_as_unit  TEXT NOT NULL,
  report_as_count INTEGER NOT NULL,
  status          TEXT NOT NULL CHECK (status IN
                    ('running','ok','failed','timeout','skipped','interrupted')),
  reason          TEXT NOT NULL,
  exit_code       INTEGER,
  started_at      TEXT NOT NULL,
  finished_at     TEXT NOT NULL,
  log_path        TEXT NOT NULL
);
CREATE INDEX cases_run_id ON cases(run_id);
CREATE TABLE measurements (
  id       INTEGER PRIMARY KEY,
  case_row INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  name     TEXT NOT NULL,
  value    REAL,
  unit     TEXT NOT NULL,
  how      TEXT NOT NULL CHECK (how IN ('measured','extrapolated','imported')),
  method   TEXT NOT NULL,
  source   TEXT NOT NULL,
  marker   TEXT NOT NULL
);
CREATE INDEX measurements_case_row ON measurements(case_row);
CREATE TABLE step_samples (
  id       INTEGER PRIMARY KEY,
  case_row INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  step     INTEGER NOT NULL,
  seconds  REAL NOT NULL,
  loss     REAL,
  tokens   INTEGER
);
CREATE INDEX step_samples_case_row ON step_samples(case_row);
CREATE TABLE request_samples (
  id               INTEGER PRIMARY KEY,
  case_row         INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  idx              INTEGER NOT NULL,
  max_new_tokens   INTEGER NOT NULL,
  prompt_tokens    INTEGER NOT NULL,
  generated_tokens INTEGER NOT NULL,
  seconds          REAL NOT NULL,
  answer           TEXT NOT NULL
);
CREATE INDEX request_samples_case_row ON request_samples(case_row);
)sql",
    // 2: provenance (docs/regression.md): the sha256 of each case's log, stored at finish.
    R"sql(
ALTER TABLE cases ADD COLUMN log_sha256 TEXT NOT NULL DEFAULT '';
)sql",
    // 3: the generated token ids of each request (a JSON array; NULL: not
    // recorded), and valid UTF-8 in every TEXT column: text stored before
    // this step could hold invalid bytes (byte-fallback answers, paths), which
    // readers such as Python's sqlite3 refuse. protocol_valid_utf8 is
    // ValidUtf8 (text.h), registered on every connection (Init).
    R"sql(
ALTER TABLE request_samples ADD COLUMN token_ids TEXT;
UPDATE request_samples SET answer = protocol_valid_utf8(answer) WHERE answer <> protocol_valid_utf8(answer);
UPDATE runs SET kind = protocol_valid_utf8(kind) WHERE kind <> protocol_valid_utf8(kind);
UPDATE runs SET plan_name = protocol_valid_utf8(plan_name) WHERE plan_name <> protocol_valid_utf8(plan_name);
UPDATE runs SET plan_title = protocol_valid_utf8(plan_title) WHERE plan_title <> protocol_valid_utf8(plan_title);
UPDATE runs SET plan_file = protocol_valid_utf8(plan_file) WHERE plan_file <> protocol_valid_utf8(plan_file);
UPDATE runs SET plan_text = protocol_valid_utf8(plan_text) WHERE plan_text <> protocol_valid_utf8(plan_text);
UPDATE runs SET plan_sha256 = protocol_valid_utf8(plan_sha256) WHERE plan_sha256 <> protocol_valid_utf8(plan_sha256);
UPDATE runs SET source = protocol_valid_utf8(source) WHERE source <> protocol_valid_utf8(source);
UPDATE runs SET started_at = protocol_valid_utf8(started_at) WHERE started_at <> protocol_valid_utf8(started_at);
UPDATE runs SET finished_at = protocol_valid_utf8(finished_at) WHERE finished_at <> protocol_valid_utf8(finished_at);
UPDATE runs SET status = protocol_valid_utf8(status) WHERE status <> protocol_valid_utf8(status);
UPDATE runs SET protocol_version = protocol_valid_utf8(protocol_version) WHERE protocol_version <> protocol_valid_utf8(protocol_version);
UPDATE runs SET git_revision = protocol_valid_utf8(git_revision) WHERE git_revision <> protocol_valid_utf8(git_revision);
UPDATE run_context SET key = protocol_valid_utf8(key) WHERE key <> protocol_valid_utf8(key);
UPDATE run_context SET value = protocol_valid_utf8(value) WHERE value <> protocol_valid_utf8(value);
UPDATE cases SET case_id = protocol_valid_utf8(case_id) WHERE case_id <> protocol_valid_utf8(case_id);
UPDATE cases SET stage = protocol_valid_utf8(stage) WHERE stage <> protocol_valid_utf8(stage);
UPDATE cases SET model = protocol_valid_utf8(model) WHERE model <> protocol_valid_utf8(model);
UPDATE cases SET workload = protocol_valid_utf8(workload) WHERE workload <> protocol_valid_utf8(workload);
UPDATE cases SET backend = protocol_valid_utf8(backend) WHERE backend <> protocol_valid_utf8(backend);
UPDATE cases SET system = protocol_valid_utf8(system) WHERE system <> protocol_valid_utf8(system);
UPDATE cases SET topology = protocol_valid_utf8(topology) WHERE topology <> protocol_valid_utf8(topology);
UPDATE cases SET network = protocol_valid_utf8(network) WHERE network <> protocol_valid_utf8(network);
UPDATE cases SET variant = protocol_valid_utf8(variant) WHERE variant <> protocol_valid_utf8(variant);
UPDATE cases SET length_unit = protocol_valid_utf8(length_unit) WHERE length_unit <> protocol_valid_utf8(length_unit);
UPDATE cases SET report_as_unit = protocol_valid_utf8(report_as_unit) WHERE report_as_unit <> protocol_valid_utf8(report_as_unit);
UPDATE cases SET reason = protocol_valid_utf8(reason) WHERE reason <> protocol_valid_utf8(reason);
UPDATE cases SET started_at = protocol_valid_utf8(started_at) WHERE started_at <> protocol_valid_utf8(started_at);
UPDATE cases SET finished_at = protocol_valid_utf8(finished_at) WHERE finished_at <> protocol_valid_utf8(finished_at);
UPDATE cases SET log_path = protocol_valid_utf8(log_path) WHERE log_path <> protocol_valid_utf8(log_path);
UPDATE cases SET log_sha256 = protocol_valid_utf8(log_sha256) WHERE log_sha256 <> protocol_valid_utf8(log_sha256);
UPDATE measurements SET name = protocol_valid_utf8(name) WHERE name <> protocol_valid_utf8(name);
UPDATE measurements SET unit = protocol_valid_utf8(unit) WHERE unit <> protocol_valid_utf8(unit);
UPDATE measurements SET method = protocol_valid_utf8(method) WHERE method <> protocol_valid_utf8(method);
UPDATE measurements SET source = protocol_valid_utf8(source) WHERE source <> protocol_valid_utf8(source);
UPDATE measurements SET marker = protocol_valid_utf8(marker) WHERE marker <> protocol_valid_utf8(marker);
)sql",
    // 4: a figure carries the length it is for when that is not its case's own
    // (a report_as or not_provided length), so one case gives several rows; the
    // provenances 'prefix' (computed from the first steps of a longer run) and
    // 'declared' (a plan's not_provided length: nothing measured).
    // SQLite cannot change a CHECK in place: the table is copied. The runner's
    // extrapolated times stored before took their case's report_as length.
    R"sql(
CREATE TABLE measurements_v4 (
  id           INTEGER PRIMARY KEY,
  case_row     INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  name         TEXT NOT NULL,
  value        REAL,
  unit         TEXT NOT NULL,
  how          TEXT NOT NULL CHECK (how IN ('measured','extrapolated','prefix','declared','imported')),
  method       TEXT NOT NULL,
  source       TEXT NOT NULL,
  marker       TEXT NOT NULL,
  length_unit  TEXT NOT NULL DEFAULT '',
  length_count INTEGER NOT NULL DEFAULT 0
);
INSERT INTO measurements_v4 (id, case_row, name, value, unit, how, method, source, marker)
  SELECT id, case_row, name, value, unit, how, method, source, marker FROM measurements;
UPDATE measurements_v4 SET
  length_unit = (SELECT report_as_unit FROM cases WHERE cases.id = measurements_v4.case_row),
  length_count = (SELECT report_as_count FROM cases WHERE cases.id = measurements_v4.case_row)
  WHERE how = 'extrapolated' AND name = 'wall_seconds'
    AND (SELECT report_as_unit FROM cases WHERE cases.id = measurements_v4.case_row) <> '';
DROP TABLE measurements;
ALTER TABLE measurements_v4 RENAME TO measurements;
CREATE INDEX measurements_case_row ON measurements(case_row);
)sql",
    // 5: what each case ran on and how (CaseResult::facts): ranks, threads,
    // the device used, the compute dtype, the decoding.
    R"sql(
CREATE TABLE case_facts (
  id       INTEGER PRIMARY KEY,
  case_row INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  key      TEXT NOT NULL,
  value    TEXT NOT NULL
);
CREATE INDEX case_facts_case_row ON case_facts(case_row);
)sql",
    // 6: the held-out loss curve of a training case (training.eval_every):
    // one row per evaluation, the training seconds up to it excluding every
    // evaluation's own time.
    R"sql(
CREATE TABLE eval_points (
  id               INTEGER PRIMARY KEY,
  case_row         INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  step             INTEGER NOT NULL,
  tokens           INTEGER NOT NULL,
  training_seconds REAL NOT NULL,
  loss             REAL NOT NULL
);
CREATE INDEX eval_points_case_row ON eval_points(case_row);
)sql",
    // 7: the provenance 'estimated' (a case's expected wall time, computed
    // before it ran). The table is copied, as in step 4.
    R"sql(
CREATE TABLE measurements_v7 (
  id           INTEGER PRIMARY KEY,
  case_row     INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  name         TEXT NOT NULL,
  value        REAL,
  unit         TEXT NOT NULL,
  how          TEXT NOT NULL CHECK (how IN ('measured','extrapolated','prefix','declared','imported','estimated')),
  method       TEXT NOT NULL,
  source       TEXT NOT NULL,
  marker       TEXT NOT NULL,
  length_unit  TEXT NOT NULL DEFAULT '',
  length_count INTEGER NOT NULL DEFAULT 0
);
INSERT INTO measurements_v7 SELECT id, case_row, name, value, unit, how, method, source, marker, length_unit,
  length_count FROM measurements;
DROP TABLE measurements;
ALTER TABLE measurements_v7 RENAME TO measurements;
CREATE INDEX measurements_case_row ON measurements(case_row);
)sql",
    // 8: a rank's own figure keeps its rank in a column of its own
    // (records.h RankFigureName): rows named NAME_rank<r> become NAME and r.
    R"sql(
ALTER TABLE measurements ADD COLUMN rank INTEGER;
UPDATE measurements
   SET rank = CAST(substr(name, instr(name, '_rank') + 5) AS INTEGER),
       name = substr(name, 1, instr(name, '_rank') - 1)
 WHERE instr(name, '_rank') > 1
   AND length(substr(name, instr(name, '_rank') + 5)) BETWEEN 1 AND 6
   AND substr(name, instr(name, '_rank') + 5) NOT GLOB '*[^0-9]*'
   AND (length(substr(name, instr(name, '_rank') + 5)) = 1 OR substr(name, instr(name, '_rank') + 5) NOT GLOB '0*');
)sql",
    // 9: the hardware sampled while a case ran (records.h TelemetrySample):
    // one row per quantity of one device of one node at one time.
    R"sql(
CREATE TABLE telemetry_samples (
  id       INTEGER PRIMARY KEY,
  case_row INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  seconds  REAL NOT NULL,
  node     TEXT NOT NULL,
  device   TEXT NOT NULL,
  quantity TEXT NOT NULL,
  value    REAL NOT NULL
);
CREATE INDEX telemetry_samples_case_row ON telemetry_samples(case_row);
)sql",
};
constexpr int kSchemaVersion = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));
// A measurement's name as the program knows it (records.h RankFigureName):
// a rank's own figure NAME_rank<r>, every other its name.
constexpr const char* kMeasurementName = "(CASE WHEN m.rank IS NULL THEN m.name ELSE m.name || '_rank' || m.rank END)";
constexpr int kBusyTimeoutMs = 30000;

// Every sqlite failure becomes a Status naming what was being done.
// Damaged or foreign files are kCorruption; everything else is kIoError.
Status SqlError(sqlite3* db, int rc, const std::string& doing) {
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    msg += fmt::format(" (another process held it for more than {} s)", kBusyTimeoutMs / 1000);
  // SQLite's "database or disk is full" names neither: it is the database's file system.
  if (primary == SQLITE_FULL) msg = "no space left on device for the database (SQLite: " + msg + ")";
  std::string text = doing + ": " + msg;
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) return Status::Corruption(text);
  return Status::IoError(text);
}

// "<path>: <doing>": an error names the database it is about (a full disk
// says which file system), once.
std::string NamedDoing(const std::string& path, const std::string& doing) {
  if (path.empty() || path == ":memory:" || StartsWith(doing, path)) return doing;
  return path + ": " + doing;
}

// ---- 2. wrappers ------------------------------------------------------------

// A prepared statement. Parameters are bound by 1-based position, in order,
// with Bind(); Step() returns SQLITE_ROW / SQLITE_DONE / an error code.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // SQLITE_OK when prepared and every Bind so far succeeded.
  int rc() const { return rc_; }

  Stmt& Bind(int64_t v) { return Check(sqlite3_bind_int64(stmt_, ++pos_, v)); }
  Stmt& Bind(int v) { return Bind(static_cast<int64_t>(v)); }
  Stmt& Bind(double v) { return Check(sqlite3_bind_double(stmt_, ++pos_, v)); }
  // Every TEXT this program writes goes through here, so here it is made
  // valid UTF-8 (ValidUtf8, text.h: maximal invalid subparts become U+FFFD):
  // log lines, command output, reasons, methods, paths, environment strings.
  Stmt& Bind(const std::string& v) {
    if (IsValidUtf8(v))
      return Check(sqlite3_bind_text(stmt_, ++pos_, v.data(), static_cast<int>(v.size()),
                                     SQLITE_TRANSIENT));
    const std::string valid = ValidUtf8(v);
    return Check(sqlite3_bind_text(stmt_, ++pos_, valid.data(), static_cast<int>(valid.size()),
                                   SQLITE_TRANSIENT));
  }
  Stmt& Bind(const char* v) { return Bind(std::string(v)); }
  template <typename T>
  Stmt& Bind(const std::optional<T>& v) {
    if (v) return Bind(*v);
    return Check(sqlite3_bind_null(stmt_, ++pos_));
  }

  // Makes the statement ready to run again with new parameters (loops of inserts).
  void Reset() {
    if (rc_ != SQLITE_OK) return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    pos_ = 0;
  }

  // Runs one step. REQUIRES: rc() == SQLITE_OK (otherwise returns it).
  int Step() {
    if (rc_ != SQLITE_OK) return rc_;
    return sqlite3_step(stmt_);
  }
  // Runs a statement that returns no rows; SQLITE_DONE on success.
  int Exec() {
    int rc = Step();
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    if (!p) return std::string();
    return std::string(reinterpret_cast<const char*>(p),
                       static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  Stmt& Check(int rc) {
    if (rc_ == SQLITE_OK && rc != SQLITE_OK) rc_ = rc;
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
  int pos_ = 0;
};

// A BEGIN IMMEDIATE transaction: takes the write lock up front (waiting up to
// the busy timeout), so a writer never fails half-way on a lock upgrade.
// Rolled back on destruction unless Commit() succeeded.
class Txn {
 public:
  // `path` names the database in every error (NamedDoing).
  Txn(sqlite3* db, const std::string& path) : db_(db), path_(path) {}
  ~Txn() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  // `begin` is "BEGIN IMMEDIATE" for writers, "BEGIN" for a consistent read.
  Status Begin(const std::string& doing, const char* begin = "BEGIN IMMEDIATE") {
    int rc = sqlite3_exec(db_, begin, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqlError(db_, rc, NamedDoing(path_, doing));
    open_ = true;
    return Status::Ok();
  }
  Status Commit(const std::string& doing) {
    int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqlError(db_, rc, NamedDoing(path_, doing));
    open_ = false;
    return Status::Ok();
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool open_ = false;
};

// SQL function protocol_valid_utf8(x): ValidUtf8 of a TEXT value (NULL and
// other types are returned as they are). Migration 3 uses it.
void SqlValidUtf8(sqlite3_context* context, int argc, sqlite3_value** argv) {
  if (argc != 1 || sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    if (argc == 1) sqlite3_result_value(context, argv[0]);
    return;
  }
  const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string valid = ValidUtf8(std::string_view(p, static_cast<size_t>(sqlite3_value_bytes(argv[0]))));
  sqlite3_result_text(context, valid.data(), static_cast<int>(valid.size()), SQLITE_TRANSIENT);
}

// Generated token ids as stored in request_samples.token_ids: "[1,2,3]".
std::string TokenIdsText(const std::vector<int>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

// The inverse of TokenIdsText (any JSON array of integers); nullopt when the
// text is not one.
std::optional<std::vector<int>> ParseTokenIds(const std::string& text) {
  try {
    Json j = Json::parse(text);
    if (!j.is_array()) return std::nullopt;
    std::vector<int> ids;
    for (const Json& v : j) {
      if (!v.is_number_integer()) return std::nullopt;
      ids.push_back(v.get<int>());
    }
    return ids;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Runs one statement of pragmas/DDL with no parameters.
Status ExecSql(sqlite3* db, const char* sql, const std::string& doing) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  sqlite3_free(err);
  return SqlError(db, rc, doing);
}

// A single integer from a query without parameters (PRAGMA user_version, counts).
Result<int64_t> QueryInt(sqlite3* db, const char* sql, const std::string& doing) {
  Stmt q(db, sql);
  int rc = q.Step();
  if (rc != SQLITE_ROW) return SqlError(db, rc == SQLITE_DONE ? SQLITE_ERROR : rc, doing);
  return q.Int(0);
}

// ---- 3. the store -------------------------------------------------------------

class SqliteStore : public Store {
 public:
  SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  // Checks the file is ours (or empty), sets the pragmas, migrates.
  Status Init();

  Result<int64_t> CreateRun(const RunRecord& run) override;
  Status FinishRun(int64_t run_id, const std::string& status,
                   const std::string& finished_at) override;
  Status PutContext(int64_t run_id,
                    const std::vector<std::pair<std::string, std::string>>& facts) override;
  Result<int64_t> BeginCase(const CaseRecord& record) override;
  Status AppendSteps(int64_t row_id, const std::vector<StepSample>& steps) override;
  Status AppendRequests(int64_t row_id, const std::vector<RequestSample>& requests) override;
  Status AppendTelemetry(int64_t row_id, const std::vector<TelemetrySample>& samples) override;
  Status FinishCase(int64_t row_id, const CaseResult& result) override;
  Result<int> InterruptRunningCases(int64_t run_id, const std::string& reason) override;

  Result<std::vector<RunRecord>> ListRuns() override;
  Result<RunRecord> GetRun(int64_t run_id) override;
  Result<std::vector<std::pair<std::string, std::string>>> GetContext(int64_t run_id) override;
  Result<std::vector<CaseRecord>> CasesOfRun(int64_t run_id) override;
  Result<std::vector<Measurement>> MeasurementsOfCase(int64_t row_id) override;
  Result<std::vector<std::pair<std::string, std::string>>> FactsOfCase(int64_t row_id) override;
  Result<std::vector<StepSample>> StepsOfCase(int64_t row_id) override;
  Result<std::vector<EvalPoint>> EvalCurveOfCase(int64_t row_id) override;
  Result<std::vector<TelemetrySample>> TelemetryOfCase(int64_t row_id) override;
  Result<std::vector<RequestSample>> RequestsOfCase(int64_t row_id) override;
  Result<std::vector<RunRecord>> ListRunHeaders() override;
  Result<std::vector<CaseRecord>> FindCases(const CaseQuery& query) override;
  Result<std::vector<std::pair<int64_t, Measurement>>> FindMeasurements(
      const CaseQuery& query, const std::vector<std::string>& names) override;

 private:
  Status Err(int rc, const std::string& doing) { return SqlError(db_, rc, NamedDoing(path_, doing)); }
  bool InMemory() const { return path_ == ":memory:" || path_.empty(); }
  // Checks a file with user_version `version` before anything is written to it.
  Status CheckOwnership(int64_t version);
  Status Migrate();
  // kNotFound "run 7 does not exist" when absent.
  Status RunExists(int64_t run_id, const std::string& doing);
  // "case 2.1.1.1" or "case 2.1.1.1 repeat 2" for messages; kNotFound when absent.
  Result<std::string> CaseLabel(int64_t row_id);
  Status InsertTelemetry(int64_t row_id, const std::vector<TelemetrySample>& samples, const std::string& doing);
  Status InsertSamples(int64_t row_id, const std::vector<StepSample>& steps,
                       const std::vector<RequestSample>& requests, const std::string& doing);

  sqlite3* db_;
  std::string path_;
};

Status SqliteStore::CheckOwnership(int64_t version) {
  if (version > kSchemaVersion) {
    return Status::Corruption(fmt::format(
        "{}: database schema version {} is newer than this protocol understands ({}); "
        "upgrade protocol",
        path_, version, kSchemaVersion));
  }
  if (version == 0) {
    Stmt q(db_,
           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
           "ORDER BY name LIMIT 1");
    int rc = q.Step();
    if (rc == SQLITE_ROW) {
      return Status::Corruption(fmt::format(
          "{}: not a protocol database (schema version 0, but it holds other tables, e.g. '{}')",
          path_, q.Text(0)));
    }
    if (rc != SQLITE_DONE) return Err(rc, path_);
    return Status::Ok();
  }
  Stmt q(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'");
  int rc = q.Step();
  if (rc != SQLITE_ROW) return Err(rc, path_);
  if (q.Int(0) == 0) {
    return Status::Corruption(fmt::format(
        "{}: not a protocol database (schema version {}, but no 'runs' table)", path_, version));
  }
  return Status::Ok();
}

Status SqliteStore::Init() {
  int fn = sqlite3_create_function_v2(db_, "protocol_valid_utf8", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                      nullptr, SqlValidUtf8, nullptr, nullptr, nullptr);
  if (fn != SQLITE_OK) return Err(fn, path_ + ": registering protocol_valid_utf8");
  // Read the header first: this is where a non-SQLite file shows up
  // ("file is not a database"), before any pragma could write to it. One read
  // transaction, so the version and the tables come from the same snapshot
  // even while another process is migrating the file.
  {
    Txn read(db_, path_);
    if (Status s = read.Begin(path_, "BEGIN"); !s.ok()) return s;
    auto version = QueryInt(db_, "PRAGMA user_version", path_);
    if (!version.ok()) return version.status();
    if (Status s = CheckOwnership(*version); !s.ok()) return s;
    if (Status s = read.Commit(path_); !s.ok()) return s;
  }

  if (!InMemory()) {
    // Switching to WAL needs an exclusive lock, and sqlite returns SQLITE_BUSY
    // for it at once, without calling the busy handler, while another
    // connection opens the same fresh file; so retry here up to the timeout.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
    std::string mode;
    while (true) {
      Stmt q(db_, "PRAGMA journal_mode=WAL");
      int rc = q.Step();
      if (rc == SQLITE_ROW) {
        mode = q.Text(0);
        break;
      }
      if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline)
        return Err(rc, path_ + ": setting journal_mode=WAL");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (mode != "wal")
      spdlog::warn("{}: journal_mode is '{}', not 'wal'; concurrent writers will wait longer",
                   path_, mode);
  }
  if (Status s = ExecSql(db_, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
                         path_ + ": setting pragmas");
      !s.ok())
    return s;
  return Migrate();
}

Status SqliteStore::Migrate() {
  auto current = QueryInt(db_, "PRAGMA user_version", path_);
  if (!current.ok()) return current.status();
  for (int step = static_cast<int>(*current); step < kSchemaVersion; ++step) {
    std::string doing = fmt::format("{}: migrating to schema version {}", path_, step + 1);
    Txn txn(db_, path_);
    if (Status s = txn.Begin(doing); !s.ok()) return s;
    // Read again under the write lock: another process may have migrated meanwhile.
    auto version = QueryInt(db_, "PRAGMA user_version", doing);
    if (!version.ok()) return version.status();
    if (*version > step) continue;  // rolls back the empty transaction
    if (Status s = CheckOwnership(*version); !s.ok()) return s;
    if (Status s = ExecSql(db_, kMigrations[step], doing); !s.ok()) return s;
    std::string set_version = fmt::format("PRAGMA user_version = {}", step + 1);
    if (Status s = ExecSql(db_, set_version.c_str(), doing); !s.ok()) return s;
    if (Status s = txn.Commit(doing); !s.ok()) return s;
  }
  return Status::Ok();
}

Status SqliteStore::RunExists(int64_t run_id, const std::string& doing) {
  Stmt q(db_, "SELECT 1 FROM runs WHERE id = ?");
  q.Bind(run_id);
  int rc = q.Step();
  if (rc == SQLITE_ROW) return Status::Ok();
  if (rc == SQLITE_DONE) return Status::NotFound(fmt::format("run {} does not exist", run_id));
  return Err(rc, doing);
}

Result<std::string> SqliteStore::CaseLabel(int64_t row_id) {
  Stmt q(db_, "SELECT case_id, repeat FROM cases WHERE id = ?");
  q.Bind(row_id);
  int rc = q.Step();
  if (rc == SQLITE_DONE)
    return Status::NotFound(fmt::format("case row {} does not exist", row_id));
  if (rc != SQLITE_ROW) return Err(rc, fmt::format("looking up case row {}", row_id));
  if (q.Int(1) == 0) return "case " + q.Text(0);
  return fmt::format("case {} repeat {}", q.Text(0), q.Int(1));
}

Result<int64_t> SqliteStore::CreateRun(const RunRecord& run) {
  const std::string doing = fmt::format("creating run of plan '{}'", run.plan_name);
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  Stmt q(db_,
         "INSERT INTO runs (kind, plan_name, plan_title, plan_file, plan_text, plan_sha256, "
         "source, started_at, finished_at, status, protocol_version, git_revision) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.Bind(run.kind).Bind(run.plan_name).Bind(run.plan_title).Bind(run.plan_file)
      .Bind(run.plan_text).Bind(run.plan_sha256).Bind(run.source).Bind(run.started_at)
      .Bind(run.finished_at).Bind(run.status).Bind(run.protocol_version).Bind(run.git_revision);
  if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  int64_t id = sqlite3_last_insert_rowid(db_);
  if (Status s = txn.Commit(doing); !s.ok()) return s;
  return id;
}

Status SqliteStore::FinishRun(int64_t run_id, const std::string& status,
                              const std::string& finished_at) {
  const std::string doing = fmt::format("finishing run {}", run_id);
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  Stmt q(db_, "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?");
  q.Bind(status).Bind(finished_at).Bind(run_id);
  if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  if (sqlite3_changes(db_) == 0)
    return Status::NotFound(fmt::format("run {} does not exist", run_id));
  return txn.Commit(doing);
}

Status SqliteStore::PutContext(int64_t run_id,
                               const std::vector<std::pair<std::string, std::string>>& facts) {
  const std::string doing = fmt::format("storing context of run {}", run_id);
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  if (Status s = RunExists(run_id, doing); !s.ok()) return s;
  Stmt next(db_, "SELECT COALESCE(MAX(seq) + 1, 0) FROM run_context WHERE run_id = ?");
  next.Bind(run_id);
  int rc = next.Step();
  if (rc != SQLITE_ROW) return Err(rc, doing);
  int64_t seq = next.Int(0);
  Stmt q(db_, "INSERT INTO run_context (run_id, seq, key, value) VALUES (?, ?, ?, ?)");
  for (const auto& [key, value] : facts) {
    q.Reset();
    q.Bind(run_id).Bind(seq++).Bind(key).Bind(value);
    if (int rc2 = q.Exec(); rc2 != SQLITE_DONE) return Err(rc2, doing);
  }
  return txn.Commit(doing);
}

Result<int64_t> SqliteStore::BeginCase(const CaseRecord& r) {
  const std::string doing = fmt::format("starting case {}", r.case_id);
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  if (Status s = RunExists(r.run_id, doing); !s.ok()) return s;
  Stmt q(db_,
         "INSERT INTO cases (run_id, case_id, repeat, stage, model, workload, backend, system, "
         "nodes, topology, network, variant, length_unit, length_count, report_as_unit, "
         "report_as_count, status, reason, exit_code, started_at, finished_at, log_path) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.Bind(r.run_id).Bind(r.case_id).Bind(r.repeat).Bind(r.stage).Bind(r.model).Bind(r.workload)
      .Bind(r.backend).Bind(r.system).Bind(r.nodes).Bind(r.topology).Bind(r.network)
      .Bind(r.variant).Bind(r.length_unit).Bind(r.length_count).Bind(r.report_as_unit)
      .Bind(r.report_as_count).Bind(CaseStatusName(CaseStatus::kRunning)).Bind(r.reason)
      .Bind(r.exit_code).Bind(r.started_at).Bind(r.finished_at).Bind(r.log_path);
  if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  int64_t row = sqlite3_last_insert_rowid(db_);
  if (Status s = txn.Commit(doing); !s.ok()) return s;
  return row;
}

Status SqliteStore::InsertSamples(int64_t row_id, const std::vector<StepSample>& steps,
                                  const std::vector<RequestSample>& requests,
                                  const std::string& doing) {
  Stmt q(db_,
         "INSERT INTO step_samples (case_row, step, seconds, loss, tokens) "
         "VALUES (?, ?, ?, ?, ?)");
  for (const StepSample& s : steps) {
    q.Reset();
    q.Bind(row_id).Bind(s.step).Bind(s.seconds).Bind(s.loss).Bind(s.tokens);
    if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  }
  Stmt rq(db_,
          "INSERT INTO request_samples (case_row, idx, max_new_tokens, prompt_tokens, "
          "generated_tokens, seconds, answer, token_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  for (const RequestSample& r : requests) {
    rq.Reset();
    std::optional<std::string> ids;
    if (r.token_ids) ids = TokenIdsText(*r.token_ids);
    rq.Bind(row_id).Bind(r.index).Bind(r.max_new_tokens).Bind(r.prompt_tokens)
        .Bind(r.generated_tokens).Bind(r.seconds).Bind(r.answer).Bind(ids);
    if (int rc = rq.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  }
  return Status::Ok();
}

Status SqliteStore::AppendSteps(int64_t row_id, const std::vector<StepSample>& steps) {
  auto label = CaseLabel(row_id);
  if (!label.ok()) return label.status();
  const std::string doing = "appending steps of " + *label;
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  if (Status s = InsertSamples(row_id, steps, {}, doing); !s.ok()) return s;
  return txn.Commit(doing);
}

Status SqliteStore::AppendRequests(int64_t row_id, const std::vector<RequestSample>& requests) {
  auto label = CaseLabel(row_id);
  if (!label.ok()) return label.status();
  const std::string doing = "appending requests of " + *label;
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  if (Status s = InsertSamples(row_id, {}, requests, doing); !s.ok()) return s;
  return txn.Commit(doing);
}

Status SqliteStore::AppendTelemetry(int64_t row_id, const std::vector<TelemetrySample>& samples) {
  auto label = CaseLabel(row_id);
  if (!label.ok()) return label.status();
  const std::string doing = "appending hardware samples of " + *label;
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  if (Status s = InsertTelemetry(row_id, samples, doing); !s.ok()) return s;
  return txn.Commit(doing);
}

Status SqliteStore::InsertTelemetry(int64_t row_id, const std::vector<TelemetrySample>& samples,
                                    const std::string& doing) {
  Stmt q(db_,
         "INSERT INTO telemetry_samples (case_row, seconds, node, device, quantity, value) "
         "VALUES (?, ?, ?, ?, ?, ?)");
  for (const TelemetrySample& t : samples) {
    q.Reset();
    q.Bind(row_id).Bind(t.seconds).Bind(t.node).Bind(t.device).Bind(t.quantity).Bind(t.value);
    if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  }
  return Status::Ok();
}

Status SqliteStore::FinishCase(int64_t row_id, const CaseResult& result) {
  auto label = CaseLabel(row_id);
  if (!label.ok()) return label.status();
  const std::string doing = "storing " + *label;
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  Stmt q(db_, "UPDATE cases SET status = ?, reason = ?, exit_code = ?, finished_at = ?, "
              "log_sha256 = ? WHERE id = ?");
  q.Bind(CaseStatusName(result.status)).Bind(result.reason).Bind(result.exit_code)
      .Bind(result.finished_at).Bind(result.log_sha256).Bind(row_id);
  if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  Stmt mq(db_,
          "INSERT INTO measurements (case_row, name, value, unit, how, method, source, marker, "
          "length_unit, length_count, rank) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const Measurement& m : result.measurements) {
    mq.Reset();
    const auto [name, rank] = SplitRankFigureName(m.name);  // a rank's own figure: its rank apart
    mq.Bind(row_id).Bind(name).Bind(m.value).Bind(m.unit).Bind(ProvenanceName(m.how))
        .Bind(m.method).Bind(m.source).Bind(m.marker).Bind(m.length_unit).Bind(m.length_count)
        .Bind(rank);
    if (int rc = mq.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  }
  Stmt fq(db_, "INSERT INTO case_facts (case_row, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : result.facts) {
    fq.Reset();
    fq.Bind(row_id).Bind(key).Bind(value);
    if (int rc = fq.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  }
  if (Status s = InsertSamples(row_id, result.steps, result.requests, doing); !s.ok()) return s;
  Stmt eq(db_,
          "INSERT INTO eval_points (case_row, step, tokens, training_seconds, loss) VALUES (?, ?, ?, ?, ?)");
  for (const EvalPoint& p : result.eval_curve) {
    eq.Reset();
    eq.Bind(row_id).Bind(p.step).Bind(p.tokens).Bind(p.training_seconds).Bind(p.loss);
    if (int rc = eq.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  }
  if (Status s = InsertTelemetry(row_id, result.samples, doing); !s.ok()) return s;
  return txn.Commit(doing);
}

Result<int> SqliteStore::InterruptRunningCases(int64_t run_id, const std::string& reason) {
  const std::string doing = fmt::format("interrupting running cases of run {}", run_id);
  Txn txn(db_, path_);
  if (Status s = txn.Begin(doing); !s.ok()) return s;
  Stmt q(db_, "UPDATE cases SET status = ?, reason = ? WHERE run_id = ? AND status = ?");
  q.Bind(CaseStatusName(CaseStatus::kInterrupted)).Bind(reason).Bind(run_id)
      .Bind(CaseStatusName(CaseStatus::kRunning));
  if (int rc = q.Exec(); rc != SQLITE_DONE) return Err(rc, doing);
  int changed = sqlite3_changes(db_);
  if (Status s = txn.Commit(doing); !s.ok()) return s;
  return changed;
}

// ---- reading ----

constexpr const char* kRunColumns =
    "SELECT id, kind, plan_name, plan_title, plan_file, plan_text, plan_sha256, source, "
    "started_at, finished_at, status, protocol_version, git_revision FROM runs ";

// A stored status or provenance this build does not know is corruption.
Result<CaseStatus> ParseStatusColumn(const std::string& status, int64_t row_id) {
  auto parsed = ParseCaseStatus(status);
  if (!parsed) return Status::Corruption(fmt::format("case row {} has unknown status '{}'", row_id, status));
  return *parsed;
}
Result<Provenance> ParseHowColumn(const std::string& how, const std::string& name, int64_t row_id) {
  auto parsed = ParseProvenance(how);
  if (!parsed)
    return Status::Corruption(
        fmt::format("measurement '{}' of case row {} has unknown provenance '{}'", name, row_id, how));
  return *parsed;
}

RunRecord ReadRun(const Stmt& q) {
  RunRecord r;
  int c = 0;
  r.id = q.Int(c++);
  r.kind = q.Text(c++);
  r.plan_name = q.Text(c++);
  r.plan_title = q.Text(c++);
  r.plan_file = q.Text(c++);
  r.plan_text = q.Text(c++);
  r.plan_sha256 = q.Text(c++);
  r.source = q.Text(c++);
  r.started_at = q.Text(c++);
  r.finished_at = q.Text(c++);
  r.status = q.Text(c++);
  r.protocol_version = q.Text(c++);
  r.git_revision = q.Text(c++);
  return r;
}

// A case's identity and outcome (FindCases), the first columns CasesOfRun reads.
constexpr const char* kCaseKeyColumns =
    "c.id, c.run_id, c.case_id, c.repeat, c.model, c.workload, c.system, c.nodes, c.network, c.variant, "
    "c.length_unit, c.length_count, c.report_as_unit, c.report_as_count, c.status";
constexpr int kCaseKeyColumnCount = 15;

Status ReadCaseKey(const Stmt& q, CaseRecord* r) {
  int c = 0;
  r->row_id = q.Int(c++);
  r->run_id = q.Int(c++);
  r->case_id = q.Text(c++);
  r->repeat = static_cast<int>(q.Int(c++));
  r->model = q.Text(c++);
  r->workload = q.Text(c++);
  r->system = q.Text(c++);
  r->nodes = static_cast<int>(q.Int(c++));
  r->network = q.Text(c++);
  r->variant = q.Text(c++);
  r->length_unit = q.Text(c++);
  r->length_count = q.Int(c++);
  r->report_as_unit = q.Text(c++);
  r->report_as_count = q.Int(c++);
  auto status = ParseStatusColumn(q.Text(c++), r->row_id);
  if (!status.ok()) return status.status();
  r->status = *status;
  return Status::Ok();
}

// The same columns, plan_text read as '' (ListRunHeaders).
constexpr const char* kRunHeaderColumns =
    "SELECT id, kind, plan_name, plan_title, plan_file, '', plan_sha256, source, "
    "started_at, finished_at, status, protocol_version, git_revision FROM runs ";

// Every run of `sql` (kRunColumns or kRunHeaderColumns and its order).
Result<std::vector<RunRecord>> ReadRuns(sqlite3* db, const std::string& sql) {
  Stmt q(db, sql.c_str());
  std::vector<RunRecord> runs;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) runs.push_back(ReadRun(q));
  if (rc != SQLITE_DONE) return SqlError(db, rc, "listing runs");
  return runs;
}

Result<std::vector<RunRecord>> SqliteStore::ListRuns() {
  return ReadRuns(db_, std::string(kRunColumns) + "ORDER BY id");
}

Result<std::vector<RunRecord>> SqliteStore::ListRunHeaders() {
  return ReadRuns(db_, std::string(kRunHeaderColumns) + "ORDER BY id");
}

// The WHERE conditions on table `cases` (alias c) of a CaseQuery; Bind()
// binds their parameters in the same order.
struct CaseFilter {
  explicit CaseFilter(const CaseQuery& query) : q(query) {}
  std::string Sql() const {
    std::string sql = "1";
    if (!q.run_ids.empty()) sql += " AND c.run_id IN (SELECT value FROM json_each(?))";
    if (q.through_run > 0) sql += " AND c.run_id <= ?";
    if (!q.model.empty()) sql += " AND c.model = ?";
    if (q.ok_only) sql += " AND c.status = 'ok'";
    return sql;
  }
  void Bind(Stmt& stmt) const {
    if (!q.run_ids.empty()) {
      std::vector<std::string> ids;
      for (int64_t id : q.run_ids) ids.push_back(std::to_string(id));
      stmt.Bind("[" + Join(ids, ",") + "]");
    }
    if (q.through_run > 0) stmt.Bind(q.through_run);
    if (!q.model.empty()) stmt.Bind(q.model);
  }
  const CaseQuery& q;
};

Result<std::vector<CaseRecord>> SqliteStore::FindCases(const CaseQuery& query) {
  CaseFilter filter(query);
  std::string sql = std::string("SELECT ") + kCaseKeyColumns + " FROM cases c WHERE " + filter.Sql() +
                    " ORDER BY c.run_id, c.id";
  Stmt q(db_, sql.c_str());
  filter.Bind(q);
  std::vector<CaseRecord> cases;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    CaseRecord r;
    if (Status s = ReadCaseKey(q, &r); !s.ok()) return s;
    cases.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return Err(rc, "finding cases");
  return cases;
}

Result<std::vector<std::pair<int64_t, Measurement>>> SqliteStore::FindMeasurements(
    const CaseQuery& query, const std::vector<std::string>& names) {
  const std::string doing = "finding measurements";
  CaseFilter filter(query);
  std::string sql =
      "SELECT m.case_row, " + std::string(kMeasurementName) +
      ", m.value, m.unit, m.how, m.marker, m.length_unit, m.length_count FROM cases c "
      "JOIN measurements m ON m.case_row = c.id WHERE " +
      filter.Sql() + " AND " + kMeasurementName + " IN (SELECT value FROM json_each(?)) ORDER BY m.case_row, m.id";
  Stmt q(db_, sql.c_str());
  filter.Bind(q);
  q.Bind(Json(names).dump());
  std::vector<std::pair<int64_t, Measurement>> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    Measurement m;
    m.name = q.Text(1);
    if (!q.IsNull(2)) m.value = q.Double(2);
    m.unit = q.Text(3);
    auto how = ParseHowColumn(q.Text(4), m.name, q.Int(0));
    if (!how.ok()) return how.status();
    m.how = *how;
    m.marker = q.Text(5);
    m.length_unit = q.Text(6);
    m.length_count = q.Int(7);
    out.emplace_back(q.Int(0), std::move(m));
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

Result<RunRecord> SqliteStore::GetRun(int64_t run_id) {
  const std::string doing = fmt::format("reading run {}", run_id);
  std::string sql = std::string(kRunColumns) + "WHERE id = ?";
  Stmt q(db_, sql.c_str());
  q.Bind(run_id);
  int rc = q.Step();
  if (rc == SQLITE_ROW) return ReadRun(q);
  if (rc == SQLITE_DONE) return Status::NotFound(fmt::format("run {} does not exist", run_id));
  return Err(rc, doing);
}

Result<std::vector<std::pair<std::string, std::string>>> SqliteStore::GetContext(
    int64_t run_id) {
  const std::string doing = fmt::format("reading context of run {}", run_id);
  Stmt q(db_, "SELECT key, value FROM run_context WHERE run_id = ? ORDER BY seq");
  q.Bind(run_id);
  std::vector<std::pair<std::string, std::string>> facts;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) facts.emplace_back(q.Text(0), q.Text(1));
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return facts;
}

Result<std::vector<CaseRecord>> SqliteStore::CasesOfRun(int64_t run_id) {
  const std::string doing = fmt::format("reading cases of run {}", run_id);
  std::string sql = std::string("SELECT ") + kCaseKeyColumns +
                    ", c.stage, c.backend, c.topology, c.reason, c.exit_code, c.started_at, c.finished_at, "
                    "c.log_path, c.log_sha256 FROM cases c WHERE c.run_id = ? ORDER BY c.id";
  Stmt q(db_, sql.c_str());
  q.Bind(run_id);
  std::vector<CaseRecord> cases;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    CaseRecord r;
    if (Status s = ReadCaseKey(q, &r); !s.ok()) return s;
    int c = kCaseKeyColumnCount;
    r.stage = q.Text(c++);
    r.backend = q.Text(c++);
    r.topology = q.Text(c++);
    r.reason = q.Text(c++);
    if (!q.IsNull(c)) r.exit_code = static_cast<int>(q.Int(c));
    ++c;
    r.started_at = q.Text(c++);
    r.finished_at = q.Text(c++);
    r.log_path = q.Text(c++);
    r.log_sha256 = q.Text(c++);
    cases.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return cases;
}

Result<std::vector<Measurement>> SqliteStore::MeasurementsOfCase(int64_t row_id) {
  const std::string doing = fmt::format("reading measurements of case row {}", row_id);
  Stmt q(db_,
         "SELECT name, value, unit, how, method, source, marker, length_unit, length_count, rank "
         "FROM measurements WHERE case_row = ? ORDER BY id");
  q.Bind(row_id);
  std::vector<Measurement> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    Measurement m;
    m.name = q.Text(0);
    if (!q.IsNull(1)) m.value = q.Double(1);
    m.unit = q.Text(2);
    auto how = ParseHowColumn(q.Text(3), m.name, row_id);
    if (!how.ok()) return how.status();
    m.how = *how;
    m.method = q.Text(4);
    m.source = q.Text(5);
    m.marker = q.Text(6);
    m.length_unit = q.Text(7);
    m.length_count = q.Int(8);
    if (!q.IsNull(9)) m.name = RankFigureName(m.name, static_cast<int>(q.Int(9)));
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> SqliteStore::FactsOfCase(int64_t row_id) {
  const std::string doing = fmt::format("reading facts of case row {}", row_id);
  Stmt q(db_, "SELECT key, value FROM case_facts WHERE case_row = ? ORDER BY id");
  q.Bind(row_id);
  std::vector<std::pair<std::string, std::string>> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.emplace_back(q.Text(0), q.Text(1));
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

Result<std::vector<StepSample>> SqliteStore::StepsOfCase(int64_t row_id) {
  const std::string doing = fmt::format("reading steps of case row {}", row_id);
  Stmt q(db_,
         "SELECT step, seconds, loss, tokens FROM step_samples WHERE case_row = ? ORDER BY id");
  q.Bind(row_id);
  std::vector<StepSample> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    StepSample s;
    s.step = q.Int(0);
    s.seconds = q.Double(1);
    if (!q.IsNull(2)) s.loss = q.Double(2);
    if (!q.IsNull(3)) s.tokens = q.Int(3);
    out.push_back(s);
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

Result<std::vector<EvalPoint>> SqliteStore::EvalCurveOfCase(int64_t row_id) {
  const std::string doing = fmt::format("reading the held-out curve of case row {}", row_id);
  Stmt q(db_,
         "SELECT step, tokens, training_seconds, loss FROM eval_points WHERE case_row = ? ORDER BY step, id");
  q.Bind(row_id);
  std::vector<EvalPoint> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    EvalPoint p;
    p.step = q.Int(0);
    p.tokens = q.Int(1);
    p.training_seconds = q.Double(2);
    p.loss = q.Double(3);
    out.push_back(p);
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

Result<std::vector<TelemetrySample>> SqliteStore::TelemetryOfCase(int64_t row_id) {
  const std::string doing = fmt::format("reading the hardware samples of case row {}", row_id);
  Stmt q(db_,
         "SELECT seconds, node, device, quantity, value FROM telemetry_samples WHERE case_row = ? "
         "ORDER BY id");
  q.Bind(row_id);
  std::vector<TelemetrySample> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    TelemetrySample t;
    t.seconds = q.Double(0);
    t.node = q.Text(1);
    t.device = q.Text(2);
    t.quantity = q.Text(3);
    t.value = q.Double(4);
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

Result<std::vector<RequestSample>> SqliteStore::RequestsOfCase(int64_t row_id) {
  const std::string doing = fmt::format("reading requests of case row {}", row_id);
  Stmt q(db_,
         "SELECT idx, max_new_tokens, prompt_tokens, generated_tokens, seconds, answer, token_ids "
         "FROM request_samples WHERE case_row = ? ORDER BY id");
  q.Bind(row_id);
  std::vector<RequestSample> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    RequestSample r;
    r.index = static_cast<int>(q.Int(0));
    r.max_new_tokens = static_cast<int>(q.Int(1));
    r.prompt_tokens = static_cast<int>(q.Int(2));
    r.generated_tokens = static_cast<int>(q.Int(3));
    r.seconds = q.Double(4);
    r.answer = q.Text(5);
    if (!q.IsNull(6)) {
      r.token_ids = ParseTokenIds(q.Text(6));
      if (!r.token_ids)
        return Status::Corruption(fmt::format("request {} of case row {} has token_ids that are not a JSON "
                                              "array of integers: '{}'",
                                              r.index, row_id, q.Text(6).substr(0, 40)));
    }
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return Err(rc, doing);
  return out;
}

}  // namespace

// ---- 4. entry points -----------------------------------------------------------

Result<std::unique_ptr<Store>> OpenStore(const std::string& path) {
  const bool in_memory = path.empty() || path == ":memory:";
  if (!in_memory) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      if (ec)
        return Status::IoError(fmt::format("{}: cannot create directory '{}': {}", path,
                                           parent.string(), ec.message()));
    }
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(in_memory ? ":memory:" : path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqlError(db, rc, fmt::format("{}: cannot open database", path));
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  auto store = std::make_unique<SqliteStore>(db, in_memory ? ":memory:" : path);
  if (Status s = store->Init(); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

int StoreSchemaVersion() { return kSchemaVersion; }

Result<bool> CheckStoreIntegrity(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::NotFound(fmt::format("{}: no such database file", path));
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqlError(db, rc, fmt::format("{}: cannot open database", path));
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  bool ok = true;
  int rows = 0;
  {
    Stmt q(db, "PRAGMA integrity_check");
    while ((rc = q.Step()) == SQLITE_ROW) {
      ++rows;
      std::string line = q.Text(0);
      if (line != "ok") {
        ok = false;
        spdlog::error("{}: integrity_check: {}", path, line);
      }
    }
  }
  Status s = rc == SQLITE_DONE ? Status::Ok() : SqlError(db, rc, path);
  sqlite3_close_v2(db);
  if (!s.ok()) return s;
  return ok && rows > 0;
}

}  // namespace protocol
