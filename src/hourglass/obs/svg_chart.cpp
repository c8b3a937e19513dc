#include "hourglass/obs/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hg::obs {

namespace {

// The drawing's geometry in SVG user units.
constexpr double kWidth = 800, kHeight = 320;
constexpr double kLeft = 72, kRight = 16, kTop = 34, kBottom = 64;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

bool finite_point(const std::pair<double, double>& p) {
  return std::isfinite(p.first) && std::isfinite(p.second);
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // A range of positive width: one value v becomes [v - 1, v + 1] (or +-10% of it).
  void widen() {
    if (hi > lo) return;
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
};

// A tick step of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / power;
  return power * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

// The range rounded out to whole ticks, and the ticks.
std::vector<double> ticks_of(Range& r, int target) {
  const double step = nice_step(r.hi - r.lo, target);
  r.lo = std::floor(r.lo / step) * step;
  r.hi = std::ceil(r.hi / step) * step;
  std::vector<double> ticks;
  for (double t = r.lo; t <= r.hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string number(double v) { return fmt::format("{:.4g}", v); }

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

size_t chart_points(const ChartSpec& spec) {
  size_t n = 0;
  for (const ChartSeries& s : spec.series)
    n += size_t(std::count_if(s.points.begin(), s.points.end(), finite_point));
  return n;
}

std::string render_svg_chart(const ChartSpec& spec) {
  Range xr, yr;
  for (const ChartSeries& s : spec.series)
    for (const auto& p : s.points)
      if (finite_point(p)) {
        xr.add(p.first);
        yr.add(p.second);
      }
  if (spec.y_from_zero) yr.add(0);
  if (!(xr.lo <= xr.hi)) xr = Range{0, 1};  // no points: an empty frame
  if (!(yr.lo <= yr.hi)) yr = Range{0, 1};
  xr.widen();
  yr.widen();
  const std::vector<double> x_ticks = ticks_of(xr, 8);
  const std::vector<double> y_ticks = ticks_of(yr, 5);
  auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * kPlotWidth; };
  auto py = [&](double y) { return kTop + (yr.hi - y) / (yr.hi - yr.lo) * kPlotHeight; };

  std::string svg = fmt::format(
      "<svg class=\"chart\" data-chart=\"{}\" data-points=\"{}\" viewBox=\"0 0 {} {}\" "
      "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{}\">\n",
      html_escape(spec.id), chart_points(spec), kWidth, kHeight, html_escape(spec.title));
  svg += fmt::format("<text class=\"title\" x=\"{}\" y=\"20\">{}</text>\n", kLeft,
                     html_escape(spec.title));
  // Grid lines and tick labels.
  for (const double t : y_ticks)
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kLeft, py(t), kLeft + kPlotWidth, py(t), kLeft - 6, py(t) + 4, number(t));
  for (const double t : x_ticks)
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
        px(t), kTop, px(t), kTop + kPlotHeight, px(t), kTop + kPlotHeight + 16, number(t));
  svg += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                     kLeft, kTop, kPlotWidth, kPlotHeight);
  svg += fmt::format(
      "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
      kLeft + kPlotWidth / 2, kTop + kPlotHeight + 34, html_escape(spec.x_label));
  svg += fmt::format(
      "<text class=\"label\" transform=\"translate(16 {:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      kTop + kPlotHeight / 2, html_escape(spec.y_label));

  // The data, then the legend along the bottom.
  double legend_x = kLeft;
  for (const ChartSeries& s : spec.series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : s.points)
      if (finite_point(p)) pts.emplace_back(px(p.first), py(p.second));
    if (pts.empty()) continue;
    const std::string color = html_escape(s.color);
    if (s.style == SeriesStyle::Markers || pts.size() == 1) {
      svg += fmt::format("<g class=\"data\" data-n=\"{}\" fill=\"{}\">", pts.size(), color);
      for (const auto& [x, y] : pts)
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\"/>", x, y);
      svg += "</g>\n";
    } else {
      std::string d;
      for (size_t i = 0; i < pts.size(); ++i)
        d += fmt::format("{}{:.1f} {:.1f}", i == 0 ? "M" : " L", pts[i].first, pts[i].second);
      svg += fmt::format(
          "<path class=\"data\" data-n=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"2\"{}/>\n",
          pts.size(), d, color, s.style == SeriesStyle::Dashed ? " stroke-dasharray=\"6 4\"" : "");
    }
    const double ly = kHeight - 10;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"4\" fill=\"{}\"/>"
        "<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        legend_x, ly - 6, color, legend_x + 18, ly, html_escape(s.name));
    legend_x += 30 + 7.0 * double(s.name.size());
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace hg::obs
