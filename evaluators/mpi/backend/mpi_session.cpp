// The MPI side of a distributed run: the only file that sees MPI (Open MPI's C API). It provides the
// channel (non-blocking point-to-point messages on a duplicate of MPI_COMM_WORLD whose errors return
// instead of aborting the job) and the session (MPI_Init ... MPI_Finalize or MPI_Abort).
//
// Why the C API and not Boost.MPI: no further dependency (Boost.MPI is a separate compiled library and
// Debian package); the calls needed here are the non-blocking ones (MPI_Improbe, MPI_Imrecv, MPI_Isend,
// MPI_Test) plus MPI_Abort, all plain C; and error handling stays in our hands (MPI_ERRORS_RETURN on the
// communicator, each return code checked), where Boost.MPI throws from inside its wrappers.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <list>
#include <ostream>
#include <set>
#include <string>
#include <thread>

#include "evaluators/mpi/channel.hpp"
#include "evaluators/mpi/coordinator.hpp"
#include "evaluators/mpi/serve.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/mpi.hpp"
#include "kforge/experiment.hpp"

namespace kf::mpi {

namespace {
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int n = 0;
  MPI_Error_string(rc, text, &n);
  return std::string(text, static_cast<std::size_t>(n));
}

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw error(std::string(call) + " failed: " + mpi_error(rc));
}

// Messages as strings of MPI_CHAR, tagged by kind. Sends are MPI_Isend; their buffers live in a list
// until MPI_Test says they are done, and a send to a dead or hung rank simply never completes (it is
// never waited for). Receives are MPI_Improbe + MPI_Imrecv: only a message that has arrived is received.
class mpi_channel final : public channel {
 public:
  explicit mpi_channel(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(int dest, tag kind, std::string body) override {
    reap();
    auto& p = sends_.emplace_back();
    p.body = std::move(body);
    const int rc = MPI_Isend(p.body.data(), static_cast<int>(p.body.size()), MPI_CHAR, dest,
                             static_cast<int>(kind), comm_, &p.request);
    if (rc != MPI_SUCCESS) sends_.pop_back();  // the peer is unreachable: the message is lost (contract)
  }

  std::optional<message> poll() override {
    reap();
    int flag = 0;
    MPI_Message handle;
    MPI_Status st;
    check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &handle, &st), "MPI_Improbe");
    if (!flag) return std::nullopt;
    int n = 0;
    check(MPI_Get_count(&st, MPI_CHAR, &n), "MPI_Get_count");
    auto& buf = receives_.emplace_back(static_cast<std::size_t>(n), '\0');
    MPI_Request req;
    check(MPI_Imrecv(buf.data(), n, MPI_CHAR, &handle, &req), "MPI_Imrecv");
    // The message has arrived (probed); only a sender that dies in the middle of a large message leaves
    // the receive unfinished, and then its buffer stays in receives_ for MPI to write into.
    const auto t0 = clock_type::now();
    int done = 0;
    while (true) {
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done || seconds_since(t0) > 30) break;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (!done) return std::nullopt;
    message m{st.MPI_SOURCE, static_cast<tag>(st.MPI_TAG), std::move(buf)};
    receives_.pop_back();
    if (st.MPI_TAG < static_cast<int>(tag::start) || st.MPI_TAG > static_cast<int>(tag::end)) return poll();
    return m;
  }

  /// Waits up to `seconds` for the sends in flight to complete; returns whether all did.
  bool drain(double seconds) {
    const auto t0 = clock_type::now();
    while (reap(), !sends_.empty() && seconds_since(t0) < seconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return sends_.empty();
  }

 private:
  struct pending_send {
    std::string body;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void reap() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      const int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (done || rc != MPI_SUCCESS)
        it = sends_.erase(it);
      else
        ++it;
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::list<pending_send> sends_;    // std::list: buffers keep their addresses
  std::list<std::string> receives_;  // likewise
};
}  // namespace

bool available() noexcept {
  return true;
}

struct session::impl {
  options opt;
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<mpi_channel> ch;
  std::set<int> lost;  // ranks that cannot take part in MPI_Finalize
  int exit_status = 0;
  bool worker_finalize = false;  // ranks > 0: rank 0's end message said so

  // Rank 0: every rank is told to stop; those that do not say goodbye within the rank timeout are lost.
  void stop_ranks() {
    for (int r = 1; r < ch->size(); ++r)
      ch->send(r, tag::stop, "{}");
    std::set<int> waiting;
    for (int r = 1; r < ch->size(); ++r)
      if (!lost.count(r)) waiting.insert(r);
    const auto t0 = clock_type::now();
    while (!waiting.empty() && seconds_since(t0) < opt.rank_timeout_s) {
      auto m = ch->poll();
      if (!m) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (m->kind == tag::bye) waiting.erase(m->source);
    }
    lost.insert(waiting.begin(), waiting.end());
  }

