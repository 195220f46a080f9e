// bm_service_load's solo phase (one collaboration alone, against dcalign::align in process) and
// the report.
#include "load_common.hpp"

namespace dcalign::bench_service_load {

template <typename F>
bool run_parallel(int n, int threads, F&& body) {
  std::atomic<int> next{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> ts;
  for (int t = 0; t < std::min(threads, n); ++t)
    ts.emplace_back([&] {
      for (int i; (i = next++) < n;)
        if (!body(i)) ok = false;
    });
  for (auto& t : ts) t.join();
  return ok;
}

SoloRun run_solo(const Options& o, ServerProcess& server, Recorder& rec, const fs::path& work,
                 int rep, dcalign::Backend& backend) {
  const bool with_data = trains(o);
  SoloRun r;
  const int P = o.participants, port = server.port();
  const std::uint64_t key = static_cast<std::uint64_t>(o.collaborations + rep);
  std::vector<Matrix<double>> anchors, datas, labels;
  for (int p = 0; p < P; ++p) {
    anchors.push_back(release_matrix(o, key, static_cast<std::uint64_t>(p), o.anchor_rows, 1));
    if (with_data) {
      datas.push_back(release_matrix(o, key, static_cast<std::uint64_t>(p), o.data_rows, 2));
      labels.push_back(labels_for(o, key, static_cast<std::uint64_t>(p), datas.back()));
    }
  }
  Recorder solo_rec;  // the solo runs' RPCs are not mixed into the load's latencies
  dcalign::service::Client analyst(client_options(o, port, kAnalystToken));
  const auto t0 = SteadyClock::now();
  const auto since = [&] { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); };
  v1::CreateCollaborationResponse created;
  if (!timed(solo_rec, "CreateCollaboration",
             [&] { created = analyst.create(spec_for(o, "solo-" + std::to_string(rep), P)); })) {
    r.error = solo_rec.error_samples.empty() ? "create failed" : solo_rec.error_samples[0];
    return r;
  }
  const std::string id = created.collaboration_id();
  r.create = since();
  const bool up_ok = run_parallel(P, o.threads, [&](int p) {
    return upload_release(o, port, solo_rec, id, created.tokens(p).token(),
                          anchors[static_cast<std::size_t>(p)],
                          with_data ? &datas[static_cast<std::size_t>(p)] : nullptr,
                          with_data ? &labels[static_cast<std::size_t>(p)] : nullptr);
  });
  r.uploads = since() - r.create;
  if (!up_ok) {
    r.error = "upload failed: " + solo_rec.error_samples.at(0);
    return r;
  }
  v1::GetStatusResponse st;
  for (;;) {
    if (over_time()) {
      r.error = "time limit";
      return r;
    }
    if (!timed(solo_rec, "GetStatus", [&] { st = analyst.status(id); })) {
      r.error = "status failed: " + solo_rec.error_samples.at(0);
      return r;
    }
    if (st.job_state() == "done" || st.job_state() == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(o.e2e_poll_ms));
  }
  r.wait_done = since() - r.create - r.uploads;
  if (st.job_state() != "done") {
    r.error = "job failed: " + st.job_error();
    return r;
  }
  const bool fetch_ok = run_parallel(P, o.threads, [&](int p) {
    return fetch_result(o, port, solo_rec, id, created.tokens(p).token(),
                        work / "solo" / std::to_string(rep) / ("p" + std::to_string(p)));
  });
  r.total = since();
  r.fetches = r.total - r.create - r.uploads - r.wait_done;
  if (!fetch_ok) {
    r.error = "fetch failed: " + solo_rec.error_samples.at(0);
    return r;
  }
  r.align_report_seconds = report_total_seconds(st.job_report());
  const auto jobs = job_times_from_log(server.log_path());
  if (const auto it = jobs.find(id); it != jobs.end())
    r.job_seconds = it->second.done - it->second.started;

  // The same alignment in this process: from the matrices in memory to G.
  const auto a0 = SteadyClock::now();
  const auto stack = dcalign::Stack<double>::from_matrices(anchors);
  const auto result = dcalign::align(stack, align_options_for(o), backend);
  r.in_process_align = std::chrono::duration<double>(SteadyClock::now() - a0).count();
  r.in_process_align_report = result.report.total_seconds;
#ifdef DCALIGN_BENCH_WITH_LEARN
  // The same fit of h in this process (src/service/train.cpp: stacked X~_i G_i, the spec's
  // seed, standardised targets in regression); its training score is not computed.
  if (with_data) {
    const auto t0_train = SteadyClock::now();
    index_t rows = 0;
    for (const auto& m : datas) rows += m.rows();
    const index_t l = o.dim;
    Matrix<double> all(rows, l);
    std::vector<double> y;
    y.reserve(static_cast<std::size_t>(rows));
    index_t at = 0;
    for (int p = 0; p < P; ++p) {
      const auto i = static_cast<std::size_t>(p);
      const Matrix<double> XG = dcalign::apply_change_of_basis(datas[i], result.G.matrix(p));
      for (index_t c = 0; c < l; ++c)
        for (index_t row = 0; row < XG.rows(); ++row) all(at + row, c) = XG(row, c);
      at += XG.rows();
      y.insert(y.end(), labels[i].data(), labels[i].data() + labels[i].rows());
    }
    dcalign::learn::ModelOptions mo;
    mo.seed = o.seed;
    mo.standardize_target = o.num_classes == 0;
    auto model = dcalign::learn::make_model(o.model, mo);
    model->fit(all, y, o.num_classes);
    r.in_process_train = std::chrono::duration<double>(SteadyClock::now() - t0_train).count();
  }
#endif
  r.in_process = std::chrono::duration<double>(SteadyClock::now() - a0).count();
  r.ok = true;
  for (const auto& [kind, v] : solo_rec.latency)
    for (double x : v) rec.add("solo " + kind, x);
  return r;
}

std::string fmt(double v, int digits) {
  if (std::isnan(v)) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

double num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

std::string markdown(json r) {  // a copy: operator[] may add nulls
  std::ostringstream md;
  const json& p = r["parameters"];
  const json& load = r["load"];
  md << "Load: " << p["collaborations"] << " collaborations x " << p["participants"]
     << " participants, anchors " << p["anchor_rows"] << " x " << p["dim"] << " float64";
  if (p.value("model", std::string("none")) != "none")
    md << " + X~_i " << p["data_rows"] << " x " << p["dim"] << " + labels " << p["data_rows"]
       << " x 1, model " << p["model"].get<std::string>() << " (num_classes " << p["num_classes"]
       << ")";
  else
    md << ", alignment only";
  md << ", " << p["threads"] << " client threads; " << r["machine"]["cpu_model"].get<std::string>()
     << ", " << r["machine"]["logical_cpus"] << " logical CPUs (client and server share them).\n\n";
  md << "| measure | value |\n|---|---|\n";
  if (load.is_object()) {
    const json& u = load["uploads"];
    md << "| uploads (releases) | " << u["ok"] << " of " << u["expected"] << ", "
       << fmt(num(u, "bytes") / 1e6, 1) << " MB in " << fmt(num(u, "window_seconds")) << " s |\n";
    md << "| uploads per second | " << fmt(num(u, "releases_per_second"), 1) << " ("
       << fmt(num(u, "bytes_per_second") / 1e6, 1) << " MB/s) |\n";
    const json& jb = load["jobs"];
    md << "| jobs done | " << jb["done"] << " of " << jb["expected"] << " |\n";
    md << "| alignment throughput after the last upload | "
       << fmt(num(jb, "jobs_per_second_after_last_upload"), 1) << " jobs/s ("
       << jb["done_after_last_upload"] << " jobs in "
       << fmt(num(jb, "last_upload_to_last_done_seconds"), 3) << " s) |\n";
    md << "| alignment throughput, first start to last done | "
       << fmt(num(jb, "jobs_per_second_overall"), 1) << " jobs/s |\n";
    md << "| job worker, jobs per busy second | " << fmt(num(jb, "jobs_per_busy_second"), 1)
       << " (job p50 " << fmt(num(jb["job_seconds"], "p50") * 1e3, 1) << " ms, of which align() "
       << fmt(num(jb["align_report_total_seconds"], "p50") * 1e3, 1) << " ms, the rest "
       << fmt(num(jb["job_beyond_align_seconds"], "p50") * 1e3, 1) << " ms) |\n";
    md << "| server CPU time during the load | " << fmt(num(load, "server_cpu_seconds")) << " s in "
       << fmt(num(load, "load_phase_seconds")) << " s |\n";
    md << "| collaboration create -> all fetched, under load | p50 "
       << fmt(num(load["collaboration_e2e_seconds"], "p50")) << " s, max "
       << fmt(num(load["collaboration_e2e_seconds"], "max")) << " s |\n";
  }
  md << "| server peak RSS (VmHWM) | " << fmt(num(r["server"], "peak_rss_bytes") / 1048576.0, 1)
     << " MiB |\n";
  const json& e = r["e2e"];
  if (e.is_object() && e.contains("service_median_seconds")) {
    md << "| one collaboration alone, service (median of " << e["repetitions_ok"] << ") | "
       << fmt(num(e, "service_median_seconds") * 1e3, 1) << " ms |\n";
    md << "| same work in process (" << e.value("in_process_work", std::string("?"))
       << ", median) | " << fmt(num(e, "in_process_median_seconds") * 1e3, 1) << " ms |\n";
    md << "| service / in process | " << fmt(num(e, "ratio"), 1)
       << "x (against align() alone: " << fmt(num(e, "ratio_vs_align_report"), 1) << "x) |\n";
  }
  md << "\n| RPC | count | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n";
  for (const auto& [kind, s] : r["latency_seconds"].items())
    md << "| " << kind << " | " << s["count"] << " | " << fmt(num(s, "p50") * 1e3) << " | "
       << fmt(num(s, "p99") * 1e3) << " | " << fmt(num(s, "max") * 1e3) << " |\n";
  if (e.is_object() && e.contains("phase_medians_seconds")) {
    const json& ph = e["phase_medians_seconds"];
    md << "\nOne collaboration alone, medians (ms): create " << fmt(num(ph, "create") * 1e3, 1)
       << ", uploads " << fmt(num(ph, "uploads") * 1e3, 1) << ", last upload -> done seen "
       << fmt(num(ph, "wait_done") * 1e3, 1) << " (server job "
       << fmt(num(ph, "server_job") * 1e3, 1) << ", its align() "
       << fmt(num(ph, "server_align_report") * 1e3, 1) << "), fetches "
       << fmt(num(ph, "fetches") * 1e3, 1) << "; in process align() "
       << fmt(num(ph, "in_process_align_report") * 1e3, 1) << " (with the stacking "
       << fmt(num(ph, "in_process_align") * 1e3, 1) << "), fit of h "
       << fmt(num(ph, "in_process_train") * 1e3, 1) << ".\n";
  }
  md << "\nLoad average (1, 5, 15 min) at the start: "
     << r["machine"].value("loadavg_at_start", std::string("?"))
     << "; at the end: " << r["machine"].value("loadavg_at_end", std::string("?")) << "\n";
  md << "\nStatus: " << r["status"].get<std::string>() << "\n";
  return md.str();
}

}  // namespace dcalign::bench_service_load
