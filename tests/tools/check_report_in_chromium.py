#!/usr/bin/env python3
"""`hourglass report` in a real browser (CTest report_in_chromium).

Trains a tiny CPU run (synthetic data, with a budget and a saved profile), writes its report,
and loads the page in headless Chromium: the page's own check script (src/hourglass/obs/
report_check_script.h) writes on <body> how many charts drew every point; the DOM is read back
with --dump-dom after the load event (--virtual-time-budget: keyed to the page, not to a sleep).
Passes when every chart the report says it drew (`report --json`'s "charts") rendered, no script
error was recorded and Chromium logged no console message, then saves a screenshot into the work
folder. The check is then run on two copies of the page with one chart's path broken (unparsable;
one point lost), and must fail on each.

Usage: check_report_in_chromium.py --hourglass BIN --chromium CHROMIUM --config TOML --work DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def chromium_args(chromium, work):
    args = [chromium, "--headless", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
            "--disable-extensions", "--user-data-dir=" + os.path.join(work, "chromium-profile")]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return args


def render(chromium, work, page):
    """Loads `page`; returns (body attributes, console lines, errors of the check)."""
    r = run(chromium_args(chromium, work) + [
        "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom",
        "file://" + os.path.abspath(page)], timeout=120)
    problems = []
    if r.returncode != 0:
        problems.append(f"chromium exited {r.returncode}: {r.stderr[-2000:]}")
    body = re.search(r"<body([^>]*)>", r.stdout)
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(1))) if body else {}
    console = [line for line in r.stderr.splitlines() if "CONSOLE" in line]
    return attrs, console, problems


def check(chromium, work, page, want_charts):
    """The problems found with the rendered page ([] when it is fine)."""
    attrs, console, problems = render(chromium, work, page)
    if "data-charts-drawn" not in attrs:
        problems.append("the page's check script did not run: <body> has no data-charts-drawn "
                        f"(attributes: {attrs})")
    else:
        expected, drawn = attrs.get("data-charts-expected"), attrs["data-charts-drawn"]
        if expected != str(want_charts) or drawn != str(want_charts):
            problems.append(f"{drawn} of {expected} charts drew all their points; report --json "
                            f"said {want_charts} (failed: {attrs.get('data-charts-bad')!r})")
    if attrs.get("data-errors"):
        problems.append("script errors: " + attrs["data-errors"])
    for line in console:
        problems.append("console message: " + line)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hourglass", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    run_dir = os.path.join(a.work, "run")

    # A real tiny run: 16 steps of the quickstart's small CNN on synthetic images, with a budget.
    r = run([a.hourglass, "train", a.config, "--run-dir", run_dir, "--no-progress",
             "--set", "data.dataset=synthetic", "--set", "data.synthetic.train_size=512",
             "--set", "data.synthetic.test_size=128", "--set", "train.epochs=2",
             "--set", "train.batch_size=64", "--set", "metrics.every_steps=2",
             "--set", "checkpoint.every_steps=5", "--set", "monitor.every_seconds=0.1",
             "--budget", "2h"])
    if r.returncode != 0:
        sys.exit(f"training failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    r = run([a.hourglass, "profile", os.path.join(run_dir, "config.toml"), "--steps", "2",
             "--warmup", "0", "--json"])
    if r.returncode != 0:
        sys.exit(f"profile failed ({r.returncode}):\n{r.stderr}")
    with open(os.path.join(run_dir, "profile.json"), "w") as f:
        f.write(r.stdout)
    r = run([a.hourglass, "report", run_dir, "--json"])
    if r.returncode != 0:
        sys.exit(f"report failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    out = json.loads(r.stdout)
    page, charts = out["report"], out["charts"]
    if charts < 8:
        sys.exit(f"the report drew only {charts} charts: {r.stdout}")

    problems = check(a.chromium, a.work, page, charts)
    if problems:
        sys.exit("the report did not render cleanly:\n  " + "\n  ".join(problems))
    print(f"all {charts} charts rendered, no console message")

    shot = os.path.join(a.work, "report.png")
    r = run(chromium_args(a.chromium, a.work) + [
        "--hide-scrollbars", "--window-size=1280,2000", "--virtual-time-budget=10000",
        "--screenshot=" + shot, "file://" + os.path.abspath(page)], timeout=120)
    if r.returncode != 0 or not os.path.exists(shot) or os.path.getsize(shot) < 10000:
        sys.exit(f"no screenshot at {shot} ({r.returncode}): {r.stderr[-2000:]}")
    print(f"screenshot: {shot}")

    # The check itself must fail on a broken chart: a path the browser cannot parse (a console
    # error, nothing drawn), and a path that lost a point (drawn, but not all its data).
    with open(page) as f:
        html = f.read()
    lost_point = re.sub(r'( d="M[0-9.]+ [0-9.]+) L[0-9.]+ [0-9.]+', r"\1", html, count=1)
    for name, text in (("unparsable", html.replace(' d="M', ' d="M NaN ', 1)),
                       ("lost-point", lost_point)):
        if text == html:
            sys.exit(f"could not make the {name} page: the report has no path to break")
        broken = os.path.join(a.work, f"broken-{name}.html")
        with open(broken, "w") as f:
            f.write(text)
        problems = check(a.chromium, a.work, broken, charts)
        if not problems:
            sys.exit(f"the check passed the {name} page: it would not catch a broken chart")
        print(f"the {name} page is caught: " + "; ".join(problems))

if __name__ == "__main__":
    main()
