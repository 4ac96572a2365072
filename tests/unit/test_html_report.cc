// The doctor's HTML report: self-contained (nothing fetched), escaped,
// well-nested, bounded in size on long runs, and — where Chromium is
// installed — rendered headless to a PNG that is not blank.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "doctor/html_report.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

using doctor::Diagnosis;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// Every element opened is closed, in order ("<x/>" and void elements close
// themselves). Returns "" when well-nested, else what went wrong.
std::string nesting_problem(const std::string& html) {
  static const char* kVoid[] = {"meta", "br", "hr", "img", "link", "input", "!DOCTYPE"};
  std::vector<std::string> open;
  for (size_t p = html.find('<'); p != std::string::npos; p = html.find('<', p + 1)) {
    const size_t end = html.find('>', p);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(p);
    const std::string tag = html.substr(p + 1, end - p - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(p);
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? "nothing" : open.back()) + "> at " + std::to_string(p);
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (tag.back() == '/') continue;
    bool is_void = false;
    for (const char* v : kVoid) is_void |= name == v;
    if (is_void) continue;
    open.push_back(name);
    if (name == "style") {  // raw text: skip to its end
      p = html.find("</style>", end);
      if (p == std::string::npos) return "unclosed <style>";
      --p;
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

Diagnosis synthetic() {
  Diagnosis d;
  d.job = "embed";
  d.device = "cpu";
  d.seconds = 2.5;
  d.device_busy = 0.37;
  d.items_per_second = 1234.5;
  d.tokens_per_second = 98765;
  d.host_syncs = 3;
  d.steps = 120;
  d.padding_efficiency = 1;
  d.bound = doctor::Bound::input;
  d.verdict = "input-bound: the device waited 63% of the time, workers < cores & \"quoted\"";
  d.evidence = {"tokenizer threads 97% busy", "executor waited 1.6 s for batches <input>"};
  d.advice = {"--workers 1 -> 3"};
  d.stages = {{"read", 1, 0.2, 0.0, 0.1}, {"tokenize", 4, 2.3, 0.05, 0.1}, {"compute", 1, 0.9, 1.6, 0.0},
              {"write", 1, 0.1, 2.3, 0.0}};
  for (int i = 0; i < 40; ++i) {
    const double t = i * 0.06;
    d.spans.push_back({"executor", "forward", t + 0.04, 0.015});
    d.spans.push_back({"tokenizer-0", "tokenize", t, 0.055});
    d.spans.push_back({"tokenizer-1", "tokenize", t + 0.01, 0.05});
    if (i % 4 == 0) d.spans.push_back({"writer", "write", t + 0.05, 0.01});
  }
  for (int i = 1; i <= 25; ++i) {
    const double t = i * 0.1;
    d.utilization.push_back({"executor", t, 0.3 + 0.05 * (i % 3)});
    d.utilization.push_back({"tokenizer-0", t, 0.97});
    d.utilization.push_back({"tokenizer-1", t, 0.9});
    d.utilization.push_back({"writer", t, 0.02});
  }
  return d;
}

TEST(HtmlReport, SelfContainedEscapedAndWellNested) {
  const Diagnosis d = synthetic();
  const std::string html = doctor::render_html_report(d);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("input-bound: the device waited 63% of the time, workers &lt; cores &amp; &quot;quoted&quot;"),
            std::string::npos);
  EXPECT_EQ(html.find("workers < cores"), std::string::npos);
  EXPECT_NE(html.find("batches &lt;input&gt;"), std::string::npos);
  EXPECT_NE(html.find("--workers 1 -&gt; 3"), std::string::npos);
  // Nothing fetched: no URLs at all (inline SVG needs no xmlns in HTML).
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  // Timeline, utilization and stage charts.
  EXPECT_EQ(count(html, "<svg"), 3u);
  EXPECT_EQ(count(html, "</svg>"), 3u);
  EXPECT_EQ(nesting_problem(html), "");
  // Headline numbers, every lane, every stage.
  for (const char* s : {"37%", "1,234", "98,765", "0.03", "100%", "executor", "tokenizer-0", "tokenizer-1", "writer",
                        "read", "tokenize ×4", "compute", "write", "waiting for input"})
    EXPECT_NE(html.find(s), std::string::npos) << s;
  EXPECT_EQ(html.find("no timeline recorded"), std::string::npos);
}

// Embed counts batches, not optimizer steps: its sync card says so.
TEST(HtmlReport, SyncCardCountsBatchesForEmbedAndStepsForTrain) {
  Diagnosis d = synthetic();
  std::string html = doctor::render_html_report(d);
  EXPECT_NE(html.find("host syncs / batch"), std::string::npos);
  EXPECT_EQ(html.find("host syncs / step"), std::string::npos);
  d.job = "train";
  html = doctor::render_html_report(d);
  EXPECT_NE(html.find("host syncs / step"), std::string::npos);
  EXPECT_EQ(html.find("/ batch"), std::string::npos);
}

TEST(HtmlReport, EmptyDiagnosisSaysSo) {
  Diagnosis d;
  d.verdict = "unknown: nothing was measured";
  const std::string html = doctor::render_html_report(d);
  EXPECT_NE(html.find("unknown: nothing was measured"), std::string::npos);
  EXPECT_NE(html.find("no timeline recorded"), std::string::npos);
  EXPECT_NE(html.find("no stage times recorded"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 0u);
  EXPECT_EQ(nesting_problem(html), "");

  // Utilization without spans, and spans without utilization.
  Diagnosis u = synthetic();
  u.spans.clear();
  std::string h = doctor::render_html_report(u);
  EXPECT_NE(h.find("no timeline recorded"), std::string::npos);
  EXPECT_EQ(count(h, "<svg"), 2u);
  EXPECT_EQ(nesting_problem(h), "");
  Diagnosis s = synthetic();
  s.utilization.clear();
  h = doctor::render_html_report(s);
  EXPECT_NE(h.find("no CPU utilization samples recorded"), std::string::npos);
  EXPECT_EQ(count(h, "<svg"), 2u);
  EXPECT_EQ(nesting_problem(h), "");
}

// The span kinds of a CPU embed run (more than one palette of 10) plus 20
// more: every kind gets its own colour in the legend and the timeline, the
// backend's internal "name thread" span is neither drawn nor listed, and an
// embed run's host syncs are per batch.
TEST(HtmlReport, EachSpanKindHasItsOwnColourAndNoInternalEntries) {
  Diagnosis d = synthetic();
  std::vector<std::string> kinds = {"read", "tokenize", "pack", "enqueue", "copy to device", "embed", "linear",
                                    "attention", "gelu", "layernorm", "pool", "normalize", "copy to host",
                                    "wait result", "write"};
  for (int i = 0; i < 20; ++i) kinds.push_back("op-" + std::to_string(i));
  for (size_t i = 0; i < kinds.size(); ++i) d.spans.push_back({"device", kinds[i], 0.01 * static_cast<double>(i), 0.005});
  d.spans.push_back({"device", "name thread", 0, 0.0001});
  const std::string html = doctor::render_html_report(d);
  // The timeline's legend: <span style="--c: COLOUR">NAME</span> per kind.
  const size_t timeline = html.find("<h2>Timeline</h2>");
  ASSERT_NE(timeline, std::string::npos);
  const size_t legend = html.find("<div class=\"legend\">", timeline);
  const size_t legend_end = html.find("</div>", legend);
  ASSERT_NE(legend, std::string::npos);
  std::map<std::string, std::string> colour_of;
  std::set<std::string> colours;
  const std::string open = "<span style=\"--c: ";
  for (size_t p = html.find(open, legend); p != std::string::npos && p < legend_end; p = html.find(open, p + 1)) {
    const size_t c0 = p + open.size(), c1 = html.find('"', c0);
    const size_t n0 = html.find('>', c1) + 1, n1 = html.find("</span>", n0);
    const std::string colour = html.substr(c0, c1 - c0), name = html.substr(n0, n1 - n0);
    EXPECT_TRUE(colours.insert(colour).second) << name << " repeats colour " << colour;
    colour_of[name] = colour;
  }
  for (const std::string& k : kinds) EXPECT_TRUE(colour_of.count(k)) << k << " missing from the legend";
  EXPECT_EQ(colour_of.size(), kinds.size() + 1);  // + synthetic()'s "forward"
  EXPECT_EQ(html.find("name thread"), std::string::npos) << "an internal span is shown";
  EXPECT_NE(html.find("host syncs / batch"), std::string::npos);
  EXPECT_EQ(html.find("host syncs / step"), std::string::npos);
  d.job = "train";
  EXPECT_NE(doctor::render_html_report(d).find("host syncs / step"), std::string::npos);
}

TEST(HtmlReport, LongRunsStaySmall) {
  // 200k spans on a 100 s run: spans closer than half a pixel merge into one bar.
  Diagnosis d = synthetic();
  d.seconds = 100;
  d.spans.clear();
  for (int i = 0; i < 100000; ++i) {
    d.spans.push_back({"executor", "forward", i * 1e-3, 0.6e-3});
    d.spans.push_back({"tokenizer-0", "tokenize", i * 1e-3, 0.9e-3});
  }
  d.spans.push_back({"writer", "write", 50, 0});  // zero length: still drawn (a sliver)
  const std::string html = doctor::render_html_report(d);
  EXPECT_LT(html.size(), 1u << 20);
  EXPECT_EQ(nesting_problem(html), "");
  EXPECT_NE(html.find("forward ×"), std::string::npos);  // merged bars say how many spans they hold
}

// Headless Chromium renders the page; the screenshot must show a page, not a
// blank canvas. The PNG is decoded by a stdlib-only Python script (zlib), as
// stoke itself does not link zlib.
constexpr const char* kPngStats = R"py(
import collections, struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat = 8, []
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    pos += 12 + n
    if kind == b'IHDR':
        w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
    elif kind == b'IDAT':
        idat.append(body)
    elif kind == b'IEND':
        break
assert depth == 8 and interlace == 0 and ctype in (0, 2, 4, 6), (depth, ctype, interlace)
bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
raw = zlib.decompress(b''.join(idat))
stride = w * bpp
prev = bytearray(stride)
colors, hist = set(), collections.Counter()
for y in range(h):
    f = raw[y * (stride + 1)]
    row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 1:
        for i in range(bpp, stride): row[i] = (row[i] + row[i - bpp]) & 255
    elif f == 2:
        row = bytearray((a + b) & 255 for a, b in zip(row, prev))
    elif f == 3:
        for i in range(stride): row[i] = (row[i] + ((row[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
    elif f == 4:
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    elif f != 0:
        raise ValueError('bad filter %d' % f)
    prev = row
    colors.update(bytes(row[i:i + bpp]) for i in range(0, stride, bpp))
    hist.update(row)
n = sum(hist.values())
mean = sum(v * c for v, c in hist.items()) / n
std = (sum(c * (v - mean) ** 2 for v, c in hist.items()) / n) ** 0.5
print(w, h, len(colors), round(std, 2))
)py";

TEST(HtmlReport, RendersInHeadlessChromium) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it): the render check did not run";
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed: it decodes the screenshot (stoke links no PNG decoder), so the render check did not run";
  const auto dir = test::scratch_dir("html-report-render");
  const auto html = dir / "report.html";
  const auto png = dir / "shot.png";
  write_text(html, doctor::render_html_report(synthetic()));
  write_text(dir / "png_stats.py", kPngStats);
  const std::string cmd = "cd " + dir.string() + " && HOME=" + dir.string() +
                          " timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars"
                          " --user-data-dir=" + (dir / "profile").string() +
                          " --screenshot=" + png.string() + " --window-size=1200,900 file://" + html.string() +
                          " >" + (dir / "chromium.log").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove_all(dir / "profile");  // a few MB per run
  ASSERT_TRUE(std::filesystem::exists(png)) << "chromium exit " << rc << "; log:\n"
                                             << read_file(dir / "chromium.log");
  const std::string stats_cmd = "python3 " + (dir / "png_stats.py").string() + " " + png.string() + " >" +
                                (dir / "stats.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(stats_cmd.c_str()), 0) << read_file(dir / "stats.txt");
  std::istringstream in(read_file(dir / "stats.txt"));
  int w = 0, h = 0, colors = 0;
  double std_dev = 0;
  in >> w >> h >> colors >> std_dev;
  EXPECT_EQ(w, 1200);
  EXPECT_EQ(h, 900);
  // A blank page has 1 color and no variance; the report has text, cards and charts.
  EXPECT_GT(colors, 20) << read_file(dir / "stats.txt");
  EXPECT_GT(std_dev, 5.0) << read_file(dir / "stats.txt");
}

}  // namespace
}  // namespace stoke
