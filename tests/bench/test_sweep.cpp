// The sweep driver's logic (bench/sweep): value lists, statistics, the document and its schema,
// resume (only missing points are measured; mismatched parameters are refused), the time cap
// and the re-measurement of points disturbed by other processes. Runners are fakes: nothing
// here times anything.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sweep/sweep.hpp"

namespace dcalign::bench {
namespace {

namespace fs = std::filesystem;

// Answers every series it is given with fixed times; counts its calls per point.
class FakeRunner : public Runner {
 public:
  explicit FakeRunner(std::string impl) : impl_(std::move(impl)) {}
  bool handles(const Series& s) const override { return s.impl == impl_; }
  std::vector<json> run(const Shape& shape, const std::vector<Series>& todo) override {
    calls[shape.c] += 1;
    std::vector<json> out;
    for (const auto& s : todo) {
      seen[shape.c].push_back(s.method);
      const double t = slow.count(s.method) ? slow[s.method] : 0.01 * shape.c;
      out.push_back(make_result(s, {t}, {t, 1.1 * t, 0.9 * t}));
    }
    return out;
  }
  std::map<long, int> calls;
  std::map<long, std::vector<std::string>> seen;
  std::map<std::string, double> slow;  // method -> seconds (above the cap)

 private:
  std::string impl_;
};

SweepConfig small_config(const std::string& values) {
  SweepConfig cfg = paper_defaults("c");
  cfg.values = parse_values(values);
  cfg.threads = 2;
  cfg.repetitions = 3;
  return cfg;
}

LoopHooks fake_hooks() {
  LoopHooks h;
  double t = 0;
  h.clock = [t]() mutable { return t += 1.0; };
  return h;
}

class SweepFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("dcalign_sweep_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST(ParseValues, PaperRangesIncludeTheStop) {
  const auto l = parse_values("50:50:950");
  ASSERT_EQ(l.size(), 19u);
  EXPECT_EQ(l.front(), 50);
  EXPECT_EQ(l.back(), 950);
  EXPECT_EQ(parse_values("1000:1000:20000").size(), 20u);
  // A step that does not land on the stop ends below it.
  EXPECT_EQ(parse_values("1:3:8"), (std::vector<long>{1, 4, 7}));
}

TEST(ParseValues, ListsAndMixes) {
  EXPECT_EQ(parse_values("1000, 20000"), (std::vector<long>{1000, 20000}));
  EXPECT_EQ(parse_values("7"), (std::vector<long>{7}));
  EXPECT_EQ(parse_values("50:50:150,500"), (std::vector<long>{50, 100, 150, 500}));
}

TEST(ParseValues, RejectsBadSpecifications) {
  for (const char* bad : {"", "0", "-5", "abc", "10:0:20", "20:5:10", "1:2", "1:2:3:4", "5,5",
                          "50:50:150,100", "3,,4", "1.5"})
    EXPECT_THROW(parse_values(bad), UsageError) << "'" << bad << "'";
}

TEST(PaperDefaults, Table5) {
  const auto l = paper_defaults("l");
  EXPECT_EQ(l.values.size(), 19u);
  EXPECT_EQ(l.a, 1000);
  EXPECT_EQ(l.c, 50);
  const auto a = paper_defaults("a");
  EXPECT_EQ(a.values.back(), 20000);
  EXPECT_EQ(a.l, 50);
  EXPECT_EQ(a.c, 50);
  const auto c = paper_defaults("c");
  EXPECT_EQ(c.values.back(), 1000);
  EXPECT_EQ(c.a, 1000);
  EXPECT_EQ(c.l, 50);
  EXPECT_THROW(paper_defaults("x"), UsageError);
  EXPECT_EQ(c.shape_at(300).c, 300);
  EXPECT_EQ(c.shape_at(300).a, 1000);
}

TEST(Config, ValidateNamesTheProblem) {
  SweepConfig cfg = small_config("50");
  cfg.methods = {"odc", "pca"};
  EXPECT_THROW(cfg.validate(), UsageError);
  cfg = paper_defaults("l");
  cfg.threads = 1;
  cfg.values = {2000};  // l > a
  EXPECT_THROW(cfg.validate(), UsageError);
  cfg = small_config("50");
  cfg.repetitions = 0;
  EXPECT_THROW(cfg.validate(), UsageError);
  EXPECT_NO_THROW(small_config("50").validate());
}

TEST(Config, SeriesCoverImplementationsMethodsAndPrecisions) {
  SweepConfig cfg = small_config("50");
  cfg.methods = {"odc", "gopp"};
  cfg.precisions = {"float64", "float32"};
  const auto s = cfg.series();
  // dcalign: 2 methods x 2 precisions; numpy: GOPP has no peer version, so 1 x 2.
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].key(), "dcalign/odc/cpu/float64");
  EXPECT_EQ(s.back().key(), "numpy/odc/cpu/float32");
  cfg.peers = {"torch"};
  EXPECT_EQ(cfg.series().back().backend, "cuda");
}

