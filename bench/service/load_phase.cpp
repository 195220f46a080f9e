// bm_service_load's load phase: many collaborations created, uploaded, run and fetched at once.
#include "load_common.hpp"

namespace dcalign::bench_service_load {

struct Collab {
  std::string id;
  std::vector<std::string> tokens;
  bool created = false;
  double create_start = 0, create_end = 0;  // now_s()
  std::atomic<int> uploads_ok{0}, uploads_failed{0}, fetches_ok{0}, fetches_failed{0};
  double last_upload_end = 0;
  double done_seen = 0, last_fetch_end = 0;
  std::string job_state;  // done, failed, or empty while pending
  double align_seconds = std::nan("");
  std::mutex mu;
};

struct FetchTask {
  int collab, participant;
};

struct LoadResult {
  json j;
  int uploads_ok = 0;
};

json run_load(const Options& o, ServerProcess& server, Recorder& rec, const fs::path& work,
              long long* peak_rss_sampled) {
  const bool with_data = trains(o);
  const int N = o.collaborations, P = o.participants;
  const int port = server.port();
  std::vector<std::unique_ptr<Collab>> cs;
  for (int k = 0; k < N; ++k) cs.push_back(std::make_unique<Collab>());

  // The releases, generated before anything is timed.
  std::cerr << "generating " << N * P << " anchors of " << o.anchor_rows << " x " << o.dim
            << (with_data ? ", data parts and labels" : "") << "\n";
  const double gen0 = now_s();
  std::vector<Matrix<double>> anchors(static_cast<std::size_t>(N * P));
  std::vector<Matrix<double>> datas(with_data ? static_cast<std::size_t>(N * P) : 0);
  std::vector<Matrix<double>> labels(with_data ? static_cast<std::size_t>(N * P) : 0);
  {
    std::atomic<int> next{0};
    std::vector<std::thread> ts;
    const int gen_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int t = 0; t < gen_threads; ++t)
      ts.emplace_back([&] {
        for (int u; (u = next++) < N * P;) {
          anchors[static_cast<std::size_t>(u)] =
              release_matrix(o, static_cast<std::uint64_t>(u / P),
                             static_cast<std::uint64_t>(u % P), o.anchor_rows, 1);
          if (with_data) {
            datas[static_cast<std::size_t>(u)] =
                release_matrix(o, static_cast<std::uint64_t>(u / P),
                               static_cast<std::uint64_t>(u % P), o.data_rows, 2);
            labels[static_cast<std::size_t>(u)] =
                labels_for(o, static_cast<std::uint64_t>(u / P), static_cast<std::uint64_t>(u % P),
                           datas[static_cast<std::size_t>(u)]);
          }
        }
      });
    for (auto& t : ts) t.join();
  }
  const double gen_seconds = now_s() - gen0;

  // 1. The analyst creates every collaboration (the threads share the work).
  std::cerr << "creating " << N << " collaborations\n";
  const double create0 = now_s();
  {
    std::atomic<int> next{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < std::min(o.threads, N); ++t)
      ts.emplace_back([&] {
        dcalign::service::Client analyst(client_options(o, port, kAnalystToken));
        for (int k; !over_time() && (k = next++) < N;) {
          Collab& c = *cs[static_cast<std::size_t>(k)];
          v1::CreateCollaborationResponse r;
          c.create_start = now_s();
          if (!timed(rec, "CreateCollaboration",
                     [&] { r = analyst.create(spec_for(o, "load-" + std::to_string(k), P)); }))
            continue;
          c.create_end = now_s();
          c.id = r.collaboration_id();
          for (const auto& tk : r.tokens()) c.tokens.push_back(tk.token());
          c.created = static_cast<int>(c.tokens.size()) == P;
        }
      });
    for (auto& t : ts) t.join();
  }
  const double create1 = now_s();

  // 2. Uploads, status polls and fetches, concurrently.
  std::cerr << "uploading " << N * P << " releases with " << o.threads << " threads\n";
  std::mutex qmu;
  std::condition_variable qcv;
  std::deque<FetchTask> fetches;
  std::atomic<int> next_upload{0}, resolved{0};
  std::mutex time_mu;
  double first_up = -1, last_up = 0, last_fetch = 0, first_done_seen = -1, last_done_seen = 0;
  long long upload_bytes = 0;
  for (auto& c : cs)
    if (!c->created) ++resolved;

