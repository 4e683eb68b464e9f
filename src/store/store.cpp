#include "kforge/store.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <random>

#include "kforge/error.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

[[noreturn]] void sql_fail(sqlite3* db, const std::string& what) {
  throw error("run store: " + what + ": " + (db ? sqlite3_errmsg(db) : "no database"));
}

struct statement {
  sqlite3_stmt* s = nullptr;
  sqlite3* db = nullptr;
  statement(sqlite3* d, const char* sql) : db(d) {
    if (sqlite3_prepare_v2(d, sql, -1, &s, nullptr) != SQLITE_OK) sql_fail(d, std::string("prepare ") + sql);
  }
  ~statement() { sqlite3_finalize(s); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  void bind(int i, double v) {
    if (std::isnan(v))
      sqlite3_bind_null(s, i);
    else
      sqlite3_bind_double(s, i, v);
  }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(s, i, v); }
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  double col_double(int i) const {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? std::numeric_limits<double>::quiet_NaN()
                                                    : sqlite3_column_double(s, i);
  }
  std::int64_t col_int(int i) const { return sqlite3_column_int64(s, i); }
  std::string col_text(int i) const {
    const auto* p = sqlite3_column_text(s, i);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
};

void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : "?";
    sqlite3_free(msg);
    throw error(std::string("run store: ") + sql + ": " + m);
  }
}

std::string indices_text(const config& c) {
  std::string s;
  for (std::size_t i = 0; i < c.size(); ++i)
    s += (i ? "," : "") + std::to_string(c[i]);
  return s;
}

// "3,0,12" -> {3, 0, 12}; nullopt when damaged.
std::optional<config> parse_indices(const std::string& s) {
  config c;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::uint32_t v = 0;
    const auto [end, ec] = std::from_chars(s.data() + i, s.data() + j, v);
    if (ec != std::errc() || end != s.data() + j) return std::nullopt;
    c.push_back(v);
    i = j + 1;
  }
  return c;
}

// A JSON text stored in the database; a damaged one is an error naming the file and the record.
json parse_stored(const std::string& text, const std::filesystem::path& file, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw error("'" + file.string() + "': " + what + " is damaged (not JSON: " + e.what() + ")");
  }
}

json nan_safe(double x) {
  return std::isnan(x) ? json(nullptr) : json(x);
}
}  // namespace

struct run_store::impl {
  std::filesystem::path dir;
  sqlite3* db = nullptr;
  std::filesystem::path private_copy;  // read_only of an unwritable folder with a WAL: removed at the end
  ~impl() {
    if (db) sqlite3_close(db);
    std::error_code ec;
    if (!private_copy.empty()) std::filesystem::remove_all(private_copy, ec);
  }
};

namespace {
// A file: URI for SQLite (characters other than unreserved ones and '/' percent-encoded).
std::string file_uri(const std::filesystem::path& p, const char* query) {
  static const char* hex = "0123456789ABCDEF";
  std::string uri = "file:";
  for (unsigned char c : std::filesystem::absolute(p).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    }
  }
  return uri + "?" + query;
}

bool writable_folder(const std::filesystem::path& dir) {
  return ::access(dir.c_str(), W_OK) == 0;
}

std::uintmax_t size_or_zero(const std::filesystem::path& p) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : n;
}

void create_schema(sqlite3* db) {
  // WAL + NORMAL: a committed transaction survives the process being killed (not a power cut).
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, "PRAGMA synchronous=NORMAL");
  exec(db,
       "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
       "CREATE TABLE IF NOT EXISTS trials ("
       " sequence INTEGER PRIMARY KEY, batch INTEGER NOT NULL, indices TEXT NOT NULL UNIQUE,"
       " status TEXT NOT NULL, time_ms REAL, time_iqr_ms REAL, time_min_ms REAL,"
       " times_ms TEXT, cost_compile REAL, cost_check REAL, cost_benchmark REAL, cost_profile REAL,"
       " cost_framework REAL, cost_strategy REAL, metrics TEXT, error TEXT, device TEXT, sm_clock_mhz REAL,"
       " clock_s REAL, committed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));");
}