  // How the job ends. MPI_Finalize needs every rank: when none was lost, rank 0 tells the others to
  // finalise and all do. When one was lost it cannot take part, and:
  //   plain mpirun (the default): a dead rank already ended the job, so the lost rank is alive but silent
  //     (hung, or its host unreachable); rank 0 ends the job with MPI_Abort and its exit status, and the
  //     launcher kills every process, the hung one too.
  //   mpirun --enable-recovery: the job survives a dead rank, but MPI_Abort does not end it and
  //     MPI_Finalize can wait for the dead rank for ever; every live rank leaves without finalising, which
  //     such a job accepts. (A rank alive but silent then keeps mpirun waiting: see docs/distributed.md.)
  void end(bool rank0, int status) {
    const char* recovery = std::getenv("OMPI_MCA_orte_enable_recovery");
    const bool recovering = recovery && std::string(recovery) == "1";
    bool finalize = worker_finalize;
    if (rank0) {
      stop_ranks();
      finalize = lost.empty();
      if (!finalize && !recovering) {
        abort_job(status);
        return;
      }
      const std::string end = nlohmann::json{{"finalize", finalize}}.dump();
      for (int r = 1; r < ch->size(); ++r)
        ch->send(r, tag::end, end);
    }
    ch->drain(finalize ? 10.0 : 1.0);
    if (finalize) {
      MPI_Comm_free(&comm);
      MPI_Finalize();
    } else if (rank0 && opt.log) {
      *opt.log << "kforge: leaving without MPI_Finalize (mpirun --enable-recovery): rank(s) " << lost_list()
               << " lost; the run store is complete" << std::endl;
    }
  }

  void abort_job(int status) {
    if (opt.log)
      *opt.log << "kforge: ending the job with MPI_Abort (exit status " << status << "): rank(s) "
               << lost_list() << " lost, so MPI_Finalize cannot complete; the run store is complete"
               << std::endl;
    MPI_Abort(MPI_COMM_WORLD, status);
  }

  std::string lost_list() const {
    std::string out;
    for (int r : lost)
      out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
  }
};

session::session(options o) : impl_(std::make_unique<impl>()) {
  impl_->opt = o;
  // Our messages are small and few: Open MPI's shared-memory transport needs no single-copy mechanism
  // (CMA fails in containers without ptrace rights), and the fork+exec of GPU worker processes is safe.
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  ::setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  impl_->ch = std::make_unique<mpi_channel>(impl_->comm);
  // A launcher's binding holds the whole rank: Open MPI's mpirun binds each process to a core when it
  // starts two, to a socket beyond, and a rank's compile pool and GPU worker processes (which inherit it)
  // then share those cores. Measured against the launcher's own cores (mpirun, orted or slurmstepd: the
  // parent), not the host's, which a container's cpuset may narrow already. Said once per evaluating
  // rank; the run goes on.
  cpu_set_t mine, launcher;
  CPU_ZERO(&mine);
  CPU_ZERO(&launcher);
  if ((rank() > 0 || o.rank0_evaluates) && o.log && sched_getaffinity(0, sizeof mine, &mine) == 0 &&
      sched_getaffinity(getppid(), sizeof launcher, &launcher) == 0 &&
      CPU_COUNT(&mine) < CPU_COUNT(&launcher)) {
    // One write: the launcher merges the ranks' output, and a line written piecewise interleaves.
    *o.log << ("kforge: rank " + std::to_string(rank()) + " (" + host_name() + "): the launcher bound it to " +
               std::to_string(CPU_COUNT(&mine)) + " of the " + std::to_string(CPU_COUNT(&launcher)) +
               " cores it has itself, and the rank's compile pool and GPU worker processes share them: start "
               "mpirun with --bind-to none (docs/distributed.md)\n")
           << std::flush;
  }
}

session::~session() {
  try {
    impl_->end(rank() == 0, std::uncaught_exceptions() > 0 ? 1 : impl_->exit_status);
  } catch (const std::exception& e) {
    if (impl_->opt.log) *impl_->opt.log << "kforge: ending MPI: " << e.what() << std::endl;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int session::rank() const {
  return impl_->ch->rank();
}

int session::size() const {
  return impl_->ch->size();
}

int session::serve(const experiment_spec& spec) {
  serve_options o;
  o.log = impl_->opt.log;
  o.finalize = &impl_->worker_finalize;
  return kf::mpi::serve(*impl_->ch, spec, o);
}

std::function<evaluator(const evaluator_context&)> session::evaluator_factory(const experiment_spec& spec) {
  return [this, fingerprint = experiment_fingerprint(spec),
          configured = spec.evaluator](const evaluator_context& ctx) -> evaluator {
    coordinator_options co;
    co.rank_timeout_s = impl_->opt.rank_timeout_s;
    co.heartbeat_s = std::min(1.0, impl_->opt.rank_timeout_s / 5);
    co.allow_mixed_devices = impl_->opt.allow_mixed_devices;
    co.fingerprint = fingerprint;
    co.run_dir = ctx.run_dir;
    co.log = impl_->opt.log;
    co.lost = &impl_->lost;
    std::function<std::optional<evaluator>()> local;
    if (impl_->opt.rank0_evaluates)
      local = [&]() -> std::optional<evaluator> { return evaluator_registry().create(configured, ctx); };
    return evaluator(std::make_unique<coordinator>(*impl_->ch, co, local));
  };
}

void session::set_exit_status(int status) {
  impl_->exit_status = status;
}

}  // namespace kf::mpi