  const auto worker = [&] {
    for (;;) {
      if (over_time()) return;
      std::optional<FetchTask> f;
      {
        std::lock_guard<std::mutex> lock(qmu);
        if (!fetches.empty()) {
          f = fetches.front();
          fetches.pop_front();
        }
      }
      if (f) {
        Collab& c = *cs[static_cast<std::size_t>(f->collab)];
        const fs::path dest =
            work / "fetched" / std::to_string(f->collab) / ("p" + std::to_string(f->participant));
        const bool ok = fetch_result(o, port, rec, c.id,
                                     c.tokens[static_cast<std::size_t>(f->participant)], dest);
        const double t = now_s();
        (ok ? c.fetches_ok : c.fetches_failed)++;
        std::lock_guard<std::mutex> lock(c.mu);
        c.last_fetch_end = std::max(c.last_fetch_end, t);
        std::lock_guard<std::mutex> tl(time_mu);
        last_fetch = std::max(last_fetch, t);
        continue;
      }
      const int u = next_upload++;
      if (u < N * P) {
        Collab& c = *cs[static_cast<std::size_t>(u / P)];
        if (!c.created) continue;
        const double t0 = now_s();
        {
          std::lock_guard<std::mutex> tl(time_mu);
          if (first_up < 0) first_up = t0;
        }
        const bool ok =
            upload_release(o, port, rec, c.id, c.tokens[static_cast<std::size_t>(u % P)],
                           anchors[static_cast<std::size_t>(u)],
                           with_data ? &datas[static_cast<std::size_t>(u)] : nullptr,
                           with_data ? &labels[static_cast<std::size_t>(u)] : nullptr);
        const double t1 = now_s();
        if (ok) {
          std::lock_guard<std::mutex> tl(time_mu);
          last_up = std::max(last_up, t1);
          upload_bytes += static_cast<long long>(anchors[static_cast<std::size_t>(u)].size() * 8);
          if (with_data)
            upload_bytes += static_cast<long long>((datas[static_cast<std::size_t>(u)].size() +
                                                    labels[static_cast<std::size_t>(u)].size()) *
                                                   8);
        }
        {
          std::lock_guard<std::mutex> lock(c.mu);
          c.last_upload_end = std::max(c.last_upload_end, t1);
        }
        (ok ? c.uploads_ok : c.uploads_failed)++;
        continue;
      }
      // No upload left: wait for fetches until every collaboration is resolved and fetched.
      std::unique_lock<std::mutex> lock(qmu);
      if (resolved == N && fetches.empty()) {
        bool all_fetched = true;
        for (auto& c : cs)
          if (c->job_state == "done" && c->fetches_ok + c->fetches_failed < P) all_fetched = false;
        if (all_fetched) return;
      }
      qcv.wait_for(lock, std::chrono::milliseconds(5));
    }
  };

  // The analyst: polls the collaborations whose uploads are all in.
  long long rss_max = 0;
  const auto poller = [&] {
    dcalign::service::Client analyst(client_options(o, port, kAnalystToken));
    while (!over_time() && resolved < N) {
      for (int k = 0; k < N && !g_abort; ++k) {
        Collab& c = *cs[static_cast<std::size_t>(k)];
        if (!c.created || !c.job_state.empty()) continue;
        if (c.uploads_failed > 0) {
          std::lock_guard<std::mutex> lock(qmu);
          c.job_state = "upload failed";
          ++resolved;
          continue;
        }
        if (c.uploads_ok < P) continue;
        v1::GetStatusResponse st;
        if (!timed(rec, "GetStatus", [&] { st = analyst.status(c.id); })) continue;
        if (st.job_state() == "done" || st.job_state() == "failed") {
          const double t = now_s();
          c.done_seen = t;
          if (first_done_seen < 0) first_done_seen = t;
          last_done_seen = std::max(last_done_seen, t);
          c.align_seconds = report_total_seconds(st.job_report());
          {
            std::lock_guard<std::mutex> lock(qmu);
            c.job_state = st.job_state();
            if (st.job_state() == "done")
              for (int p = 0; p < P; ++p) fetches.push_back({k, p});
            else
              rec.error("job", c.id + ": " + st.job_error());
            ++resolved;
          }
          qcv.notify_all();
        }
      }
      rss_max = std::max(rss_max, server.status_bytes("VmRSS"));
      std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
    }
  };