// Opens `file` for reading without writing to its folder: mode=ro where the folder is writable (SQLite
// may create the shared-memory file there); else immutable=1, or, when a killed run left a write-ahead
// log, a private copy of the database and its log (immutable would ignore the log's trials).
sqlite3* open_for_reading(const std::filesystem::path& file, std::filesystem::path& private_copy) {
  const auto wal = std::filesystem::path(file.string() + "-wal");
  std::string uri;
  if (writable_folder(file.parent_path().empty() ? "." : file.parent_path())) {
    uri = file_uri(file, "mode=ro");
  } else if (size_or_zero(wal) == 0) {
    uri = file_uri(file, "immutable=1");
  } else {
    std::random_device rd;
    private_copy = std::filesystem::temp_directory_path() / ("kforge-read-" + std::to_string(rd()));
    std::error_code ec;
    std::filesystem::create_directory(private_copy, ec);
    if (!ec) std::filesystem::copy_file(file, private_copy / "run.sqlite", ec);
    if (!ec) std::filesystem::copy_file(wal, private_copy / "run.sqlite-wal", ec);
    if (ec)
      throw error("cannot read '" + file.string() +
                  "' (its folder is read-only and a copy failed: " + ec.message() + ")");
    uri = file_uri(private_copy / "run.sqlite", "mode=rw");
  }
  sqlite3* db = nullptr;
  const int flags = (uri.ends_with("mode=rw") ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) |
                    SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(uri.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw error("cannot open '" + file.string() + "': " + msg);
  }
  return db;
}

// A read-only store must be a kforge run store: both tables, readable.
void check_run_store(sqlite3* db, const std::filesystem::path& file) {
  sqlite3_stmt* st = nullptr;
  int found = -1;
  if (sqlite3_prepare_v2(
          db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name IN ('meta','trials')", -1, &st,
          nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    found = sqlite3_column_int(st, 0);
  const std::string msg = sqlite3_errmsg(db);
  sqlite3_finalize(st);
  if (found < 0) throw error("'" + file.string() + "' is not a readable run store: " + msg);
  if (found != 2)
    throw error("'" + file.string() + "' is not a kforge run store (it has no meta and trials tables)");
}
}  // namespace

run_store::run_store(const std::filesystem::path& dir, store_access access)
    : impl_(std::make_unique<impl>()) {
  impl_->dir = dir;
  const auto file = database_path();
  if (access == store_access::read_only) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec))
      throw error("no run in '" + dir.string() + "' (run.sqlite is missing)");
    if (size_or_zero(file) == 0)
      throw error("'" + file.string() + "' is empty: no run was ever stored there (the run never started)");
    impl_->db = open_for_reading(file, impl_->private_copy);
    sqlite3_busy_timeout(impl_->db, 5000);
    check_run_store(impl_->db, file);
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw error("cannot create run folder '" + dir.string() + "': " + ec.message());
  const auto path = file.string();
  if (sqlite3_open_v2(path.c_str(), &impl_->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK)
    sql_fail(impl_->db, "open " + path);
  sqlite3_busy_timeout(impl_->db, 5000);
  create_schema(impl_->db);
}

run_store::~run_store() = default;
run_store::run_store(run_store&&) noexcept = default;
run_store& run_store::operator=(run_store&&) noexcept = default;

const std::filesystem::path& run_store::dir() const noexcept {
  return impl_->dir;
}
std::filesystem::path run_store::database_path() const {
  return impl_->dir / "run.sqlite";
}

void run_store::set_meta(const std::string& key, const json& v) {
  statement st(
      impl_->db,
      "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value=excluded.value");
  st.bind(1, key);
  st.bind(2, v.dump());
  if (sqlite3_step(st.s) != SQLITE_DONE) sql_fail(impl_->db, "write meta " + key);
}

json run_store::meta(const std::string& key) const {
  statement st(impl_->db, "SELECT value FROM meta WHERE key=?1");
  st.bind(1, key);
  if (sqlite3_step(st.s) != SQLITE_ROW) return nullptr;
  return parse_stored(st.col_text(0), database_path(), "run record '" + key + "'");
}

bool run_store::has_meta(const std::string& key) const {
  return !meta(key).is_null();
}

void run_store::commit(const trial& t) {
  statement st(
      impl_->db,
      "INSERT INTO trials(sequence, batch, indices, status, time_ms, time_iqr_ms, time_min_ms,"
      " times_ms, cost_compile, cost_check, cost_benchmark, cost_profile, cost_framework, cost_strategy,"
      " metrics, error, device, sm_clock_mhz, clock_s)"
      " VALUES(?1,?2,?3,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20)");
  st.bind(1, static_cast<std::int64_t>(t.sequence));
  st.bind(2, static_cast<std::int64_t>(t.batch));
  st.bind(3, indices_text(t.cfg));
  st.bind(5, std::string(to_string(t.st)));
  st.bind(6, t.time_ms);
  st.bind(7, t.time_iqr_ms);
  st.bind(8, t.time_min_ms);
  st.bind(9, json(t.times_ms).dump());
  st.bind(10, t.cost.compile);
  st.bind(11, t.cost.check);
  st.bind(12, t.cost.benchmark);
  st.bind(13, t.cost.profile);
  st.bind(14, t.cost.framework);
  st.bind(15, t.cost.strategy);
  json m = json::object();
  for (const auto& [k, v] : t.metrics)
    m[k] = nan_safe(v);
  st.bind(16, m.dump());
  st.bind(17, t.error);
  st.bind(18, t.device);
  st.bind(19, t.sm_clock_mhz);
  st.bind(20, t.clock_s);
  // A single INSERT is its own transaction in autocommit mode.
  if (sqlite3_step(st.s) != SQLITE_DONE) sql_fail(impl_->db, "commit trial " + std::to_string(t.sequence));
}

