# Statistics over bench/run.sh's raw samples: lines "FIG CFG REP KEY VALUE".
#
#   awk -v mode=M -v fig=F -v cfg=C -v key=K [-v base=B] -f stat.awk RAW
#
# mode med    median of VALUE over the repetitions of (F, C, K)
#      min    smallest
#      n      how many repetitions
#      list   the values, comma-separated, in repetition order
#      diff   median over repetitions of (F,C,K) - (F,B,K), paired by REP
#      ratio  median over repetitions of (F,C,K) / (F,B,K), paired by REP
#      dmad   median absolute deviation of those paired differences (the
#             run-to-run noise of "diff")
# Prints NA when there is nothing to compute.
function median(a, n,    i, j, t) {
    for (i = 2; i <= n; i++) {
        t = a[i]
        for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
        a[j + 1] = t
    }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == fig && $4 == key && $5 != "" {
    if ($2 == cfg) { v[$3] = $5 + 0; order[++nv] = $3 }
    if (base != "" && $2 == base) w[$3] = $5 + 0
}
END {
    n = 0
    if (mode == "med" || mode == "min" || mode == "n") {
        for (i = 1; i <= nv; i++) x[++n] = v[order[i]]
        if (mode == "n") { print n; exit }
        if (n == 0) { print "NA"; exit }
        if (mode == "min") { m = x[1]; for (i = 2; i <= n; i++) if (x[i] < m) m = x[i]; print m; exit }
        print median(x, n)
    } else if (mode == "list") {
        s = ""
        for (i = 1; i <= nv; i++) s = s (i > 1 ? "," : "") v[order[i]]
        print (s == "" ? "NA" : s)
    } else if (mode == "diff" || mode == "ratio" || mode == "dmad") {
        for (i = 1; i <= nv; i++) {
            r = order[i]
            if (!(r in w)) continue
            if (mode == "ratio") { if (w[r] == 0) continue; x[++n] = v[r] / w[r] }
            else x[++n] = v[r] - w[r]
        }
        if (!n) { print "NA"; exit }
        if (mode != "dmad") { print median(x, n); exit }
        for (i = 1; i <= n; i++) y[i] = x[i]
        m = median(y, n)
        for (i = 1; i <= n; i++) { d = x[i] - m; y[i] = d < 0 ? -d : d }
        print median(y, n)
    }
}
