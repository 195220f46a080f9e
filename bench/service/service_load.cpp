// bm_service_load: dcalign-server under the load of many collaborations (bench/README.md,
// "Service load"). Not a test: it measures.
//
// The server runs as a child process on 127.0.0.1 (--insecure-localhost, a fresh data directory,
// --device cpu). Then, with --threads client threads:
//   0. with --quiet-load, it first waits (at most --quiet-wait seconds, polling every 20 s) until
//      the 1-minute load average of /proc/loadavg is below it; the JSON records the wait and the
//      load averages at the start and the end;
//   1. the analyst creates --collaborations collaborations of --participants participants each
//      (ODC, l = --dim, a = --anchor-rows, spec.model = --model, spec.num_classes =
//      --num-classes);
//   2. every participant uploads its anchor A_i (a x l float64) and, when the spec has a model,
//      its data X~_i (--data-rows x l) and labels (--data-rows x 1) - collaboration after
//      collaboration, the threads taking the next participant as they finish one - while the
//      analyst polls GetStatus of every collaboration whose uploads are in, and as soon as a job
//      is done (aligned, and h fitted on the stacked X~_i G_i) its participants fetch their G_i
//      and model/ (fetches go before further uploads);
//   3. --e2e-repetitions times, one collaboration alone on the idle server, create -> uploads ->
//      job done -> all fetches, each followed by the same work in this process: dcalign::align
//      (Stack<double>, the server's AlignOptions: ODC, the spec's seed) and, built with the
//      learning layer, X~_i G_i stacked and learn::make_model(model, {seed, standardize_target =
//      regression})->fit, as the server's job does (src/service/train.cpp);
//   4. the server's peak RSS (VmHWM of /proc/<pid>/status) is read, then SIGTERM.
// Labels: regression (--num-classes 0), y = X~_i w + 0.1 e with w and e from the seed;
// classification, class indices 0..K-1 drawn uniformly from the seed.
//
// Output: a Markdown table on stdout, everything in --out (JSON, schema
// dcalign-service-load/1). Progress on stderr. Exit status 0; 1 when some RPC failed or the
// --max-seconds limit stopped the run (the JSON then says so and holds what was measured); 2 for
// usage errors.
#include "load_common.hpp"

