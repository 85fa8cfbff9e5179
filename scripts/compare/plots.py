"""The plots (gnuplot, PNG) of a comparison."""
import math
import os
import subprocess

from .common import NETWORKS, fail, write
from .metrics import curve
from .report import net_label

def plots(args, out, runs, all_suites, gnuplot):
    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    made = []

    def gp(name, script):
        path = os.path.join(pdir, name + ".gp")
        write(path, "set terminal pngcairo size 1000,600 noenhanced font ',10'\nset output '%s.png'\n%s"
              % (name, script))
        p = subprocess.run([gnuplot, name + ".gp"], cwd=pdir, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode or not os.path.exists(os.path.join(pdir, name + ".png")):
            fail("gnuplot failed on %s:\n%s" % (path, p.stdout[-2000:]))
        made.append(name + ".png")

    def q(s):
        return "'" + s.replace("'", "") + "'"

    for skey in args.suites:
        s = all_suites[skey]
        for net in NETWORKS:
            done = [r for r in runs if r.suite is s and r.net == net and r.result]
            if len(done) < 2:
                continue
            tag = "%s-%s" % (skey, net)
            # accuracy vs training time
            plotcmd = []
            for r in done:
                dat = "acc-%s-%s.dat" % (tag, r.key)
                write(os.path.join(pdir, dat), "".join("%d\t%.4f\t%.6f\n" % p for p in curve(args, r.result)))
                plotcmd.append("%s using 2:3 with linespoints title %s" % (q(dat), q(r.label)))
            gp("accuracy-" + tag, "set title %s\nset xlabel 'training time (s)%s'\nset ylabel 'held-out %s'\n"
               "set key outside right\nset grid\nplot %s\n"
               % (q("%s, %d ranks, %s" % (s.title, args.ranks, net_label(args, net))),
                  ", modelled" if net == "modelled" else "", s.metric, ", ".join(plotcmd)))
            # bytes per method
            dat = "bytes-%s.dat" % tag
            write(os.path.join(pdir, dat), "".join(
                "%s\t%.4f\t%.4f\n" % (q(r.label).replace("'", '"'), r.result["bytes"] / 1e6, r.result["inject"] / 1e6)
                for r in done))
            gp("bytes-" + tag, "set title %s\nset ylabel 'MB sent per rank'\nset style data histograms\n"
               "set style histogram rowstacked\nset style fill solid 0.8 border -1\nset boxwidth 0.7\n"
               "set xtics rotate by -30\nset grid ytics\nset key top right\n"
               "plot %s using 2:xtic(1) title 'synchronisation', '' using 3 title 'injection'\n"
               % (q("bytes sent per rank: %s, %d ranks, %d steps" % (s.title, args.ranks, done[0].steps)), q(dat)))
            # delta over steps, with the threshold and the synchronised steps
            sel = [r for r in done if r.settings["method"] == "selsync"]
            if sel:
                parts = ["set multiplot layout %d,1 title %s" % (len(sel), q("Δ over steps: " + s.title))]
                for r in sel:
                    dat = "delta-%s-%s.dat" % (tag, r.key)
                    write(os.path.join(pdir, dat), "".join(
                        "%d\t%s\t%d\n" % (x["step"], repr(x["change"]) if math.isfinite(x["change"]) else "NaN",
                                          x["decision"] == "sync") for x in r.result["rows"]))
                    d = float(r.settings.get("delta", 0.3))  # [selsync]'s default when the method sets none
                    parts.append("set title %s\nset logscale y\nset grid\nset ylabel 'Δ'\nset xlabel 'step'\n"
                                 "set key outside right\n"
                                 "plot %s using 1:2 with lines lc rgb '#888888' title 'Δ (whole model)', "
                                 "%g with lines lw 2 lc rgb 'red' title 'δ = %g', "
                                 "%s using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.5 lc rgb 'blue' "
                                 "title 'synchronised'\nunset logscale y\n"
                                 % (q(r.label), q(dat), d, d, q(dat)))
                parts.append("unset multiplot")
                gp("delta-" + tag, "set terminal pngcairo size 1000,%d noenhanced font ',10'\nset output 'delta-%s.png'\n%s\n"
                   % (260 * len(sel) + 60, tag, "\n".join(parts)))
    # non-IID: final accuracy without and with injection
    for net in NETWORKS:
        a = {r.key: r for r in runs if r.suite.key == "label" and r.net == net and r.result}
        b = {r.key: r for r in runs if r.suite.key == "label-inject" and r.net == net and r.result}
        keys = [k for k in a if k in b]
        if not keys:
            continue
        dat = "noniid-%s.dat" % net
        write(os.path.join(pdir, dat), "".join('"%s"\t%.4f\t%.4f\n' % (a[k].label, a[k].result["final"],
                                                                    b[k].result["final"]) for k in keys))
        gp("noniid-" + net, "set title %s\nset ylabel 'held-out top-1 (classes held by the ranks)'\n"
           "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
           "set xtics rotate by -30\nset yrange [0:1]\nset grid ytics\nset key top right\n"
           "plot %s using 2:xtic(1) title 'without injection', '' using 3 title 'with injection (0.5, 0.5)'\n"
           % (q("skewed data (%d classes per rank, %d ranks): final accuracy" % (args.classes_per_rank, args.ranks)),
              q(dat)))
    return made
