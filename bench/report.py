"""report.py - the benchmark's output: the table on stdout, the .tsv and
Markdown copies, and the gnuplot chart of Cairn/local ratios."""

import os
import subprocess
import sys
import time

MiB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


# Figures other systems reached on the same workloads, from the project's
# ANCHORS.md (2-core Debian 12 VM, single runs): local ext4 / libfuse
# passthrough with long cache timeouts / OpenAFS FUSE client. Keyed by the
# start of our metric name; same units as our rows.
ANCHORS = [
    ("stat depth 1,", "331 / 442 / 495"),
    ("stat depth 27,", "925 / 1,854 / 1,792"),
    ("open+close", "635 / 67,564 / 41,885"),
    ("include search warm", "772 / 1,036 / 25,934"),
    ("include search after drop_caches", "2,860 / 31,780 / 22,533"),
    ("stat 2 threads / 1 thread", "1.09 / 1.30 / 1.52"),
    ("write ", "0.09 / 0.31 / 1.57 (100 MiB)"),
    ("re-read same client", "6,700 / 878 / 86"),
    ("re-read after drop_caches", "761 / 666 / 80"),
    ("first read on second client", "– / – / 83"),
    ("append after 16 sparse", "1.0 / 0.93 / 0.75"),
    ("append after 1000 sparse", "2.4 / 0.92 / 0.82"),
    ("netCDF", "0.17-0.71 / 2.5-2.7 / 7.4 (200 recs)"),
    ("copy /usr/include", "1.86 / 3.75 / 9.5 (8,169 files)"),
    ("cold stat of every entry", "0.12 / 0.28 / 1.05"),
    ("cold read of every file", "0.94 / 1.87 / 6.7"),
    ("rm -rf", "0.76 / 1.60 / 3.7"),
    ("dbench 2 clients", "1,049 / 122 / 28.9"),
    ("write+close on A", "– / – / 0.005"),
]


def anchor(metric):
    for prefix, text in ANCHORS:
        if metric.startswith(prefix):
            return text
    return ""


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if abs(v) >= 1000:
        return "{:,.0f}".format(v)
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    if abs(v) >= 1:
        return "%.2f" % v
    return "%.3g" % v


def ratio(row):
    lo, ca = row["local"], row["cairn"]
    if isinstance(lo, (int, float)) and isinstance(ca, (int, float)) and lo:
        return ca / lo
    return None


def cost_ratio(row):
    """How many times worse than local, for the chart: time/time, or
    rate inverted so that 1 is always local speed and up is always worse."""
    r = ratio(row)
    if r is None or r <= 0:
        return None
    return r if row["kind"] == "time" else 1.0 / r


def table_rows(R):
    head = ["workload", "metric", "unit", "local", "cairn", "cairn/local",
            "rpcs", "peers: local/FUSE pt/OpenAFS", "detail"]
    rows = []
    for row in R.rows:
        r = ratio(row)
        rows.append([row["workload"], row["metric"], row["unit"],
                     fmt(row["local"]), fmt(row["cairn"]),
                     "%.2f" % r if r is not None else "–",
                     "{:,}".format(row["rpcs"]) if row["rpcs"] is not None else "–",
                     anchor(row["metric"]), row["detail"]])
    return head, rows


def res_rows(R):
    head = ["workload", "server CPU s", "server peak RSS MiB",
            "client CPU s", "client peak RSS MiB", "clients", "rpcs",
            "MiB to server", "MiB from server"]
    rows = []
    for wl, r in R.res.items():
        if isinstance(r, str):
            rows.append([wl, r] + [""] * (len(head) - 2))
            continue

        def m(k):
            return "%.1f" % (r[k] / 1024.0) if r.get(k) else "?"

        def c(k):
            return "%.2f" % r[k] if r.get(k) is not None else "?"
        rows.append([wl, c("srv_cpu"), m("srv_hwm"),
                     c("cli_cpu") if r.get("daemon_found") else "? (daemon not found)",
                     m("cli_hwm"), str(r["clients"]),
                     "{:,}".format(r["rpcs"]) if r["rpcs"] is not None else "?",
                     "%.1f" % (r["bytes_in"] / MiB) if r["bytes_in"] is not None else "?",
                     "%.1f" % (r["bytes_out"] / MiB) if r["bytes_out"] is not None else "?"])
    return head, rows


def text_table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    widths[-1] = 0  # last column free-form
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] +
                     [line(r) for r in rows])