  const double load0 = now_s();
  std::thread poll_thread(poller);
  std::vector<std::thread> ts;
  for (int t = 0; t < o.threads; ++t) ts.emplace_back(worker);
  for (auto& t : ts) t.join();
  poll_thread.join();
  const double load1 = now_s();
  *peak_rss_sampled = rss_max;

  // The server's own job times (its log, epoch seconds) against ours (now_s()).
  const double epoch_minus_now = epoch_s() - now_s();
  const auto jobs = job_times_from_log(server.log_path());
  std::vector<double> job_seconds, align_seconds, beyond_align, e2e, upload_to_done,
      done_to_fetched;
  double first_started = 1e300, last_done = -1e300;
  int done = 0, done_after_last_upload = 0, uploads_ok = 0, fetches_ok = 0;
  for (auto& c : cs) {
    uploads_ok += c->uploads_ok;
    fetches_ok += c->fetches_ok;
    if (c->job_state != "done") continue;
    ++done;
    if (!std::isnan(c->align_seconds)) align_seconds.push_back(c->align_seconds);
    const auto it = jobs.find(c->id);
    double done_at = c->done_seen;  // now_s()
    if (it != jobs.end() && !std::isnan(it->second.done) && !std::isnan(it->second.started)) {
      job_seconds.push_back(it->second.done - it->second.started);
      if (!std::isnan(c->align_seconds))
        beyond_align.push_back(it->second.done - it->second.started - c->align_seconds);
      first_started = std::min(first_started, it->second.started - epoch_minus_now);
      done_at = it->second.done - epoch_minus_now;
    }
    last_done = std::max(last_done, done_at);
    if (done_at > last_up) ++done_after_last_upload;
    upload_to_done.push_back(done_at - c->last_upload_end);
    if (c->fetches_ok == P) {
      e2e.push_back(c->last_fetch_end - c->create_start);
      done_to_fetched.push_back(c->last_fetch_end - done_at);
    }
  }
  double job_busy = 0;
  for (double s : job_seconds) job_busy += s;
  const double upload_window = last_up - first_up;
  const double tail = last_done - last_up;
  json j;
  j["generate_seconds"] = gen_seconds;
  j["create_phase_seconds"] = create1 - create0;
  j["load_phase_seconds"] = load1 - load0;
  j["collaborations_created"] =
      std::count_if(cs.begin(), cs.end(), [](auto& c) { return c->created; });
  j["uploads"] = {
      {"ok", uploads_ok},
      {"expected", N * P},
      {"parts_per_release", with_data ? 3 : 1},
      {"bytes", upload_bytes},
      {"window_seconds", upload_window},
      {"releases_per_second", upload_window > 0 ? uploads_ok / upload_window : std::nan("")},
      {"bytes_per_second",
       upload_window > 0 ? static_cast<double>(upload_bytes) / upload_window : std::nan("")}};
  j["jobs"] = {
      {"done", done},
      {"expected", N},
      {"from_server_log", job_seconds.size()},
      {"done_after_last_upload", done_after_last_upload},
      {"last_upload_to_last_done_seconds", tail},
      {"jobs_per_second_after_last_upload",
       tail > 0 ? done_after_last_upload / tail : std::nan("")},
      {"first_start_to_last_done_seconds", last_done - first_started},
      {"jobs_per_second_overall",
       last_done > first_started ? job_seconds.size() / (last_done - first_started) : std::nan("")},
      {"jobs_per_busy_second", job_busy > 0 ? job_seconds.size() / job_busy : std::nan("")},
      {"job_seconds", summary(job_seconds)},
      {"align_report_total_seconds", summary(align_seconds)},
      {"job_beyond_align_seconds", summary(beyond_align)},
      {"job_beyond_align",
       "job_started -> job_done of the server's log less the alignment "
       "report's seconds.total: reading the parts, X~_i G_i, the fit of h, "
       "its save and score, writing and publishing the results"},
      {"last_upload_to_done_seconds", summary(upload_to_done)}};
  j["fetches"] = {{"ok", fetches_ok}, {"expected", N * P}};
  j["collaboration_e2e_seconds"] = summary(e2e);
  j["done_to_all_fetched_seconds"] = summary(done_to_fetched);
  j["first_done_seen"] = first_done_seen;
  j["last_done_seen"] = last_done_seen;
  return j;
}

}  // namespace dcalign::bench_service_load