TEST(Summarize, MedianMinMax) {
  const Stats odd = summarize({3, 1, 2});
  EXPECT_EQ(odd.median, 2);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 3);
  EXPECT_EQ(summarize({4, 1, 3, 2}).median, 2.5);
  EXPECT_EQ(summarize({5}).median, 5);
  EXPECT_THROW(summarize({}), std::invalid_argument);
}

TEST(FormatDuration, HoursMinutesSeconds) {
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(59.6), "0:01:00");
}

TEST_F(SweepFiles, DocumentHasTheSchemaKeys) {
  SweepConfig cfg = small_config("50,100");
  SweepDoc doc(cfg, json{{"cpu", {{"model", "test"}}}});
  FakeRunner dc("dcalign"), np("numpy");
  std::ostringstream log;
  run_sweep(doc, cfg, {&dc, &np}, path("s.json"), path("s.csv"), log, fake_hooks());
  const json d = read_document(path("s.json"));
  for (const char* k : {"schema", "parameters", "machine", "sessions", "complete", "points"})
    EXPECT_TRUE(d.contains(k)) << k;
  EXPECT_EQ(d["schema"], kSchema);
  for (const char* k : {"sweep", "values", "fixed", "methods", "precisions", "backends", "peers",
                        "warmup", "repetitions", "seed", "threads", "max_seconds", "svd"})
    EXPECT_TRUE(d["parameters"].contains(k)) << k;
  EXPECT_TRUE(d["complete"].get<bool>());
  ASSERT_EQ(d["points"].size(), 2u);
  const json& p = d["points"][0];
  for (const char* k : {"x", "a", "l", "c", "results", "wall_seconds"})
    EXPECT_TRUE(p.contains(k)) << k;
  ASSERT_EQ(p["results"].size(), 6u);  // 3 methods x (dcalign, numpy)
  for (const auto& r : p["results"])
    for (const char* k : {"impl", "method", "backend", "precision", "status", "median", "min",
                          "max", "seconds", "warmup_seconds"})
      EXPECT_TRUE(r.contains(k)) << k;
  EXPECT_DOUBLE_EQ(p["results"][0]["median"].get<double>(), 0.5);  // t = 0.01 c at c = 50

  std::ifstream csv(path("s.csv"));
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 1 + 2 * 6);
  // No temporary files are left behind by the atomic writes.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

TEST_F(SweepFiles, ResumeMeasuresOnlyMissingPoints) {
  SweepConfig first = small_config("50,100");
  {
    SweepDoc doc(first, json::object());
    FakeRunner dc("dcalign"), np("numpy");
    std::ostringstream log;
    EXPECT_EQ(run_sweep(doc, first, {&dc, &np}, path("s.json"), "", log, fake_hooks()), 2);
  }
  // "Interrupted" after two points; the same sweep over three values resumes.
  SweepConfig again = small_config("50,100,150");
  SweepDoc doc = SweepDoc::resume(again, read_document(path("s.json")), json::object());
  EXPECT_EQ(doc.pending(), (std::vector<long>{150}));
  FakeRunner dc("dcalign"), np("numpy");
  std::ostringstream log;
  EXPECT_EQ(run_sweep(doc, again, {&dc, &np}, path("s.json"), "", log, fake_hooks()), 1);
  EXPECT_EQ(dc.calls.size(), 1u);
  EXPECT_EQ(dc.calls[150], 1);
  EXPECT_EQ(np.calls[150], 1);
  EXPECT_NE(log.str().find("resuming: 2 of 3"), std::string::npos) << log.str();
  const json d = read_document(path("s.json"));
  ASSERT_EQ(d["points"].size(), 3u);
  EXPECT_EQ(d["points"][2]["x"], 150);
  EXPECT_TRUE(d["complete"].get<bool>());
  EXPECT_EQ(d["parameters"]["values"].size(), 3u);

  // Resuming a complete sweep measures nothing.
  SweepDoc done = SweepDoc::resume(again, read_document(path("s.json")), json::object());
  EXPECT_TRUE(done.pending().empty());
}