def md_table(head, rows):
    esc = lambda x: str(x).replace("|", "\\|")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(esc(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def write_chart(R, base):
    """Bars from 1 (local speed) to Cairn's cost ratio on a log axis: up is
    slower than local, down is faster. Phases where Cairn failed get an
    "error" mark at 1 so they are not silently missing."""
    dat = base + ".dat"
    pts = []
    for row in R.rows:
        if row["local"] is None and row["cairn"] is None:
            continue
        c = cost_ratio(row)
        label = "%s: %s" % (row["workload"], row["metric"])
        if c is not None:
            pts.append((label, c, "%.2gx" % c if c < 100 else "%.0fx" % c))
        elif isinstance(row["cairn"], str) and row["cairn"].startswith("ERR"):
            pts.append((label, None, "error"))
    if not any(c for _, c, _ in pts):
        return None
    with open(dat, "w") as f:
        for i, (label, c, text) in enumerate(pts):
            f.write('%d\t%s\t"%s"\t"%s"\n' % (
                i, "%g" % c if c else "NaN", label.replace('"', "'")[:60], text))
    vals = [c for _, c, _ in pts if c]
    script = """
set terminal png size 1400,1000 font ",9"
set output '{png}'
set title "Cairn cost relative to local disk (1 = local speed; bars up = slower, down = faster; log scale)"
set logscale y
set yrange [{lo}:{hi}]
set xrange [-0.6:{n}-0.4]
set ylabel "Cairn / local for times, local / Cairn for rates"
set style fill solid 0.8
set grid ytics
set xtics nomirror rotate by -60 left noenhanced
set bmargin 30
unset key
plot '{dat}' using 1:(1):($1-0.35):($1+0.35):($2<1?$2:1):($2<1?1:$2):xtic(3) with boxxyerror lc rgb "#3a6ea5", \
     1 with lines lc rgb "#c03030" lw 2, \
     '{dat}' using 1:(strcol(4) eq "error" ? 1 : $2):4 with labels offset 0,0.8 noenhanced tc rgb "#202020"
""".format(png=base + ".png", dat=dat, n=len(pts),
           lo=min(min(vals), 1.0) / 2, hi=max(max(vals), 1.0) * 3)
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True,
                       timeout=60, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    except subprocess.CalledProcessError as e:
        log("gnuplot failed: %s" % e.stderr.strip())
        return None
    except (subprocess.SubprocessError, OSError) as e:
        log("gnuplot failed: %s" % e)
        return None
    return base + ".png"


def commit_id():
    try:
        return subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=10).stdout.strip() or "nocommit"
    except (OSError, subprocess.SubprocessError):
        return "nocommit"


def write_outputs(cfg, R, elapsed):
    head, rows = table_rows(R)
    rhead, rrows = res_rows(R)
    out_dir = cfg["out"]
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"),
                                            commit_id()))
    mode = "tiny" if cfg["tiny"] else "full"
    print()
    print(text_table(head, rows))
    print()
    print("CPU and peak RSS of the Cairn processes per workload:")
    print(text_table(rhead, rrows))
    with open(base + ".tsv", "w") as f:
        f.write("\t".join(["section"] + head + ["kind"]) + "\n")
        for row, r in zip(R.rows, rows):
            f.write("\t".join(["result"] + [str(x) for x in r] + [row["kind"]]) + "\n")
        f.write("\t".join(["section"] + rhead) + "\n")
        for r in rrows:
            f.write("\t".join(["resources"] + r) + "\n")
    png = write_chart(R, base)
    with open(base + ".md", "w") as f:
        f.write("# Cairn benchmark, %s run, %s, commit %s\n\n" % (
            mode, time.strftime("%Y-%m-%d %H:%M"), commit_id()))
        f.write("Machine: %d cores, %s. Run took %.0f s. rpcs = server round "
                "trips (status counters, STATUS/HELLO of the probe removed); "
                "cairn/local > 1 is slower for times, < 1 is slower for "
                "rates (MB/s, kstat/s, x scaling).\n\n" % (
                    os.cpu_count(), os.uname().release, elapsed))
        f.write(md_table(head, rows) + "\n\n")
        f.write("CPU seconds and peak RSS of the Cairn server and client "
                "daemon(s) per workload:\n\n")
        f.write(md_table(rhead, rrows) + "\n")
        if png:
            f.write("\n![ratios](%s)\n" % os.path.basename(png))
    print()
    print("results: %s.tsv %s.md%s" % (base, base, " " + png if png else ""))
