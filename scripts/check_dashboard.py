#!/usr/bin/python3
"""The example Grafana dashboard queries only what fenceqd exports.

Starts a real fenceqd (client clock, --metrics-listen on a free loopback
port), makes a few jobs happen through the fenceq tool (claims, a completion,
a stale complete refused, a fail), scrapes /metrics over HTTP, and checks
every PromQL expression of the dashboard (its panels' targets and its query
variables): each metric name it uses must be exported, and each label it
matches on or aggregates by must be one of that metric's labels. Also checks
the dashboard's shape: Grafana 9+ JSON (schemaVersion >= 36), the Prometheus
data source variable ${DS_PROMETHEUS} used by every panel and target, and a
`queue` template variable.

Usage: check_dashboard.py --fenceqd PATH --tool PATH DASHBOARD.json
Exits 0 when all holds, 1 naming every problem. Standard library only.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

DS_UID = "${DS_PROMETHEUS}"

# PromQL words that are not metric names: keywords and aggregation modifiers.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_exposition(text: str) -> dict:
    """{metric name: set of label names} from the Prometheus text format."""
    metrics: dict = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s", line)
        if not m:
            raise ValueError(f"not a sample line: {line!r}")
        labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', m.group(3) or ""))
        metrics.setdefault(m.group(1), set()).update(labels)
    return metrics


def expr_parts(expr: str):
    """(metric names with the labels each selector matches on, labels grouped by) of a PromQL
    expression: a small tokenizer, enough for dashboards (no string may hold a brace)."""
    e = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)  # strings
    e = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*", "1", e)        # Grafana variables
    e = re.sub(r"\[[^\]]*\]", "", e)                                    # ranges, subqueries
    grouped = set()

    def group(m):
        grouped.update(x.strip() for x in m.group(2).split(",") if x.strip())
        return " "

    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", group, e)
    selectors = []
    for m in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}", e):
        selectors.append((m.group(1), set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)",
                                                     m.group(2)))))
    bare = re.sub(r"\{[^}]*\}", " ", e)
    names = []
    for m in re.finditer(r"(?<![A-Za-z0-9_:.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", bare):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue  # a function, or a keyword
        names.append(word)
    labels_of = {}
    for name, labels in selectors:
        if name is None:
            continue
        labels_of.setdefault(name, set()).update(labels)
    for name in names:
        labels_of.setdefault(name, set())
    return labels_of, grouped


def dashboard_exprs(dash: dict, problems: list):
    """Every PromQL expression, with where it is; checks data sources on the way."""
    exprs = []

    def walk(panels):
        for p in panels:
            where = f"panel {p.get('title')!r}"
            if p.get("type") == "row":
                walk(p.get("panels", []))
                continue
            if (p.get("datasource") or {}).get("uid") != DS_UID:
                problems.append(f"{where}: datasource is not {DS_UID}")
            targets = p.get("targets") or []
            if not targets:
                problems.append(f"{where}: no query")
            for t in targets:
                if (t.get("datasource") or {}).get("uid") != DS_UID:
                    problems.append(f"{where}, target {t.get('refId')}: datasource is not {DS_UID}")
                if not t.get("expr"):
                    problems.append(f"{where}, target {t.get('refId')}: no expr")
                else:
                    exprs.append((f"{where}, target {t.get('refId')}", t["expr"]))

    walk(dash.get("panels", []))
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("DS_PROMETHEUS")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no Prometheus data source variable DS_PROMETHEUS")
    if "queue" not in variables:
        problems.append("no `queue` template variable")
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)\s*", q or "")
        if not m:
            problems.append(f"variable {name}: not label_values(SELECTOR, LABEL): {q!r}")
            continue
        # label_values(metric, label): the label must be the metric's.
        exprs.append((f"variable {name}", f"sum by ({m.group(2)}) ({m.group(1)})"))
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
        problems.append("schemaVersion is not Grafana 9's (36 or later)")
    return exprs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fenceqd", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("dashboard")
    args = ap.parse_args()

    problems: list = []
    with open(args.dashboard, encoding="utf-8") as f:
        dash = json.load(f)
    exprs = dashboard_exprs(dash, problems)
    if not exprs:
        problems.append("the dashboard has no query")

    tmp = tempfile.mkdtemp(prefix="fqdash.")
    port = free_port()
    endpoint = f"ipc://{tmp}/s"
    log = open(os.path.join(tmp, "fenceqd.log"), "w")
    daemon = subprocess.Popen([args.fenceqd, "--db", f"{tmp}/db", "--listen", endpoint,
                               "--clock", "client", "--metrics-listen", f"127.0.0.1:{port}"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        def tool(*argv, now=None, ok=(0,)):
            cmd = [args.tool, "--endpoint", endpoint]
            if now is not None:
                cmd += ["--now", str(now)]
            r = subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=30)
            if r.returncode not in ok:
                raise RuntimeError(f"fenceq {' '.join(argv)}: exit {r.returncode}: {r.stdout}{r.stderr}")
            return r.stdout.strip()

        for _ in range(100):
            if subprocess.run([args.tool, "--endpoint", endpoint, "--timeout", "0.5", "ping"],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("fenceqd did not answer ping")
        # A few jobs: claims, a completion, a stale complete refused, a fail.
        for i in range(3):
            tool("enqueue", f"j{i}", "--queue", "dash", now=1)
        tool("claim", "j0", "w", "10", now=2)
        tool("complete", "j0", "w", "1", "done", now=3)
        tool("complete", "j0", "w", "1", "again", now=4, ok=(1,))
        tool("claim", "j1", "w", "10", now=5)
        tool("fail", "j1", "w", "1", "boom", now=6)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            exported = parse_exposition(r.read().decode("utf-8"))
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)

    used = set()
    for where, expr in exprs:
        labels_of, grouped = expr_parts(expr)
        if not labels_of:
            problems.append(f"{where}: no metric in {expr!r}")
        known_labels = set()
        for name, labels in labels_of.items():
            used.add(name)
            if name not in exported:
                problems.append(f"{where}: {name} is not exported by fenceqd ({expr!r})")
                continue
            known_labels |= exported[name]
            for label in sorted(labels - exported[name]):
                problems.append(f"{where}: {name} has no label {label!r} ({expr!r})")
        if all(n in exported for n in labels_of):
            for label in sorted(grouped - known_labels - {"instance", "job"}):
                problems.append(f"{where}: grouped by {label!r}, which none of "
                                f"{sorted(labels_of)} has ({expr!r})")
    for p in problems:
        print(f"check_dashboard: {p}")
    if problems:
        return 1
    print(f"check_dashboard: ok: {len(exprs)} queries, metrics used: {', '.join(sorted(used))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
