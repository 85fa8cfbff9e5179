set terminal pngcairo size 1000,600 noenhanced font ',10'
set output 'bytes-det-virtual.png'
set title 'bytes sent per rank: Fashion-MNIST detection set, 16 ranks, 700 steps'
set ylabel 'MB sent per rank'
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -30
set grid ytics
set key top right
plot 'bytes-det-virtual.dat' using 2:xtic(1) title 'synchronisation', '' using 3 title 'injection'
