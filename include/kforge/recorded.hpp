// Recorded tuning spaces: brute-forced measurements in the field's formats, read for replay.
//
// Formats (detected from the content):
//   kernel_tuner  Kernel Tuner cache: {tune_params_keys, tune_params, cache: {key: record}}; times in ms;
//                 a failure is a string in "time" (or "__error__"): InvalidConfig,
//                 CompilationFailedConfig, RuntimeFailedConfig
//   t4            T4 output: {schema_version, metadata.timeunit, results: [{configuration, times,
//                 invalidity, measurements, ...}]}
//   ktt           KTT tuning output: {Metadata, Results: [{Configuration, Status, ComputationResults:
//                 [{Duration, ProfilingData.Counters, CompilationData}]}]}; counters become metrics
// Any of them may be gzip-compressed (.gz).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/space.hpp"
#include "kforge/trial.hpp"

namespace kf {

/// One recorded configuration, as a trial template (sequence and cfg are filled by the replayer).
struct recorded_record {
  std::map<std::string, value, std::less<>> params;  ///< parameter name -> value, as recorded
  trial result;  ///< status, time (median of the recorded runs), spread, cost (s), metrics, error
};

struct recorded_file {
  std::string path;
  std::string format;  ///< "kernel_tuner", "t4" or "ktt"
  std::string device_name;
  std::string kernel_name;
  nlohmann::json problem_size;           ///< as recorded (Kernel Tuner caches); null when absent
  std::vector<std::string> param_names;  ///< in the recorded order
  std::map<std::string, std::vector<value>>
      param_values;  ///< declared values (KT tune_params) or observed ones
  std::vector<recorded_record> records;
};

/// Reads and normalises a recorded file. Throws kf::error naming the file and the offending record.
recorded_file read_recorded(const std::string& path);

/// read_recorded, once per process and path while someone holds the result.
std::shared_ptr<const recorded_file> load_recorded_cached(const std::string& path);

/// A search space whose parameters are the recorded ones (declared value lists where the file has them,
/// else the sorted distinct recorded values) and whose valid set is exactly the recorded configurations.
search_space recorded_space(const recorded_file& f);

/// The records bound to `space`: configuration -> record index. Records whose values the space lacks are
/// counted in `unmatched` (and not bound); a configuration recorded twice keeps the first record.
struct bound_records {
  std::vector<std::pair<config, std::size_t>> entries;  ///< sorted by configuration
  std::size_t unmatched = 0;
  std::string first_unmatched;  ///< description of the first unmatched record
  std::size_t duplicates = 0;
  /// Index of the record of `c`, or -1.
  long find(const config& c) const;
};
bound_records bind_records(const recorded_file& f, const search_space& space);

}  // namespace kf