using namespace dcalign::bench_service_load;

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bm_service_load: dcalign-server under the load of many collaborations"};
  app.add_option("--cpu-workers", o.cpu_workers,
                 "the server's job workers on the CPU (0: the server's default)")
      ->check(CLI::Range(0, 64));
  app.add_option("--distributed-ranks", o.distributed_ranks,
                 "spec.distributed.ranks: every job over MPI with this many ranks (0: in the "
                 "server's process)")
      ->check(CLI::Range(0, 64));
  app.add_option("--collaborations", o.collaborations, "collaborations created by the analyst")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--participants", o.participants, "participants per collaboration")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--anchor-rows", o.anchor_rows, "a, the anchor's rows")
      ->check(CLI::Range(1LL, 1000000LL))
      ->capture_default_str();
  app.add_option("--dim", o.dim, "l, the dimension of every release")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--data-rows", o.data_rows, "rows of X~_i and its labels (with a model)")
      ->check(CLI::Range(1LL, 100000000LL))
      ->capture_default_str();
  app.add_option("--model", o.model,
                 "spec.model: none (alignment only) or a learning-layer model the server takes "
                 "(linear, logreg, mlp; knn, svm and forest keep training rows and are refused); "
                 "with one, X~_i and labels are uploaded too")
      ->capture_default_str();
  app.add_option("--num-classes", o.num_classes, "spec.num_classes: 0 regression, K >= 2 classes")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--quiet-load", o.quiet_load,
                 "first wait until the 1-minute load average is below this (0: do not wait)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  app.add_option("--quiet-wait", o.quiet_wait, "seconds to wait for --quiet-load at most")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "concurrent client threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--e2e-repetitions", o.e2e_repetitions,
                 "single-collaboration runs, each with the in-process alignment")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--max-seconds", o.max_seconds, "the whole run's limit; then it stops cleanly")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--rpc-deadline", o.rpc_deadline, "seconds, every RPC's deadline")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--chunk-bytes", o.chunk_bytes, "upload chunk (also the server's limit)")
      ->check(CLI::Range(1024LL, 64LL << 20))
      ->capture_default_str();
  app.add_option("--poll-ms", o.poll_ms, "the analyst's GetStatus sweep interval under load")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--e2e-poll-ms", o.e2e_poll_ms, "GetStatus interval of the single runs")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--max-memory-mb", o.max_memory_mb, "bound on the releases held in memory")
      ->check(CLI::Range(1LL, 1LL << 20))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "releases and the alignment's seed")->capture_default_str();
  app.add_option("--server-binary,--server", o.server,
                 "the dcalign-server binary (built with the learning layer to train)")
      ->capture_default_str();
  app.add_option("--work-dir", o.work_dir,
                 "where the temporary data directory goes (default: TMPDIR)");
  app.add_option("--out", o.out, "the JSON results");
  app.add_option("--markdown", o.markdown, "also write the table here");
  app.add_flag("--keep", o.keep, "keep the data directory and the server's log");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.anchor_rows < o.dim) {
    std::cerr << "bm_service_load: --anchor-rows must be at least --dim\n";
    return 2;
  }
  const double release_bytes =
      static_cast<double>(o.anchor_rows) * o.dim * 8.0 +
      (trains(o) ? static_cast<double>(o.data_rows) * (o.dim + 1) * 8.0 : 0.0);
  const double held = release_bytes * o.collaborations * o.participants;
  if (held > static_cast<double>(o.max_memory_mb) * 1048576.0) {
    std::cerr << "bm_service_load: the releases need " << held / 1048576.0
              << " MiB in memory, over --max-memory-mb " << o.max_memory_mb << "\n";
    return 2;
  }
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

  // A quiet machine first: the 1-minute load average below --quiet-load (polled every 20 s).
  json quiet = {{"threshold", o.quiet_load}, {"max_wait_seconds", o.quiet_wait}};
  if (o.quiet_load > 0) {
    const auto w0 = SteadyClock::now();
    const auto waited = [&] {
      return std::chrono::duration<double>(SteadyClock::now() - w0).count();
    };
    std::vector<std::string> samples;
    for (;;) {
      std::string load = read_text("/proc/loadavg");
      while (!load.empty() && load.back() == '\n') load.pop_back();
      const double one = std::atof(load.c_str());
      samples.push_back(load);
      if (one < o.quiet_load) {
        quiet["reached"] = true;
        break;
      }
      if (waited() + 20 > o.quiet_wait) {
        quiet["reached"] = false;
        std::cerr << "bm_service_load: the load average stayed at or above " << o.quiet_load
                  << " for " << waited() << " s; measuring anyway (the JSON says so)\n";
        break;
      }
      std::cerr << "waiting for a quiet machine: load " << load << "\n";
      std::this_thread::sleep_for(std::chrono::seconds(20));
    }
    quiet["waited_seconds"] = waited();
    quiet["samples"] = samples;
  }

  g_start = SteadyClock::now();
  g_deadline = g_start + std::chrono::duration_cast<SteadyClock::duration>(
                             std::chrono::duration<double>(o.max_seconds));
  const double started_epoch = epoch_s();
  json r;
  r["schema"] = "dcalign-service-load/1";
  r["command"] = command;
  r["started_epoch"] = started_epoch;
  r["parameters"] = {
      {"cpu_workers", o.cpu_workers},
      {"distributed_ranks", o.distributed_ranks},
      {"collaborations", o.collaborations},
      {"participants", o.participants},
      {"anchor_rows", o.anchor_rows},
      {"dim", o.dim},
      {"data_rows", o.data_rows},
      {"model", o.model},
      {"num_classes", o.num_classes},
      {"labels", trains(o) ? (o.num_classes == 0 ? "X~_i w + 0.1 e, w and e N(0, 1) from the seed"
                                                 : "class indices uniform on 0..K-1 from the seed")
                           : "none"},
      {"threads", o.threads},
      {"e2e_repetitions", o.e2e_repetitions},
      {"max_seconds", o.max_seconds},
      {"rpc_deadline", o.rpc_deadline},
      {"chunk_bytes", o.chunk_bytes},
      {"poll_ms", o.poll_ms},
      {"e2e_poll_ms", o.e2e_poll_ms},
      {"seed", o.seed},
      {"method", "odc"},
      {"releases", "i.i.d. N(0, 1) float64, generated before the timing"}};
  r["machine"] = machine_info();
  r["quiet_wait"] = quiet;
  r["versions"] = {{"dcalign", DCALIGN_VERSION},
                   {"build_type", DCALIGN_BUILD_TYPE},
                   {"grpc", grpc::Version()},
                   {"blas", nlohmann::json::object()}};
  r["status"] = "running";

  fs::path work = o.work_dir.empty() ? fs::temp_directory_path() : fs::path(o.work_dir);
  std::string tmpl = (work / "dcalign-service-load-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "bm_service_load: cannot create a directory in " << work << "\n";
    return 1;
  }
  work = tmpl;
  r["work_dir"] = work.string();
  Recorder rec;
  int exit_status = 0;
  try {
    ServerProcess server(o, work);
    r["server"] = {{"pid", server.pid()},
                   {"args", server.args()},
                   {"rss_after_start_bytes", server.status_bytes("VmRSS")}};
    std::cerr << "dcalign-server pid " << server.pid() << " on 127.0.0.1:" << server.port() << "\n";
    long long rss_sampled = 0;
    const double cpu0 = server.cpu_seconds();
    r["load"] = run_load(o, server, rec, work, &rss_sampled);
    r["load"]["server_cpu_seconds"] = server.cpu_seconds() - cpu0;
    std::cerr << "load phase done\n";

    // One collaboration alone, against the same alignment in this process.
    auto backend = dcalign::make_backend(dcalign::Device::cpu);
    r["versions"]["blas"] = backend->description();
    std::vector<json> reps;
    std::vector<double> svc, inproc, create, uploads, wait_done, fetches, job, align_srv, align_in,
        align_in_all, train_in;
    for (int rep = 0; rep < o.e2e_repetitions && !over_time(); ++rep) {
      const SoloRun s = run_solo(o, server, rec, work, rep, *backend);
      reps.push_back({{"ok", s.ok},
                      {"error", s.error},
                      {"service_seconds", s.total},
                      {"create", s.create},
                      {"uploads", s.uploads},
                      {"wait_done", s.wait_done},
                      {"fetches", s.fetches},
                      {"server_job_seconds", s.job_seconds},
                      {"server_align_report_seconds", s.align_report_seconds},
                      {"in_process_seconds", s.in_process},
                      {"in_process_align_seconds", s.in_process_align},
                      {"in_process_train_seconds", s.in_process_train},
                      {"in_process_align_report_seconds", s.in_process_align_report}});
      if (!s.ok) {
        rec.error("e2e", s.error);
        continue;
      }
      std::cerr << "e2e " << rep << ": service " << fmt(s.total * 1e3, 1) << " ms, in process "
                << fmt(s.in_process * 1e3, 1) << " ms\n";
      svc.push_back(s.total);
      inproc.push_back(s.in_process);
      create.push_back(s.create);
      uploads.push_back(s.uploads);
      wait_done.push_back(s.wait_done);
      fetches.push_back(s.fetches);
      if (!std::isnan(s.job_seconds)) job.push_back(s.job_seconds);
      if (!std::isnan(s.align_report_seconds)) align_srv.push_back(s.align_report_seconds);
      align_in.push_back(s.in_process_align_report);
      align_in_all.push_back(s.in_process_align);
      if (!std::isnan(s.in_process_train)) train_in.push_back(s.in_process_train);
    }
    json e = {{"repetitions", reps}, {"repetitions_ok", svc.size()}};
    if (!svc.empty()) {
      e["service_median_seconds"] = percentile(svc, 0.5);
      e["in_process_median_seconds"] = percentile(inproc, 0.5);
      e["ratio"] = percentile(svc, 0.5) / percentile(inproc, 0.5);
      e["ratio_vs_align_report"] = percentile(svc, 0.5) / percentile(align_in, 0.5);
      e["phase_medians_seconds"] = {{"create", percentile(create, 0.5)},
                                    {"uploads", percentile(uploads, 0.5)},
                                    {"wait_done", percentile(wait_done, 0.5)},
                                    {"fetches", percentile(fetches, 0.5)},
                                    {"server_job", percentile(job, 0.5)},
                                    {"server_align_report", percentile(align_srv, 0.5)},
                                    {"in_process_align_report", percentile(align_in, 0.5)},
                                    {"in_process_align", percentile(align_in_all, 0.5)},
                                    {"in_process_train", percentile(train_in, 0.5)}};
      e["service"] =
          "create -> every participant's uploads (anchor, and with a model data and labels; "
          "participants concurrently, --threads) -> GetStatus every --e2e-poll-ms until done -> "
          "every participant's fetch (G_i, report, and with a model model/)";
      e["in_process"] =
          "Stack<double>::from_matrices of the same anchors + dcalign::align "
          "(ODC, the spec's seed, evaluate as the server) on a CPU backend"
#ifdef DCALIGN_BENCH_WITH_LEARN
          "; with a model, X~_i G_i stacked + learn::make_model(model, {seed, "
          "standardize_target = regression})->fit as src/service/train.cpp (without its save "
          "and training score)"
#endif
          ;
#ifdef DCALIGN_BENCH_WITH_LEARN
      e["in_process_work"] = trains(o) ? "align + fit of h" : "align";
#else
      e["in_process_work"] = trains(o) ? "align only: built without the learning layer" : "align";
#endif
    }
    r["e2e"] = e;

    // Peak RSS just before SIGTERM.
    r["server"]["peak_rss_bytes"] = server.status_bytes("VmHWM");
    r["server"]["rss_before_sigterm_bytes"] = server.status_bytes("VmRSS");
    r["server"]["max_sampled_rss_under_load_bytes"] = rss_sampled;
    r["server"]["cpu_seconds_before_sigterm"] = server.cpu_seconds();
    r["server"]["termination"] = server.terminate(30);
    r["client_peak_rss_bytes"] = proc_kib_field("/proc/self/status", "VmHWM");
  } catch (const std::exception& e) {
    abort_run(std::string("error: ") + e.what());
  }

  json lat = json::object();
  for (const auto& [kind, v] : rec.latency) lat[kind] = summary(v);
  r["latency_seconds"] = lat;
  r["errors"] = rec.errors;
  r["error_samples"] = rec.error_samples;
  r["wall_seconds"] = now_s();
  {
    std::string load = read_text("/proc/loadavg");
    while (!load.empty() && load.back() == '\n') load.pop_back();
    r["machine"]["loadavg_at_end"] = load;
  }
  if (g_abort) {
    r["status"] = "stopped: " + g_abort_reason;
    exit_status = 1;
  } else if (rec.error_count() > 0) {
    r["status"] = "errors";
    exit_status = 1;
  } else {
    r["status"] = "ok";
  }
  if (!o.keep) {
    std::error_code ec;
    fs::remove_all(work, ec);
  }
  try {
    write_json(o.out, r);
    const std::string md = markdown(r);
    std::cout << md;
    if (!o.markdown.empty()) std::ofstream(o.markdown) << md;
  } catch (const std::exception& e) {
    std::cerr << "bm_service_load: " << e.what() << "\n";
    return 1;
  }
  return exit_status;
}
