#include "hourglass/obs/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace hg::obs {

namespace {

// The drawing's geometry in SVG user units.
constexpr double kWidth = 800, kHeight = 320;
constexpr double kLeft = 84, kRight = 16, kTop = 34, kBottom = 64;
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
};

// A tick step of 1, 2 or 5 times a power of ten giving about `target` ticks over `span`.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / power;
  return power * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

// The digits after the point that tell ticks `step` apart (0 for a step of 1 or more).
int decimals_for(double step) { return std::max(0, int(std::ceil(-std::log10(step) - 1e-9))); }

// "2.50" -> "2.5", "3.0" -> "3", "120" stays.
std::string trim_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

AxisUnit time_unit_for(double span_seconds) {
  if (!(span_seconds >= 120)) return {1, "s"};
  if (span_seconds < 7200) return {60, "min"};
  return {3600, "h"};
}

AxisUnit memory_unit_for(double top_mib) {
  top_mib = std::abs(top_mib);
  if (!(top_mib > 2048)) return {1, "MiB"};
  if (top_mib <= 2048.0 * 1024) return {1024, "GiB"};
  return {1024.0 * 1024, "TiB"};
}

std::string format_mib(double mib, int decimals) {
  const AxisUnit u = memory_unit_for(mib);
  return trim_zeros(fmt::format("{:.{}f}", mib / u.divisor, std::max(0, decimals))) + " " + u.name;
}

std::string tick_label(double value, double step, bool si_prefix) {
  if (!std::isfinite(value)) return "";
  step = std::abs(step);
  const double a = std::abs(value);
  if (!(step > 0) || !std::isfinite(step)) step = a > 0 ? a : 1;
  if (a < step * 1e-9) return "0";
  if (si_prefix && a >= 1000 * (1 - 1e-12)) {
    // An SI prefix: 120k, 1.5M.
    static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
    int p = 0;
    double scale = 1;
    while (p + 1 < int(std::size(kPrefixes)) && a >= scale * 1000 * (1 - 1e-12)) {
      scale *= 1000;
      ++p;
    }
    return trim_zeros(fmt::format("{:.{}f}", value / scale, decimals_for(step / scale))) +
           kPrefixes[p];
  }
  if (step >= 1e-5) return trim_zeros(fmt::format("{:.{}f}", value, decimals_for(step)));
  // Very small steps: "4e-6", "1.2e-7" (a decimal would need more than 5 zeros after the point).
  int e = int(std::floor(std::log10(a)));
  const int decimals = std::max(0, e - int(std::floor(std::log10(step) + 1e-9)));
  std::string m = fmt::format("{:.{}f}", value / std::pow(10.0, e), decimals);
  if (std::abs(std::stod(m)) >= 10) {  // 9.99e-7 rounded up to 10e-7
    ++e;
    m = fmt::format("{:.{}f}", value / std::pow(10.0, e), decimals);
  }
  return fmt::format("{}e{}", trim_zeros(m), e);
}

AxisTicks axis_ticks(double lo, double hi, AxisKind kind, int target) {
  AxisTicks out;
  if (kind == AxisKind::MiB) {
    out.unit = memory_unit_for(std::max(std::abs(lo), std::abs(hi)));
    lo /= out.unit.divisor;
    hi /= out.unit.divisor;
  }
  if (!(hi > lo)) {  // one value v: [v - 1, v + 1], or +-10% of it
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double step = nice_step(hi - lo, target);
  if (kind == AxisKind::Count) step = std::max(1.0, std::round(step));
  out.step = step;
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  for (double i = first; i <= last; ++i) {
    const double t = i * step;
    out.ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  if (out.ticks.size() < 2) out.ticks.push_back(out.ticks.back() + step);
  return out;
}

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
  // The ticks, in the unit each axis shows (memory: MiB, GiB or TiB), span the frame.
  const AxisTicks xt = axis_ticks(xr.lo, xr.hi, spec.x_kind, 8);
  const AxisTicks yt = axis_ticks(yr.lo, yr.hi, spec.y_kind, 5);
  const double x0 = xt.ticks.front(), x1 = xt.ticks.back();
  const double y0 = yt.ticks.front(), y1 = yt.ticks.back();
  auto px = [&](double x) { return kLeft + (x / xt.unit.divisor - x0) / (x1 - x0) * kPlotWidth; };
  auto py = [&](double y) { return kTop + (y1 - y / yt.unit.divisor) / (y1 - y0) * kPlotHeight; };
  // Tick labels carry the unit where the chart chose it (memory), as does the axis label.
  // (a unit keeps its numbers under 2048: "1200 MiB", not "1.2k MiB").
  auto label = [](const AxisTicks& a, double t) {
    if (a.unit.name.empty()) return tick_label(t, a.step);
    const std::string text = tick_label(t, a.step, /*si_prefix=*/false);
    return text == "0" ? text : text + " " + a.unit.name;
  };
  auto axis_label = [](const std::string& text, const AxisTicks& a) {
    return a.unit.name.empty() ? text : text + " (" + a.unit.name + ")";
  };

  std::string svg = fmt::format(
      "<svg class=\"chart\" data-chart=\"{}\" data-points=\"{}\" viewBox=\"0 0 {} {}\" "
      "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{}\">\n",
      html_escape(spec.id), chart_points(spec), kWidth, kHeight, html_escape(spec.title));
  svg += fmt::format("<text class=\"title\" x=\"{}\" y=\"20\">{}</text>\n", kLeft,
                     html_escape(spec.title));
  // Grid lines and tick labels.
  for (const double t : yt.ticks) {
    const double y = py(t * yt.unit.divisor);
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick y\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kLeft, y, kLeft + kPlotWidth, y, kLeft - 6, y + 4, label(yt, t));
  }
  for (const double t : xt.ticks) {
    const double x = px(t * xt.unit.divisor);
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick x\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
        x, kTop, x, kTop + kPlotHeight, x, kTop + kPlotHeight + 16, label(xt, t));
  }
  svg += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                     kLeft, kTop, kPlotWidth, kPlotHeight);
  svg += fmt::format(
      "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
      kLeft + kPlotWidth / 2, kTop + kPlotHeight + 34, html_escape(axis_label(spec.x_label, xt)));
  svg += fmt::format(
      "<text class=\"label\" transform=\"translate(16 {:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      kTop + kPlotHeight / 2, html_escape(axis_label(spec.y_label, yt)));

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
