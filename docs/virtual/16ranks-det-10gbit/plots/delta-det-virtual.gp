set terminal pngcairo size 1000,600 noenhanced font ',10'
set output 'delta-det-virtual.png'
set terminal pngcairo size 1000,320 noenhanced font ',10'
set output 'delta-det-virtual.png'
set multiplot layout 1,1 title 'Δ over steps: Fashion-MNIST detection set'
set title 'SelSync δ=0.3'
set logscale y
set grid
set ylabel 'Δ'
set xlabel 'step'
set key outside right
plot 'delta-det-virtual-selsync-0.3.dat' using 1:2 with lines lc rgb '#888888' title 'Δ (whole model)', 0.3 with lines lw 2 lc rgb 'red' title 'δ = 0.3', 'delta-det-virtual-selsync-0.3.dat' using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.5 lc rgb 'blue' title 'synchronised'
unset logscale y

unset multiplot