TEST_F(SweepFiles, ResumeRefusesOtherParameters) {
  SweepConfig cfg = small_config("50");
  SweepDoc doc(cfg, json::object());
  FakeRunner dc("dcalign");
  std::ostringstream log;
  run_sweep(doc, cfg, {&dc}, path("s.json"), "", log, fake_hooks());

  SweepConfig other = cfg;
  other.repetitions = 10;
  other.methods = {"odc"};
  try {
    SweepDoc::resume(other, read_document(path("s.json")), json::object());
    FAIL() << "resume accepted different parameters";
  } catch (const ResumeMismatch& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("repetitions"), std::string::npos) << msg;
    EXPECT_NE(msg.find("methods"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("values"), std::string::npos) << msg;
  }
  SweepConfig fixed = cfg;
  fixed.a = 2000;  // the fixed pair is a parameter too
  EXPECT_THROW(SweepDoc::resume(fixed, read_document(path("s.json")), json::object()),
               ResumeMismatch);

  std::ofstream(path("bad.json")) << "{\"schema\": \"something else\"}";
  EXPECT_THROW(SweepDoc::resume(cfg, read_document(path("bad.json")), json::object()),
               ResumeMismatch);
  std::ofstream(path("broken.json")) << "{\"schema\": ";
  EXPECT_THROW(read_document(path("broken.json")), ResumeMismatch);
}

TEST_F(SweepFiles, TimeCapSkipsLargerPointsOfThatSeriesOnly) {
  SweepConfig cfg = small_config("50,100,150");
  cfg.peers = {};
  cfg.max_seconds = 60;
  SweepDoc doc(cfg, json::object());
  FakeRunner dc("dcalign");
  dc.slow["imakura"] = 61;  // median above the cap at the first point
  std::ostringstream log;
  run_sweep(doc, cfg, {&dc}, path("s.json"), "", log, fake_hooks());
  EXPECT_EQ(dc.seen[50], (std::vector<std::string>{"odc", "imakura", "kawakami"}));
  EXPECT_EQ(dc.seen[100], (std::vector<std::string>{"odc", "kawakami"}));
  EXPECT_EQ(dc.seen[150], (std::vector<std::string>{"odc", "kawakami"}));
  const json d = read_document(path("s.json"));
  int skipped = 0;
  for (const auto& p : d["points"])
    for (const auto& r : p["results"])
      if (r["status"] == "skipped") {
        ++skipped;
        EXPECT_EQ(r["method"], "imakura");
        EXPECT_NE(r["reason"].get<std::string>().find("c = 50 exceeded --max-seconds 60"),
                  std::string::npos)
            << r["reason"];
      }
  EXPECT_EQ(skipped, 2);

  // No cap: everything runs.
  SweepConfig uncapped = cfg;
  uncapped.max_seconds = 0;
  SweepDoc doc2(uncapped, json::object());
  FakeRunner dc2("dcalign");
  dc2.slow["imakura"] = 61;
  run_sweep(doc2, uncapped, {&dc2}, path("t.json"), "", log, fake_hooks());
  EXPECT_EQ(dc2.seen[150].size(), 3u);
}

TEST_F(SweepFiles, BusyPointsAreRemeasuredOnRequest) {
  SweepConfig cfg = small_config("50,100");
  cfg.peers = {};
  SweepDoc doc(cfg, json::object());
  FakeRunner dc("dcalign");
  LoopHooks hooks = fake_hooks();
  // Other processes used half of the CPUs during c = 100 only.
  long point = 0;
  hooks.before_point = [&] { return json::object(); };
  hooks.after_point = [&] { return json{{"other_cpu_fraction", ++point == 2 ? 0.5 : 0.01}}; };
  std::ostringstream log;
  run_sweep(doc, cfg, {&dc}, path("s.json"), "", log, hooks);

  SweepDoc keep = SweepDoc::resume(cfg, read_document(path("s.json")), json::object());
  EXPECT_TRUE(keep.pending().empty());
  SweepDoc redo = SweepDoc::resume(cfg, read_document(path("s.json")), json::object());
  redo.set_redo_above(0.2);
  EXPECT_EQ(redo.pending(), (std::vector<long>{100}));
  FakeRunner dc2("dcalign");
  LoopHooks quiet = fake_hooks();
  quiet.after_point = [] { return json{{"other_cpu_fraction", 0.0}}; };
  run_sweep(redo, cfg, {&dc2}, path("s.json"), "", log, quiet);
  EXPECT_EQ(dc2.calls.size(), 1u);
  const json d = read_document(path("s.json"));
  ASSERT_EQ(d["points"].size(), 2u);  // replaced, not duplicated
  EXPECT_EQ(d["points"][1]["other_cpu_fraction"].get<double>(), 0.0);
}

TEST_F(SweepFiles, AtomicWriteReplacesTheFile) {
  write_file_atomic(path("f.txt"), "one");
  write_file_atomic(path("f.txt"), "two");
  std::ifstream f(path("f.txt"));
  std::string s;
  f >> s;
  EXPECT_EQ(s, "two");
  EXPECT_THROW(write_file_atomic(path("missing/dir/f.txt"), "x"), std::runtime_error);
}

}  // namespace
}  // namespace dcalign::bench
