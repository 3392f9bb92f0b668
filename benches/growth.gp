# The growth curves of make bench (benches/growth.sh): gnuplot -e "DAT='growth.dat'; OUT='growth.svg'; TITLE='...'" growth.gp
# DAT: one line per network size: N, then ms per ADD of cnibox, reference, netavark, the
# kernel floor, then ms per DEL of the same four ("n/a" where one did not run).
set terminal svg size 1000,430 dynamic font 'sans,13' background '#ffffff'
set output OUT
set datafile missing "n/a"
set multiplot layout 1,2 title "One bridge network filling up: ms per call at N attachments (".TITLE.")"
set logscale xy
set xlabel "attachments on the network"
set ylabel "ms per call (median of ten, log scale)"
set grid xtics ytics mytics lc rgb '#dddddd'
set key top left Left reverse
set xrange [0.8:*]
set xtics ("1" 1, "10" 10, "50" 50, "100" 100, "250" 250, "1000" 1000)
set style line 1 lc rgb '#1b7837' lw 3 pt 7 ps 0.8
set style line 2 lc rgb '#b2182b' lw 2 pt 5 ps 0.8
set style line 3 lc rgb '#2166ac' lw 2 pt 9 ps 0.9
set style line 4 lc rgb '#777777' lw 2 dt 2 pt 1 ps 0.8
set title "ADD (netavark: setup)"
plot DAT using 1:2 w lp ls 1 t 'cnibox', '' using 1:3 w lp ls 2 t 'reference', \
     '' using 1:4 w lp ls 3 t 'netavark', '' using 1:5 w lp ls 4 t 'kernel floor (ip -batch)'
set title "DEL (netavark: teardown)"
plot DAT using 1:6 w lp ls 1 t 'cnibox', '' using 1:7 w lp ls 2 t 'reference', \
     '' using 1:8 w lp ls 3 t 'netavark', '' using 1:9 w lp ls 4 t 'kernel floor (ip link del)'
unset multiplot
