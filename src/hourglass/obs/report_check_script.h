// The report page's inline self-check (report_html.h): once the page has loaded it checks each
// <svg class="chart"> against its data (every drawn path's coordinates are finite numbers, as
// many as its data-n says, and the browser's layout box of the drawn element matches them; every
// marker group has data-n circles; the chart's points add up to its data-points) and writes the
// result on <body>: data-charts-expected, data-charts-drawn, data-charts-bad (the ids of the
// charts that failed) and data-errors (script errors caught by window.onerror). A person viewing
// the report sees nothing of it; the headless-browser test (tests/tools/
// check_report_in_chromium.py) reads those attributes from the rendered DOM.
#pragma once

namespace hg::obs {

inline constexpr const char* kReportCheckScript = R"JS(
(function () {
  var errors = [];
  function record() { document.body.setAttribute('data-errors', errors.join(' | ')); }
  window.addEventListener('error', function (e) { errors.push(String(e.message)); record(); });
  function near(a, b) { return Math.abs(a - b) <= 1.5; }
  function checkPath(el, n) {
    var nums = (el.getAttribute('d') || '').match(/[-+]?[0-9]*\.?[0-9]+/g) || [];
    if (nums.length !== 2 * n) return false;
    var x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (var i = 0; i < nums.length; i += 2) {
      var x = parseFloat(nums[i]), y = parseFloat(nums[i + 1]);
      if (!isFinite(x) || !isFinite(y)) return false;
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
    var box = el.getBBox();
    return n >= 2 && el.getTotalLength() > 0 && near(box.x, x0) && near(box.y, y0) &&
           near(box.x + box.width, x1) && near(box.y + box.height, y1);
  }
  function checkMarkers(el, n) {
    var circles = el.querySelectorAll('circle');
    if (circles.length !== n) return false;
    for (var i = 0; i < circles.length; ++i) {
      var b = circles[i].getBBox();
      if (!(b.width > 0 && b.height > 0)) return false;
    }
    return true;
  }
  window.addEventListener('load', function () {
    var charts = document.querySelectorAll('svg.chart'), drawn = 0, bad = [];
    for (var c = 0; c < charts.length; ++c) {
      var svg = charts[c], want = parseInt(svg.getAttribute('data-points'), 10), got = 0, ok = true;
      var parts = svg.querySelectorAll('.data');
      for (var p = 0; p < parts.length; ++p) {
        var el = parts[p], n = parseInt(el.getAttribute('data-n'), 10);
        var fine = el.tagName === 'path' ? checkPath(el, n) : checkMarkers(el, n);
        ok = ok && fine;
        got += n;
      }
      if (ok && want > 0 && got === want) drawn++; else bad.push(svg.getAttribute('data-chart'));
    }
    document.body.setAttribute('data-charts-expected', String(charts.length));
    document.body.setAttribute('data-charts-drawn', String(drawn));
    document.body.setAttribute('data-charts-bad', bad.join(' '));
    record();
  });
})();
)JS";

}  // namespace hg::obs