void run_store::commit(std::span<const trial> group) {
  if (group.size() == 1) return commit(group.front());
  exec(impl_->db, "BEGIN IMMEDIATE");
  try {
    for (const auto& t : group)
      commit(t);
  } catch (...) {
    char* msg = nullptr;
    sqlite3_exec(impl_->db, "ROLLBACK", nullptr, nullptr, &msg);
    sqlite3_free(msg);
    throw;
  }
  exec(impl_->db, "COMMIT");
}

std::vector<trial> run_store::trials() const {
  statement st(
      impl_->db,
      "SELECT sequence, batch, indices, status, time_ms, time_iqr_ms, time_min_ms, times_ms, cost_compile,"
      " cost_check, cost_benchmark, cost_profile, cost_framework, cost_strategy, metrics, error, device,"
      " sm_clock_mhz, clock_s, committed_at FROM trials ORDER BY sequence");
  std::vector<trial> out;
  while (true) {
    const int rc = sqlite3_step(st.s);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) sql_fail(impl_->db, "read trials");
    trial t;
    t.sequence = static_cast<std::uint64_t>(st.col_int(0));
    t.batch = static_cast<std::uint32_t>(st.col_int(1));
    auto cfg = parse_indices(st.col_text(2));
    if (!cfg)
      throw error("'" + database_path().string() + "': trial " + std::to_string(t.sequence) +
                  " is damaged (configuration '" + excerpt(st.col_text(2), 80) + "')");
    t.cfg = std::move(*cfg);
    auto s = status_from_string(st.col_text(3));
    if (!s)
      throw error("run store: trial " + std::to_string(t.sequence) + " has unknown status '" +
                  st.col_text(3) + "'");
    t.st = *s;
    t.time_ms = st.col_double(4);
    t.time_iqr_ms = st.col_double(5);
    t.time_min_ms = st.col_double(6);
    const json times = parse_stored(st.col_text(7), database_path(), "trial " + std::to_string(t.sequence));
    for (const auto& x : times)
      t.times_ms.push_back(x.is_number() ? x.get<double>() : std::numeric_limits<double>::quiet_NaN());
    t.cost.compile = st.col_double(8);
    t.cost.check = st.col_double(9);
    t.cost.benchmark = st.col_double(10);
    t.cost.profile = st.col_double(11);
    t.cost.framework = st.col_double(12);
    t.cost.strategy = st.col_double(13);
    const json metrics =
        parse_stored(st.col_text(14), database_path(), "trial " + std::to_string(t.sequence));
    for (const auto& [k, v] : metrics.items())
      t.metrics[k] = v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
    t.error = st.col_text(15);
    t.device = st.col_text(16);
    t.sm_clock_mhz = st.col_double(17);
    t.clock_s = st.col_double(18);
    t.timestamp = st.col_text(19);
    out.push_back(std::move(t));
  }
  return out;
}

std::size_t run_store::trial_count() const {
  statement st(impl_->db, "SELECT COUNT(*) FROM trials");
  if (sqlite3_step(st.s) != SQLITE_ROW) sql_fail(impl_->db, "count trials");
  return static_cast<std::size_t>(st.col_int(0));
}

json describe_space(const search_space& space) {
  json params = json::array();
  for (const auto& p : space.params()) {
    json vals = json::array();
    for (const auto& v : p.values)
      vals.push_back(to_json(v));
    params.push_back({{"name", p.name}, {"type", std::string(to_string(p.type))}, {"values", vals}});
  }
  json constraints = json::array();
  for (const auto& c : space.constraint_sources())
    constraints.push_back(c);
  return {{"params", params}, {"constraints", constraints}};
}

search_space stored_space(const run_store& store) {
  const auto d = store.meta("space");
  if (!d.is_object())
    throw error("'" + store.database_path().string() +
                "' describes no search space (the run never started, or this is not a kforge run store)");
  try {
    return space_from_description(d);
  } catch (const std::exception& e) {
    throw error("'" + store.database_path().string() + "': the space record is damaged (" + e.what() + ")");
  }
}

search_space space_from_description(const json& d) {
  std::vector<param> params;
  for (const auto& p : d.at("params")) {
    const auto t = p.at("type").get<std::string>();
    param_type pt = t == "int"     ? param_type::integer
                    : t == "float" ? param_type::real
                    : t == "bool"  ? param_type::boolean
                                   : param_type::string;
    std::vector<value> vals;
    for (const auto& v : p.at("values"))
      vals.push_back(from_json(v));
    params.push_back(make_param(p.at("name").get<std::string>(), pt, std::move(vals)));
  }
  return search_space(std::move(params), {});
}

}  // namespace kf
