#include "doctor/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <vector>

namespace stoke::doctor {

namespace {

// Geometry of every chart, in SVG user units (the SVG scales to the page
// width). Timeline and utilization share the x axis so they line up.
constexpr double kWidth = 1100;
constexpr double kPlotLeft = 170, kPlotRight = 1080;
constexpr double kPlotWidth = kPlotRight - kPlotLeft;

// Span colors by name (Tableau 10), thread colors for the utilization lines
// (a second palette, so a line is never mistaken for a span).
constexpr const char* kSpanColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                       "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr const char* kLineColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                       "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr const char* kBusyColor = "#4e79a7";
constexpr const char* kWaitInputColor = "#f28e2b";
constexpr const char* kWaitOutputColor = "#b9b9b9";

constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1d2430;
       font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1140px; margin: 0 auto; padding: 24px 20px 40px; }
.kicker { color: #5b6575; font-size: 13px; letter-spacing: .04em; text-transform: uppercase; }
.verdict { margin: 8px 0 18px; padding: 14px 18px; background: #fff; border-left: 6px solid var(--accent);
           border-radius: 6px; font-size: 24px; font-weight: 650; line-height: 1.3; box-shadow: 0 1px 2px #0001; }
.cards { display: grid; grid-template-columns: repeat(5, 1fr); gap: 12px; margin-bottom: 18px; }
.card { background: #fff; border-radius: 6px; padding: 12px 14px; box-shadow: 0 1px 2px #0001; }
.card .value { font-size: 26px; font-weight: 650; font-variant-numeric: tabular-nums; }
.card .label { color: #5b6575; font-size: 13px; }
.card .sub { color: #8a93a2; font-size: 12px; }
section { background: #fff; border-radius: 6px; padding: 14px 18px; margin-bottom: 16px; box-shadow: 0 1px 2px #0001; }
h2 { font-size: 16px; margin: 0 0 8px; }
.lists { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.lists section { margin-bottom: 0; }
ul { margin: 0; padding-left: 20px; }
li { margin: 3px 0; }
.advice li { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13.5px; }
.empty { color: #8a93a2; font-style: italic; margin: 4px 0; }
svg { display: block; width: 100%; height: auto; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", Arial, sans-serif;
           font-size: 12px; fill: #1d2430; }
svg .axis { fill: #5b6575; font-size: 11px; }
svg .grid { stroke: #e3e6eb; stroke-width: 1; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 8px 0 0; font-size: 13px; color: #3a4350; }
.legend span::before { content: ""; display: inline-block; width: 12px; height: 12px; border-radius: 2px;
                       margin-right: 6px; vertical-align: -1px; background: var(--c); }
.legend.lines span::before { height: 3px; vertical-align: 3px; }
footer { color: #8a93a2; font-size: 12px; text-align: right; }
)css";

bool finite(double v) { return std::isfinite(v); }

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// SVG coordinates: two decimals is below a device pixel and keeps files small.
std::string num(double v) {
  if (!finite(v)) v = 0;
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string with_commas(double v) {
  std::string digits = fmt::format("{:.0f}", std::fabs(v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return (v < 0 ? "-" : "") + out;
}

std::string fmt_rate(double v) {
  if (!finite(v) || v < 0) return "–";
  if (v >= 100) return with_commas(v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string fmt_seconds(double s) {
  if (!finite(s)) return "–";
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-3) return fmt::format("{:.0f} µs", s * 1e6);
  if (a < 1) return fmt::format("{:.0f} ms", s * 1e3);
  if (a < 10) return fmt::format("{:.2f} s", s);
  if (a < 100) return fmt::format("{:.1f} s", s);
  return fmt::format("{:.0f} s", s);
}

std::string fmt_percent(double fraction) {
  if (!finite(fraction)) return "–";
  return fmt::format("{:.0f}%", fraction * 100);
}

// A round tick step (1, 2 or 5 x 10^k) giving about `target` ticks over range.
double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

std::string tick_label(double t, double step) {
  if (step >= 1) return fmt::format("{:.0f} s", t);
  const int decimals = std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f} s", t, decimals);
}

// Threads in reading order: the device first, then the pipeline from its
// start to its end, numbered threads in numeric order ("tokenizer-2" before
// "tokenizer-10"), anything else after, by name.
int thread_rank(const std::string& name) {
  static const char* kOrder[] = {"device", "executor", "cuda", "gpu", "main", "reader", "read", "tokeniz",
                                 "bucket", "batch", "stag", "writer", "write", "sampler"};
  for (size_t i = 0; i < std::size(kOrder); ++i)
    if (name.rfind(kOrder[i], 0) == 0) return static_cast<int>(i);
  return static_cast<int>(std::size(kOrder));
}

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      const std::string_view na = std::string_view(a).substr(i, i2 - i), nb = std::string_view(b).substr(j, j2 - j);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

std::vector<std::string> ordered_threads(const Diagnosis& d) {
  std::set<std::string> names;
  for (const Span& s : d.spans) names.insert(s.thread);
  for (const UtilizationSample& u : d.utilization) names.insert(u.thread);
  std::vector<std::string> out(names.begin(), names.end());
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    const int ra = thread_rank(a), rb = thread_rank(b);
    return ra != rb ? ra < rb : natural_less(a, b);
  });
  return out;
}

struct TimeAxis {
  double t_max = 1;
  double x(double t) const { return kPlotLeft + std::clamp(t / t_max, 0.0, 1.0) * kPlotWidth; }
};

TimeAxis time_axis(const Diagnosis& d) {
  double t_max = finite(d.seconds) ? d.seconds : 0;
  for (const Span& s : d.spans)
    if (finite(s.start + s.duration)) t_max = std::max(t_max, s.start + s.duration);
  for (const UtilizationSample& u : d.utilization)
    if (finite(u.t)) t_max = std::max(t_max, u.t);
  return TimeAxis{t_max > 0 ? t_max : 1};
}

// Vertical grid lines and labels of the time axis, from y0 to y1, labels below y1.
void draw_time_axis(std::string& out, const TimeAxis& axis, double y0, double y1) {
  const double step = nice_step(axis.t_max, 10);
  for (int i = 0;; ++i) {
    const double t = i * step;
    if (t > axis.t_max * (1 + 1e-9)) break;
    const double x = axis.x(t);
    out += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>)", num(x), num(y0), num(y1));
    out += fmt::format(R"(<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>)", num(x), num(y1 + 14),
                       esc(tick_label(t, step)));
  }
}

// One bar of the timeline: spans of one name at one nesting depth on one
// lane, merged while they lie within half a pixel of each other (a long run
// has more spans than pixels). Its opacity is the fraction of the merged
// interval the spans actually cover, so a dense run of short spans reads as
// solid and a sparse one as faint, rather than every sliver as a full pixel.
struct Bar {
  double x0, x1, covered_px;
  int count;
  double seconds;
};

void draw_timeline(std::string& out, const Diagnosis& d, const std::vector<std::string>& threads,
                   const TimeAxis& axis, const std::vector<std::string>& span_names) {
  out += "<section><h2>Timeline</h2>";
  if (d.spans.empty()) {
    out += R"(<p class="empty">no timeline recorded (run with --trace FILE to record spans per thread)</p></section>)";
    return;
  }
  std::map<std::string, size_t> color_of;
  for (size_t i = 0; i < span_names.size(); ++i) color_of[span_names[i]] = i % std::size(kSpanColors);

  constexpr double kRow = 18, kLaneGap = 6, kTop = 6;
  constexpr int kMaxDepth = 4;
  struct Lane {
    std::string thread;
    std::vector<const Span*> spans;
    int depth_count = 1;
  };
  std::vector<Lane> lanes;
  std::map<std::string, size_t> lane_of;
  for (const std::string& t : threads) {
    lane_of[t] = lanes.size();
    lanes.push_back(Lane{t, {}, 1});
  }
  for (const Span& s : d.spans)
    if (finite(s.start) && finite(s.duration)) lanes[lane_of[s.thread]].spans.push_back(&s);
  std::erase_if(lanes, [](const Lane& l) { return l.spans.empty(); });

  std::string body;
  double y = kTop;
  for (Lane& lane : lanes) {
    // Nesting depth of each span (a span that starts inside another is drawn
    // below it), then bars per (depth, name).
    std::stable_sort(lane.spans.begin(), lane.spans.end(), [](const Span* a, const Span* b) {
      return a->start != b->start ? a->start < b->start : a->duration > b->duration;
    });
    std::vector<double> open_ends;
    std::map<std::pair<int, std::string>, std::vector<Bar>> bars;
    for (const Span* s : lane.spans) {
      while (!open_ends.empty() && open_ends.back() <= s->start) open_ends.pop_back();
      const int depth = std::min<int>(static_cast<int>(open_ends.size()), kMaxDepth - 1);
      open_ends.push_back(s->start + std::max(s->duration, 0.0));
      lane.depth_count = std::max(lane.depth_count, depth + 1);
      const double x0 = axis.x(s->start), x1 = axis.x(s->start + std::max(s->duration, 0.0));
      std::vector<Bar>& list = bars[{depth, s->name}];
      if (!list.empty() && x0 <= list.back().x1 + 0.5) {
        Bar& b = list.back();
        b.covered_px += std::max(0.0, x1 - std::max(x0, b.x1));
        b.x1 = std::max(b.x1, x1);
        ++b.count;
        b.seconds += s->duration;
      } else {
        list.push_back(Bar{x0, x1, x1 - x0, 1, s->duration});
      }
    }
    const double lane_h = lane.depth_count * kRow;
    body += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#f4f5f7"/>)", num(kPlotLeft), num(y),
                        num(kPlotWidth), num(lane_h));
    body += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", num(kPlotLeft - 8),
                        num(y + std::min(lane_h, 2 * kRow) / 2 + 4), esc(lane.thread));
    for (const auto& [key, list] : bars) {
      const auto& [depth, name] = key;
      for (const Bar& b : list) {
        const double w = std::max(b.x1 - b.x0, 0.6);
        const double opacity = std::clamp(b.covered_px / std::max(b.x1 - b.x0, 0.6), 0.35, 1.0);
        const std::string tip =
            b.count == 1 ? fmt::format("{} · {}", name, fmt_seconds(b.seconds))
                         : fmt::format("{} ×{} · {} in total", name, b.count, fmt_seconds(b.seconds));
        body += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"{}><title>{} · {}</title></rect>)",
                            num(b.x0), num(y + depth * kRow + 1), num(w), num(kRow - 2),
                            kSpanColors[color_of[name]],
                            opacity < 0.999 ? fmt::format(R"( fill-opacity="{}")", num(opacity)) : "",
                            esc(lane.thread), esc(tip));
      }
    }
    y += lane_h + kLaneGap;
  }
  const double plot_bottom = y - kLaneGap + 4;
  std::string axis_svg;
  draw_time_axis(axis_svg, axis, kTop - 4, plot_bottom);
  out += fmt::format(R"(<svg viewBox="0 0 {} {}" role="img" aria-label="timeline of spans per thread">)", num(kWidth),
                     num(plot_bottom + 22));
  out += axis_svg + body + "</svg>";
  out += R"(<div class="legend">)";
  for (const std::string& name : span_names)
    out += fmt::format(R"(<span style="--c: {}">{}</span>)", kSpanColors[color_of[name]], esc(name));
  out += "</div></section>";
}

void draw_utilization(std::string& out, const Diagnosis& d, const std::vector<std::string>& threads,
                      const TimeAxis& axis) {
  out += "<section><h2>CPU utilization per thread</h2>";
  std::map<std::string, std::vector<const UtilizationSample*>> by_thread;
  for (const UtilizationSample& u : d.utilization)
    if (finite(u.t) && finite(u.fraction)) by_thread[u.thread].push_back(&u);
  if (by_thread.empty()) {
    out += d.spans.empty()
               ? R"(<p class="empty">no timeline recorded (no CPU utilization samples)</p></section>)"
               : R"(<p class="empty">no CPU utilization samples recorded</p></section>)";
    return;
  }
  constexpr double kTop = 8, kHeight = 150;
  const double bottom = kTop + kHeight;
  auto y_of = [&](double f) { return bottom - std::clamp(f, 0.0, 1.0) * kHeight; };
  out += fmt::format(R"(<svg viewBox="0 0 {} {}" role="img" aria-label="CPU utilization per thread">)", num(kWidth),
                     num(bottom + 22));
  draw_time_axis(out, axis, kTop, bottom);
  for (int pct = 0; pct <= 100; pct += 25) {
    const double yy = y_of(pct / 100.0);
    out += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{2}" y2="{1}"/>)", num(kPlotLeft), num(yy),
                       num(kPlotRight));
    out += fmt::format(R"(<text class="axis" x="{}" y="{}" text-anchor="end">{}% of a core</text>)",
                       num(kPlotLeft - 8), num(yy + 4), pct);
  }
  std::string legend;
  size_t color = 0;
  for (const std::string& thread : threads) {
    auto it = by_thread.find(thread);
    if (it == by_thread.end()) continue;
    std::vector<const UtilizationSample*>& samples = it->second;
    std::stable_sort(samples.begin(), samples.end(),
                     [](const UtilizationSample* a, const UtilizationSample* b) { return a->t < b->t; });
    // At most ~2 points per pixel column: average samples that share one.
    std::vector<std::pair<double, double>> points;  // (x, fraction)
    double sum = 0;
    int n = 0;
    double column = -1;
    double total = 0;
    for (const UtilizationSample* s : samples) {
      total += s->fraction;
      const double x = axis.x(s->t);
      const double c = std::floor(x * 2);
      if (n && c != column) {
        points.emplace_back(column / 2, sum / n);
        sum = 0;
        n = 0;
      }
      column = c;
      sum += s->fraction;
      ++n;
    }
    if (n) points.emplace_back(column / 2, sum / n);
    const char* c = kLineColors[color++ % std::size(kLineColors)];
    std::string pts;
    for (const auto& [x, f] : points) pts += num(x) + "," + num(y_of(f)) + " ";
    if (points.size() == 1)
      out += fmt::format(R"(<circle cx="{}" cy="{}" r="3" fill="{}"/>)", num(points[0].first),
                         num(y_of(points[0].second)), c);
    else
      out += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="1.8" stroke-linejoin="round" points="{}"><title>{}</title></polyline>)",
                         c, pts, esc(thread));
    legend += fmt::format(R"(<span style="--c: {}">{} · {} on average</span>)", c, esc(thread),
                          fmt_percent(total / static_cast<double>(samples.size())));
  }
  out += "</svg>";
  out += R"(<div class="legend lines">)" + legend + "</div></section>";
}

void draw_stages(std::string& out, const Diagnosis& d) {
  out += "<section><h2>Time per stage</h2>";
  if (d.stages.empty()) {
    out += R"(<p class="empty">no stage times recorded</p></section>)";
    return;
  }
  auto clean = [](double v) { return finite(v) && v > 0 ? v : 0.0; };
  double max_total = 0;
  for (const StageTime& s : d.stages)
    max_total = std::max(max_total, clean(s.busy) + clean(s.wait_input) + clean(s.wait_output));
  if (!(max_total > 0)) max_total = 1;
  constexpr double kBarLeft = kPlotLeft, kBarRight = 830, kRow = 30, kBar = 20, kTop = 6;
  const double scale = (kBarRight - kBarLeft) / max_total;
  const double bottom = kTop + kRow * static_cast<double>(d.stages.size());
  out += fmt::format(R"(<svg viewBox="0 0 {} {}" role="img" aria-label="busy and waiting seconds per stage">)",
                     num(kWidth), num(bottom + 22));
  const double step = nice_step(max_total, 6);
  for (int i = 0;; ++i) {
    const double v = i * step;
    if (v > max_total * (1 + 1e-9)) break;
    const double x = kBarLeft + v * scale;
    out += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>)", num(x), num(kTop - 3),
                       num(bottom));
    out += fmt::format(R"(<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>)", num(x), num(bottom + 14),
                       esc(tick_label(v, step)));
  }
  double y = kTop;
  for (const StageTime& s : d.stages) {
    const std::string label = s.threads > 1 ? fmt::format("{} ×{}", s.name, s.threads) : s.name;
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", num(kBarLeft - 8),
                       num(y + kBar / 2 + 4), esc(label));
    double x = kBarLeft;
    const struct {
      double v;
      const char* color;
      const char* what;
      const char* ink;
    } parts[] = {{clean(s.busy), kBusyColor, "busy", "#fff"},
                 {clean(s.wait_input), kWaitInputColor, "waiting for input", "#1d2430"},
                 {clean(s.wait_output), kWaitOutputColor, "waiting for output", "#1d2430"}};
    for (const auto& p : parts) {
      const double w = p.v * scale;
      if (w <= 0) continue;
      out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{} · {} {}</title></rect>)",
                         num(x), num(y), num(std::max(w, 0.6)), num(kBar), p.color, esc(label), p.what,
                         esc(fmt_seconds(p.v)));
      const std::string text = fmt_seconds(p.v);
      if (w > 7.5 * static_cast<double>(text.size()) + 8)
        out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" style="fill: {}">{}</text>)", num(x + w / 2),
                           num(y + kBar / 2 + 4), p.ink, esc(text));
      x += w;
    }
    out += fmt::format(R"(<text class="axis" x="{}" y="{}">busy {} · in {} · out {}</text>)", num(kBarRight + 12),
                       num(y + kBar / 2 + 4), esc(fmt_seconds(clean(s.busy))), esc(fmt_seconds(clean(s.wait_input))),
                       esc(fmt_seconds(clean(s.wait_output))));
    y += kRow;
  }
  out += "</svg>";
  out += fmt::format(
      R"(<div class="legend"><span style="--c: {}">busy</span><span style="--c: {}">waiting for input</span><span style="--c: {}">waiting for output</span></div></section>)",
      kBusyColor, kWaitInputColor, kWaitOutputColor);
}

