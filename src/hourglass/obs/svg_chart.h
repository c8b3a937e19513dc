// Line and marker charts as inline SVG, drawn by hand (no charting library), for the run report
// (report_html.h). A chart is an <svg class="chart" data-chart="ID" data-points="N"> element
// whose drawn data (a <path> per line, a <circle> per marker) carries class "data" and
// data-n="points it draws", so a browser test can check that every chart drew all its points.
//
// Tick labels are plain numbers, never "1.2e+05": an SI prefix from 1000 up (120k, 1.5M, 2G),
// as many decimals as the tick step needs below (2.5, 0.0004, 0.00015), and only for a step
// under 1e-5 the short exponent form "4e-6" (no "+", no leading zero). Memory axes (MiB data)
// show MiB, GiB or TiB, whichever keeps the axis's top under 2048 of it, in the ticks and the
// axis label. Time axes are the caller's: time_unit_for picks the unit of a run's span.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hg::obs {

enum class SeriesStyle {
  Line,     // a solid polyline (a single point becomes a marker)
  Dashed,   // a dashed polyline: projections, limits
  Markers,  // a circle per point
};

struct ChartSeries {
  std::string name;   // the legend's text (escaped when drawn)
  std::string color;  // a CSS color, from the report's own palette (never from a file)
  SeriesStyle style = SeriesStyle::Line;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are dropped
};

enum class AxisKind {
  Number,  // any number: ticks at 1, 2 or 5 times a power of ten, labels as above
  Count,   // whole things (epochs, optimizer steps): a tick step of at least 1, integer ticks
  MiB,     // memory in MiB: drawn in MiB, GiB or TiB by the axis's top; the label gets the unit
};

struct ChartSpec {
  std::string id;  // data-chart: a short name of our own ("loss", "budget")
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  bool y_from_zero = false;  // the y axis starts at 0 (utilisation, memory, budget)
  AxisKind x_kind = AxisKind::Number, y_kind = AxisKind::Number;
};

// A unit of an axis: values in the data's unit are divided by `divisor` to be shown in `name`.
struct AxisUnit {
  double divisor = 1;
  std::string name;
};
// The unit of a time axis for a span of `span_seconds`: seconds under 2 minutes, minutes under
// 2 hours, hours above ("s", "min", "h").
AxisUnit time_unit_for(double span_seconds);
// The unit of a memory axis whose top is `top_mib`: MiB up to 2048 MiB, GiB up to 2048 GiB,
// TiB above ("MiB", "GiB", "TiB").
AxisUnit memory_unit_for(double top_mib);
// "1.5 GiB", "512 MiB": a size in MiB with the unit memory_unit_for picks and `decimals` digits
// (trailing zeros dropped).
std::string format_mib(double mib, int decimals = 1);
// The label of a tick at `value` on an axis whose ticks are `step` apart (see the top of this
// file): tick_label(120000, 20000) is "120k", tick_label(1.5e6, 5e5) "1.5M", tick_label(0.0004,
// 0.0001) "0.0004", tick_label(4e-6, 1e-6) "4e-6", tick_label(0, s) "0". Without `si_prefix`
// (ticks that carry a unit, kept under 2048 of it) 1200 stays "1200".
std::string tick_label(double value, double step, bool si_prefix = true);
// The ticks an axis of `kind` shows for data in [lo, hi] (the range rounded out to whole
// steps), about `target` of them, and their step; memory in the unit memory_unit_for picks.
struct AxisTicks {
  std::vector<double> ticks;  // in the shown unit
  double step = 1;
  AxisUnit unit;  // divisor 1 and no name but for memory
};
AxisTicks axis_ticks(double lo, double hi, AxisKind kind, int target);

// The finite points of every series together.
size_t chart_points(const ChartSpec& spec);
// The chart as one <svg> element (800 x 300 user units, scaled to the page's width): axes with
// ticks at round numbers, a line or markers per series and a legend. The caller draws a chart
// only when chart_points() > 0.
std::string render_svg_chart(const ChartSpec& spec);
// `text` with &, <, >, " and ' replaced by entities: safe in HTML text and attribute values.
std::string html_escape(const std::string& text);

}  // namespace hg::obs