const char* accent_of(Bound b) {
  switch (b) {
    case Bound::compute: return "#59a14f";  // as fast as the device: good news
    case Bound::unknown: return "#8a93a2";
    default: return "#e15759";  // something other than the device bounds the run
  }
}

void card(std::string& out, const std::string& label, const std::string& value, const std::string& sub) {
  out += fmt::format(R"(<div class="card"><div class="label">{}</div><div class="value">{}</div><div class="sub">{}</div></div>)",
                     esc(label), esc(value), esc(sub));
}

void list_section(std::string& out, const char* title, const std::vector<std::string>& items, const char* css_class) {
  out += fmt::format(R"(<section class="{}"><h2>{}</h2>)", css_class, title);
  if (items.empty()) {
    out += R"(<p class="empty">none</p>)";
  } else {
    out += "<ul>";
    for (const std::string& item : items) out += "<li>" + esc(item) + "</li>";
    out += "</ul>";
  }
  out += "</section>";
}

}  // namespace

std::string html_escape(const std::string& text) { return esc(text); }

std::string render_html_report(const Diagnosis& d) {
  const std::string job = d.job.empty() ? "run" : d.job;
  std::string out;
  out.reserve(64 * 1024 + d.spans.size() * 64);
  out += R"(<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">)";
  out += R"(<meta name="viewport" content="width=device-width, initial-scale=1">)";
  out += "<title>stoke doctor · " + esc(job) + (d.device.empty() ? "" : " on " + esc(d.device)) + "</title>";
  out += "<style>";
  out += kStyle;
  out += "</style></head><body><main>";

  // Header: what ran, the verdict, the numbers.
  std::string kicker = "stoke doctor · " + job;
  if (!d.device.empty()) kicker += " on " + d.device;
  if (finite(d.seconds) && d.seconds > 0) kicker += " · " + fmt_seconds(d.seconds) + " profiled";
  out += "<header><div class=\"kicker\">" + esc(kicker) + "</div>";
  out += fmt::format(R"(<div class="verdict" style="--accent: {}">{}</div>)", accent_of(d.bound),
                     esc(d.verdict.empty() ? "no verdict" : d.verdict));
  out += R"(<div class="cards">)";
  card(out, "device busy", fmt_percent(d.device_busy),
       finite(d.seconds) && d.seconds > 0 ? "of " + fmt_seconds(d.seconds) + " wall time" : "of the wall time");
  card(out, d.job == "train" ? "samples / s" : "items / s", fmt_rate(d.items_per_second),
       d.job == "train" ? "training samples" : "records");
  card(out, "tokens / s", fmt_rate(d.tokens_per_second), "real tokens");
  if (d.steps > 0)
    // A training run counts optimizer steps; embed and classify count batches.
    card(out, d.job == "train" ? "host syncs / step" : "host syncs per batch",
         fmt_rate(static_cast<double>(d.host_syncs) / static_cast<double>(d.steps)),
         fmt::format("{} in {} {}", with_commas(static_cast<double>(d.host_syncs)),
                     with_commas(static_cast<double>(d.steps)), d.job == "train" ? "steps" : "batches"));
  else
    card(out, "host syncs", with_commas(static_cast<double>(d.host_syncs)), "no steps recorded");
  card(out, "padding efficiency", fmt_percent(d.padding_efficiency), "real / computed tokens");
  out += "</div></header>";

  out += R"(<div class="lists">)";
  list_section(out, "Evidence", d.evidence, "evidence");
  list_section(out, "Advice", d.advice, "advice");
  out += "</div>";
  out += "<div style=\"height: 16px\"></div>";

  const std::vector<std::string> threads = ordered_threads(d);
  const TimeAxis axis = time_axis(d);
  std::set<std::string> names;
  for (const Span& s : d.spans) names.insert(s.name);
  const std::vector<std::string> span_names(names.begin(), names.end());
  draw_timeline(out, d, threads, axis, span_names);
  draw_utilization(out, d, threads, axis);
  draw_stages(out, d);

  out += "<footer>stoke " STOKE_VERSION " · a self-contained report: it loads nothing from the network</footer>";
  out += "</main></body></html>\n";
  return out;
}

}  // namespace stoke::doctor
